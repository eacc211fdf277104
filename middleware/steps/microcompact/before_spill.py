"""Compaction before spill (Hermes): when the context is tight, old results are
summarised before a new result's cap is lowered, so the model gets a useful chunk of the
new result rather than a sliver.

The budget step asks for it; the microcompaction step does the summarising (with its
summary text and spill pointer, so nothing is lost). Which results are summarised for a
turn depends only on the history before that turn, so later requests make the same
choice and the rewrite happens once.
"""

from __future__ import annotations

from middleware.plugin.context import StepContext
from middleware.policy.settings import bind
from middleware.steps.microcompact.settings import MicrocompactSettings
from middleware.view import ConversationIndex

#: What the step leaves in ``StepContext.shared``: (node, block) of results to summarise.
SHARED_KEY = "compact_first"
#: Characters a one-line summary is estimated to keep (the decision costs no I/O).
SUMMARY_ESTIMATE = 300


def compact_first(
    index: ConversationIndex, turn: int, used_chars: int, protect: int, context: StepContext
) -> int:
    """Ask for the results older than ``protect`` turns before ``turn`` to be summarised
    and return the history size they would leave."""
    compaction = bind(context.policy, MicrocompactSettings)
    requested: set[tuple[int, int]] = context.shared.setdefault(SHARED_KEY, set())
    reclaimed = 0
    for site in index.results:
        if site.turn is None or site.turn >= turn - protect:
            continue
        if site.result.is_error or site.tool_name in compaction.exempt_tools:
            continue
        text = site.result.text
        if len(text) < max(compaction.min_content, SUMMARY_ESTIMATE * 2):
            continue
        if compaction.is_summary(text, context.spill.load):
            continue
        requested.add((site.node, site.block))
        reclaimed += len(text) - SUMMARY_ESTIMATE
    return max(used_chars - reclaimed, 0)
