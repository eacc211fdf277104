"""Pairing repair: the plan, what the analysis (:mod:`.analysis`) decides and the layout
(:mod:`.placement`) lays out: the history split into *regions* (one assistant turn and the
nodes after it, up to the next turn), the calls each turn keeps and the results they
claim; and what the analysis needs to know besides the nodes (:class:`Rules`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from middleware.formats.base import Codec
from middleware.view import Node, ToolCall, ToolResult

Fate = Literal["claimed", "orphan", "duplicate"]


class Recorder(Protocol):
    """What the step reports through (``StepContext.record`` has this signature)."""

    def __call__(
        self,
        kind: str,
        *,
        tool_call_id: str,
        tool_name: str | None = ...,
        message_index: int | None = ...,
        chars_before: int = ...,
        chars_after: int = ...,
        **detail: Any,
    ) -> None: ...


@dataclass
class CallEntry:
    """A tool call: where it is and the result that answers it (if any)."""

    node: int
    call: ToolCall
    #: The id as it came in (results carry this one); ``call.id`` is the final id.
    original_id: str
    result: ResultEntry | None = None
    #: Dropped (no tool name): what answers it is dropped with it.
    dropped: bool = False


@dataclass
class ResultEntry:
    """A structured tool result in a region's tail, and what becomes of it."""

    node: int
    block: int
    #: The result as it will be written (its id follows a renamed call).
    result: ToolResult
    fate: Fate
    call: CallEntry | None = None
    #: Why an orphan or a duplicate is dropped.
    reason: str = ""


@dataclass
class Region:
    """One assistant turn (consecutive assistant nodes) and the nodes up to the next turn.

    The first region has no assistant nodes: it holds what comes before the first turn.
    """

    assistants: list[int] = field(default_factory=list)
    tail: list[int] = field(default_factory=list)


@dataclass
class Plan:
    regions: list[Region]
    #: Kept calls of each assistant node, in block order.
    calls: dict[int, list[CallEntry]]
    #: Assistant nodes whose calls changed (``None``: the node goes, left with nothing a
    #: provider accepts: a Responses item whose call was dropped, a message of only
    #: dropped calls).
    assistant_nodes: dict[int, Node | None]
    #: Every structured result in a tail, by (node, block).
    results: dict[tuple[int, int], ResultEntry]
    #: Calls dropped for having no tool name, by assistant node.
    dropped: dict[int, list[CallEntry]] = field(default_factory=dict)


def is_paired_result(block: object) -> bool:
    """A structured tool result (text-protocol outputs are never paired)."""
    return isinstance(block, ToolResult) and not block.text_protocol


def split_regions(nodes: Sequence[Node]) -> list[Region]:
    regions = [Region()]
    for index, node in enumerate(nodes):
        last = regions[-1]
        if node.role == "assistant":
            if last.assistants and not last.tail:
                last.assistants.append(index)
            else:
                regions.append(Region([index]))
        else:
            last.tail.append(index)
    return regions


#: Texts other agents write for a tool result they never got (compared whole, stripped).
PLACEHOLDER_TEXTS = frozenset(
    {
        "aborted",  # Codex CLI's ensure_call_outputs_present
        "No result provided",  # pi's transformMessages
        "[openclaw] missing tool result in session history; inserted synthetic error result "
        "for transcript repair.",  # OpenClaw's session-transcript-repair
        "A restart occurred while this tool was in progress",  # a restarted agent's notice
    }
)


@dataclass(frozen=True)
class Rules:
    """What the analysis needs to know besides the nodes."""

    codec: Codec
    #: Rename ids repeated across turns (Anthropic).
    unique_ids: bool = False
    #: Rename ids the Anthropic API rejects.
    sanitize_ids: bool = False
    #: The policy's synthetic result text (a result reading so is a stand-in).
    missing_text: str = ""

    def placeholder(self, result: ToolResult) -> bool:
        """Whether ``result`` stands in for an output rather than being one: an error
        result, or the synthetic text of this repair or of a peer's."""
        if result.is_error:
            return True
        text = result.text.strip()
        return text == self.missing_text.strip() or text in PLACEHOLDER_TEXTS


def jsonable(value: Any) -> Any:
    """Content and arguments as JSON-serialisable values for the report."""
    if isinstance(value, tuple):
        return [jsonable(v) for v in value]
    return value
