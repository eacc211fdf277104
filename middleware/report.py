"""What each step did, per tool result: JSON-serialisable, stable in order and content."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10
    from enum import Enum

    class StrEnum(str, Enum):
        """:class:`enum.StrEnum` before Python 3.11: a member is its value as text."""

        def __str__(self) -> str:
            return str.__str__(self)


class Step(StrEnum):
    """The built-in steps' names in reports, in the order the host runs them: the hook
    specifications declare each step hook under one of them (:mod:`middleware.plugin.hookspecs`)."""

    PAIRING = "pairing"
    BUDGET = "budget"
    MICROCOMPACT = "microcompact"


class ActionKind(StrEnum):
    """Every kind of action the built-in steps record (docs/pairing.md, docs/budget.md,
    docs/microcompact.md). A third-party plugin records kinds of its own as plain text."""

    # pairing
    ORPHAN_DROPPED = "orphan_dropped"
    DUPLICATE_RESULT_DROPPED = "duplicate_result_dropped"
    DUPLICATE_CALL_DROPPED = "duplicate_call_dropped"
    UNNAMED_CALL_DROPPED = "unnamed_call_dropped"
    ID_GENERATED = "id_generated"
    ID_RENAMED = "id_renamed"
    RESULT_PAIRED_BY_POSITION = "result_paired_by_position"
    SYNTHETIC_RESULT = "synthetic_result"
    RESULT_RELOCATED = "result_relocated"
    EMPTY_MESSAGE_REMOVED = "empty_message_removed"
    USER_TURN_ADDED = "user_turn_added"
    REASONING_DROPPED = "reasoning_dropped"
    # budget
    SPILLED = "spilled"
    SPILL_FAILED = "spill_failed"
    TRUNCATED_UNSAVED = "truncated_unsaved"
    EMPTY_REPLACED = "empty_replaced"
    DECISION_REPLAYED = "decision_replayed"
    # microcompact
    TRUNCATED = "truncated"
    SUMMARIZED = "summarized"
    INPUT_CLEARED = "input_cleared"
    COMPACTION_SKIPPED = "compaction_skipped"


#: Action kinds whose words are not "<noun> <participle>".
_PHRASES: dict[str, tuple[str, str]] = {
    ActionKind.EMPTY_REPLACED: ("empty result replaced", "empty results replaced"),
    ActionKind.REASONING_DROPPED: ("reasoning item dropped", "reasoning items dropped"),
}


def describe(kind: str, count: int) -> str:
    """An action kind in words, for ``count`` of them: ``orphan_dropped`` -> ``orphans
    dropped``, ``synthetic_result`` -> ``synthetic results``, ``spilled`` -> ``spilled``."""
    if kind in _PHRASES:
        return _PHRASES[kind][count != 1]
    words = kind.split("_")
    nouns = [i for i, word in enumerate(words) if not word.endswith("ed")]
    if count != 1 and nouns:  # the noun is the last word that is not a participle
        noun = words[nouns[-1]]
        words[nouns[-1]] = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return " ".join(words)


@dataclass(frozen=True)
class Action:
    """One thing a step did to one tool call or result.

    ``message_index`` is the position in the *input* history of the message that held the
    call or result (``None`` for something a step created). ``detail`` carries what the
    action needs to be understood or undone (a cap and its source, a spill path, the full
    content of a dropped orphan) and is JSON-serialisable.
    """

    step: str
    kind: str
    tool_call_id: str
    tool_name: str | None = None
    message_index: int | None = None
    chars_before: int = 0
    chars_after: int = 0
    detail: Mapping[str, Any] = field(default_factory=dict)

    def with_detail(self, detail: Mapping[str, Any]) -> Action:
        """This action holding ``detail`` instead. Made without the constructor: a request
        that continues the previous one copies every action that request reported."""
        copy: Action = object.__new__(Action)  # the fields as the constructor sets them
        copy.__dict__.update(self.__dict__, detail=detail)
        return copy


@dataclass(frozen=True)
class SealedBlock:
    """A tool call or result nested too deep to read (more than 128 levels): it was sent
    exactly as it came, and no step shortened it (docs/pairing.md, "Malformed histories")."""

    message_index: int | None
    kind: Literal["tool_call", "tool_result"]
    #: The call's id, or the id the result answers.
    tool_call_id: str


@dataclass(frozen=True)
class ProblemReport:
    """A plugin that failed inside a hook; the default behaviour was used instead."""

    plugin: str
    hook: str
    message: str


@dataclass(frozen=True)
class LoopAlert:
    """One guard that tripped in the current user turn."""

    kind: Literal["too_many_calls", "repeated_call"]
    #: Calls counted, and the limit they passed.
    count: int
    limit: int
    #: The repeated tool (``repeated_call`` only).
    tool_name: str | None
    call_ids: tuple[str, ...]
    #: Whether this call's ``annotate`` action added the notice to the latest result.
    annotated: bool = False

    @property
    def reason(self) -> str:
        if self.kind == "too_many_calls":
            return f"{self.count} tool calls in this turn, over the limit of {self.limit}"
        return f"{self.tool_name} called {self.count} times alike, over the limit of {self.limit}"


@dataclass
class Report:
    """The report of one ``process()`` call."""

    format: str
    #: Why the format was chosen: ``"given"``, the detection evidence, or ``"ambiguous"``.
    format_source: str
    policy: str
    #: Why plain user messages were read as tool output: ``"policy rule"``
    #: (``text_protocol.enabled: true``), ``"recognised <agent> (<its observations>)"``
    #: (auto mode), or ``None``: they were not.
    text_protocol: str | None = None
    messages_before: int = 0
    messages_after: int = 0
    #: Tool results in the history (after processing).
    tool_results: int = 0
    #: Characters of tool-result text before and after processing.
    result_chars_before: int = 0
    result_chars_after: int = 0
    actions: list[Action] = field(default_factory=list)
    problems: list[ProblemReport] = field(default_factory=list)
    #: Loop guards that tripped in the current user turn.
    loop_alerts: list[LoopAlert] = field(default_factory=list)
    #: Calls and results sent as they came because they are nested too deep to read.
    sealed: list[SealedBlock] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.actions) or any(alert.annotated for alert in self.loop_alerts)

    def by_step(self, step: str) -> list[Action]:
        return [a for a in self.actions if a.step == step]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["actions"] = [{**asdict(a), "detail": dict(a.detail)} for a in self.actions]
        return data

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)

    def summary_lines(self) -> list[str]:
        """A short human summary: one line per step, then the size before and after."""
        lines = [f"format: {self.format} ({self.format_source}); policy: {self.policy}"]
        if self.text_protocol is not None:
            lines.append(f"text protocol: {self.text_protocol}")
        for step in Step:
            actions = self.by_step(step)
            if not actions:
                lines.append(f"{step}: nothing to do")
                continue
            counts: dict[str, int] = {}
            for action in actions:
                counts[action.kind] = counts.get(action.kind, 0) + 1
            what = ", ".join(f"{n} {describe(kind, n)}" for kind, n in sorted(counts.items()))
            lines.append(f"{step}: {what}")
        for alert in self.loop_alerts:
            lines.append(f"loop guard: {alert.reason}")
        for problem in self.problems:
            lines.append(f"plugin problem: {problem.plugin} in {problem.hook}: {problem.message}")
        lines.append(
            f"messages: {self.messages_before} -> {self.messages_after}; "
            f"tool-result characters: {self.result_chars_before:,} -> {self.result_chars_after:,}"
        )
        return lines
