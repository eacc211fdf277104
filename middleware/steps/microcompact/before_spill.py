"""Compaction before spill (Hermes): when the context is tight, old results are
summarised before a new result's cap is lowered, so the model gets a useful chunk of the
new result rather than a sliver.

The budget step asks through the ``compact_before_spill`` hook, implemented here: the
answer is a promise, kept by this plugin's ``microcompact`` step, which summarises the
results promised (with its summary text and spill pointer, so nothing is lost). The
promise travels in ``StepContext.shared`` under this plugin's own key. Which results are
summarised for a turn depends only on the history before that turn, so later requests make
the same choice and the rewrite happens once.
"""

from __future__ import annotations

from middleware.plugin.context import StepContext
from middleware.plugin.markers import hookimpl
from middleware.policy.settings import bind
from middleware.steps.microcompact.settings import MicrocompactSettings
from middleware.view import ConversationIndex

#: This plugin's key in ``StepContext.shared``: (node, block) of results it promised to
#: summarise.
SHARED_KEY = "middleware.steps.microcompact:promised"
#: Characters a one-line summary is estimated to keep (the decision costs no I/O).
SUMMARY_ESTIMATE = 300


@hookimpl(tryfirst=True)
def compact_before_spill(
    index: ConversationIndex, before_turn: int, context: StepContext
) -> int | None:
    """Promise to summarise the results of turns before ``before_turn`` worth it, and
    return the characters that will take off the history; ``None`` when none is (another
    plugin may then promise something)."""
    compaction = bind(context.policy, MicrocompactSettings)
    requested: set[tuple[int, int]] = context.shared.setdefault(SHARED_KEY, set())
    reclaimed = 0
    for site in index.results:
        if site.turn is None or site.turn >= before_turn:
            continue
        if site.result.is_error or site.result.sealed or site.tool_name in compaction.exempt_tools:
            continue
        text = site.result.text
        if len(text) < max(compaction.min_content, SUMMARY_ESTIMATE * 2):
            continue
        if compaction.is_summary(text, context.spill.load):
            continue
        requested.add((site.node, site.block))
        reclaimed += len(text) - SUMMARY_ESTIMATE
    return reclaimed or None


def promised(context: StepContext) -> set[tuple[int, int]]:
    """(node, block) of the results this plugin promised the budget step to summarise in
    this call."""
    found: set[tuple[int, int]] = context.shared.get(SHARED_KEY, set())
    return found
