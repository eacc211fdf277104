"""Admission at dispatch time: what a host hands ``Pipeline.admit`` and gets back, the turn
the ``admit_outputs`` hook bounds, and the cap a result of a tool gets (:class:`Cap`, the
``result_cap`` hook's answer).

A host that sees a tool's output before it enters the history can bound it then, with the
same budget step a request would run, and the outcome is frozen for the call id. These are
the pipeline's and the budget plugin's common words: neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from middleware.report import Action, ProblemReport
from middleware.view import Conversation, Node, ToolCall, ToolResult

#: The wire format of the turn admitted at dispatch, when the agent's is not known yet:
#: Anthropic's rules are the strictest (an empty result needs text), so what is admitted
#: is valid in every format.
DISPATCH_FORMAT = "anthropic"


@dataclass(frozen=True)
class ToolOutput:
    """One tool call's output, as the host's agent loop has it when the tool returns."""

    tool_name: str
    tool_use_id: str
    output: str
    #: The call's arguments (a dict or a JSON string): line rules read an offset from them.
    arguments: Any = None
    is_error: bool = False

    @classmethod
    def of(cls, item: object) -> ToolOutput:
        """``item`` itself, or the output a mapping of its fields describes."""
        if isinstance(item, ToolOutput):
            return item
        if not isinstance(item, Mapping):
            raise TypeError(
                f"admit_batch() takes a ToolOutput or a mapping of its fields for each "
                f"output, got {type(item).__name__}"
            )
        missing = [name for name in ("tool_name", "tool_use_id", "output") if name not in item]
        if missing:
            raise ValueError(
                f"admit_batch(): an output mapping is missing {', '.join(map(repr, missing))}"
            )
        unknown = sorted(set(item) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"admit_batch(): unknown output field(s) {', '.join(unknown)}")
        return cls(**item)

    def __post_init__(self) -> None:
        for name in ("tool_name", "tool_use_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"admit() needs {name} as a non-empty string, got {value!r}")
        if not isinstance(self.output, str):
            raise TypeError(
                f"admit() takes the tool output as a string, got {type(self.output).__name__}"
            )


@dataclass(frozen=True)
class Cap:
    """The cap that applies to one result (``None``: exempt) and where it came from."""

    max_chars: int | None
    source: str


@dataclass(frozen=True)
class Admission:
    """What :meth:`Pipeline.admit` returns for one output."""

    #: The result to put in the history (the output itself when it was within bounds).
    text: str
    #: The per-call budget that applied (``None``: the tool is not limited).
    budget: int | None
    actions: tuple[Action, ...] = ()
    problems: tuple[ProblemReport, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.actions)


def check_batch(outputs: Sequence[ToolOutput], calls: object, context: object) -> None:
    """Clear errors for a batch ``admit`` cannot work with."""
    if not outputs:
        raise ValueError("admit_batch() needs at least one ToolOutput")
    ids = [o.tool_use_id for o in outputs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"admit_batch() got the same tool_use_id twice: {ids}")
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < len(outputs):
        raise ValueError(
            f"parallel_calls must be an integer of at least {len(outputs)} "
            f"(the outputs admitted together), got {calls!r}"
        )
    if context is not None and (
        isinstance(context, bool) or not isinstance(context, int) or context < 0
    ):
        raise ValueError(f"context_chars must be a non-negative integer or None, got {context!r}")


def batch_conversation(outputs: Sequence[ToolOutput]) -> Conversation:
    """One assistant turn making the calls and one message answering them, in
    :data:`DISPATCH_FORMAT`: the shape the budget step sees at request time for a batch of
    parallel calls (the ``admit_outputs`` hook's ``conversation``)."""
    calls = tuple(ToolCall(o.tool_use_id, o.tool_name, o.arguments or {}) for o in outputs)
    results = tuple(ToolResult(o.tool_use_id, o.output, is_error=o.is_error) for o in outputs)
    return Conversation(DISPATCH_FORMAT, [Node("assistant", calls), Node("tool", results)])
