"""Step 1, pairing repair: every tool call answered by exactly one result.

A built-in plugin (``repair_pairing``). The rules, per wire format, and the deliberate
differences from ChatCLI are in ``docs/pairing.md``. In short:

* pairing is block-scoped: an assistant turn (consecutive assistant messages) claims the
  results up to the next assistant turn; of several results for one call, a real output
  wins over an error or stand-in one, else the first;
* a call nothing answers gets a synthetic error result (``pairing.missing_result_text``,
  ChatCLI's text by default), of the output type its call wants (Responses);
* a call without a tool name is dropped with whatever answers it;
* orphan and duplicate results are removed and reported with their full content;
* displaced results are moved next to their call;
* a repeated call id inside one message is dropped (reported); with Anthropic, an id
  repeated in a later turn is renamed in the call and in its result;
* a call with no id gets a deterministic one (and the id-less result right after it, when
  that pairing is unambiguous); with Anthropic, an id the API rejects
  (``call_1|fc_2``, more than 64 characters) is renamed in the call and its results;
* with Responses, a reasoning item left without the item it belongs to is removed
  (reported with its content);
* a history that ended on a user turn still does (a user message is added when that
  turn's results were all moved or dropped);
* a valid history is left exactly as it is (no node is replaced or moved).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from middleware.formats.base import Codec
from middleware.plugin.context import StepContext
from middleware.plugin.markers import hookimpl
from middleware.policy.settings import bind, section
from middleware.report import ActionKind
from middleware.steps.pairing.analysis import make_plan
from middleware.steps.pairing.placement import Layout
from middleware.steps.pairing.plan import CallEntry, Recorder, Rules
from middleware.steps.pairing.valid import already_paired
from middleware.view import Conversation, Node, ToolResult

logger = logging.getLogger(__name__)

#: The user turn left where every block of a history's last user turn was moved away
#: (next to the call it answers) or removed (an orphan).
KEPT_TURN_TEXT = "[History repair moved or removed the tool results that were here.]"


@section("pairing")
@dataclass(frozen=True)
class PairingSettings:
    """The ``pairing`` section of a policy."""

    enabled: bool
    missing_result_text: str
    rename_duplicate_ids: bool
    sanitize_ids: bool


def repair(
    conversation: Conversation,
    codec: Codec,
    settings: PairingSettings,
    record: Recorder,
) -> None:
    """Repair the pairing of ``conversation`` in place, reporting through ``record``."""
    nodes = conversation.nodes
    if not any(node.calls or node.results for node in nodes):
        if codec.reasoning_items:
            conversation.nodes[:] = drop_stranded_reasoning(nodes, record)
        return
    rules = Rules(
        codec,
        unique_ids=codec.unique_call_ids and settings.rename_duplicate_ids,
        sanitize_ids=codec.call_id_pattern is not None and settings.sanitize_ids,
        missing_text=settings.missing_result_text,
    )
    if already_paired(nodes, rules):
        return
    plan = make_plan(nodes, rules, record)

    def synthesize(entry: CallEntry) -> ToolResult:
        return codec.synthetic_result(entry.call, settings.missing_result_text)

    laid_out = Layout(nodes, plan, codec, synthesize, record).run()
    if codec.reasoning_items:
        laid_out = drop_stranded_reasoning(laid_out, record)
    keep_user_turn(nodes, laid_out, codec, record)
    if len(laid_out) == len(nodes) and all(a is b for a, b in zip(laid_out, nodes, strict=True)):
        return
    conversation.nodes[:] = laid_out


def keep_user_turn(nodes: list[Node], laid_out: list[Node], codec: Codec, record: Recorder) -> None:
    """A history that ended on a user turn still does: when the repair moved or removed
    everything after the last assistant message (results moved next to their call, or
    orphans), a user message saying so is added, since Anthropic continues a last
    assistant message as a prefill (and an empty history is refused outright)."""
    if not nodes or nodes[-1].role == "assistant":
        return
    if laid_out and laid_out[-1].role != "assistant":
        return
    laid_out.append(codec.user_node(KEPT_TURN_TEXT))
    record(
        ActionKind.USER_TURN_ADDED,
        tool_call_id="",
        message_index=None,
        text=KEPT_TURN_TEXT,
        reason="the history ended on a user turn whose content was all moved or removed; "
        "ending on the assistant message instead would have it continued as a prefill",
    )


def drop_stranded_reasoning(nodes: list[Node], record: Recorder) -> list[Node]:
    """Responses: a reasoning item must be followed by the model item it belongs to
    ("Item 'rs_…' of type 'reasoning' was provided without its required following item").
    One left without (an interrupted turn, or its call dropped as a duplicate) is removed
    and reported with its content. The walk goes backwards, so a reasoning item whose only
    follower was such a removed one goes too."""
    stranded: set[int] = set()
    follower_is_model = False  # whether the next kept node is a model item
    for i in range(len(nodes) - 1, -1, -1):
        raw = nodes[i].raw
        if isinstance(raw, dict) and raw.get("type") == "reasoning" and not follower_is_model:
            stranded.add(i)
            continue
        follower_is_model = nodes[i].role == "assistant"
    kept: list[Node] = []
    for i, node in enumerate(nodes):
        if i not in stranded:
            kept.append(node)
            continue
        raw = node.raw
        record(
            ActionKind.REASONING_DROPPED,
            tool_call_id=str(raw.get("id", "")),
            message_index=node.origin,
            item=raw,
            reason="a reasoning item must be followed by the item it belongs to",
        )
    return kept


@hookimpl(tryfirst=True)
def repair_pairing(conversation: Conversation, context: StepContext) -> None:
    """Built-in step 1: make every tool call answered by exactly one result."""
    settings = bind(context.policy, PairingSettings)
    if not settings.enabled or context.internal.continuation:
        return  # with earlier turns held by the provider, what looks unpaired may not be
    before = len(context.internal.actions)
    repair(conversation, context.codec, settings, context.record)
    done = context.internal.actions[before:]
    if done:
        kinds: dict[str, int] = {}
        for action in done:
            kinds[action.kind] = kinds.get(action.kind, 0) + 1
        logger.info(
            "pairing repaired this %s history: %s",
            context.codec.name,
            ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())),
        )
