"""The capability hooks called for a first answer, as one table: a new capability is a
specification (``@hookspec(firstresult=True)`` in :mod:`.hookspecs`) plus a row here.

The host asks every row the same way (:meth:`.calls.HookCalls.first_answer`): the
implementations in pluggy's order, each isolated; the first answer that is not ``None``
and that the row takes wins. An answer the row does not take is reported as a wrong type
naming what the row expects, and the next implementation is asked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from middleware.plugin.admission import Cap
from middleware.plugin.capabilities import DeclaredCap, FileAccess, SpillStore, ToolCap

T = TypeVar("T")

#: The line a plugin's summary gets when it does not name the file its result is in.
FULL_OUTPUT = "Full output: {path}"

#: What a row makes of one answer that is not ``None``: ``take(value, plugin, arguments)``
#: is the answer as the caller gets it, or ``None`` when it is not a right one.
Take = Callable[[object, str, Mapping[str, Any]], T | None]


@dataclass(frozen=True)
class FirstResult(Generic[T]):
    """One capability hook called for a first answer, and the answers it takes."""

    #: The hook's name, as its specification spells it.
    hook: str
    #: What a right answer is, for the report of a wrong one ("a ToolCap").
    expected: str
    take: Take[T]
    #: What an answer later than the time limit counts as, for its report.
    late: str = "counted as no answer"
    #: A third-party implementation works on a fork of the call's ``context`` argument,
    #: taken over only if its answer is (it keeps a promise through ``context.shared``).
    forks_context: bool = False


@dataclass(frozen=True)
class ProvidedStore:
    """A spill store and the plugin that provided it (whose failures its guard reports)."""

    store: SpillStore
    plugin: str


def _instance(kind: type[T]) -> Take[T]:
    def take(value: object, plugin: str, arguments: Mapping[str, Any]) -> T | None:
        return value if isinstance(value, kind) else None

    return take


def _declared_cap(value: object, plugin: str, arguments: Mapping[str, Any]) -> DeclaredCap | None:
    """A cap, attributed to the plugin that declared it."""
    return DeclaredCap(value, plugin) if isinstance(value, ToolCap) else None


def _text(value: object, plugin: str, arguments: Mapping[str, Any]) -> str | None:
    return value if isinstance(value, str) and value else None


def _summary(value: object, plugin: str, arguments: Mapping[str, Any]) -> str | None:
    """A summary that names where the full text is (the host adds the line if not)."""
    if not (isinstance(value, str) and value):
        return None
    path = arguments["path"]
    return value if path in value else f"{value}\n{FULL_OUTPUT.format(path=path)}"


def _count(value: object, plugin: str, arguments: Mapping[str, Any]) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _store(value: object, plugin: str, arguments: Mapping[str, Any]) -> ProvidedStore | None:
    return ProvidedStore(value, plugin) if isinstance(value, SpillStore) else None


TOOL_RESULT_CAP = FirstResult("tool_result_cap", "a ToolCap", _declared_cap)
TOOL_FILE_ACCESS = FirstResult("tool_file_access", "a FileAccess", _instance(FileAccess))
RESULT_CAP = FirstResult("result_cap", "a Cap", _instance(Cap))
DETECT_CONTENT_TYPE = FirstResult("detect_content_type", "a string", _text)
SUMMARIZE_RESULT = FirstResult("summarize_result", "a string", _summary)
COMPACT_BEFORE_SPILL = FirstResult(
    "compact_before_spill", "an int >= 0", _count, late="counted as no promise", forks_context=True
)
SPILL_STORE = FirstResult("spill_store", "a SpillStore", _store)
COUNT_TOKENS = FirstResult("count_tokens", "an int >= 0", _count)

#: Every capability hook called for a first answer (a test holds it to the specifications).
FIRST_RESULTS: tuple[FirstResult[Any], ...] = (
    TOOL_RESULT_CAP,
    TOOL_FILE_ACCESS,
    RESULT_CAP,
    DETECT_CONTENT_TYPE,
    SUMMARIZE_RESULT,
    COMPACT_BEFORE_SPILL,
    SPILL_STORE,
    COUNT_TOKENS,
)
