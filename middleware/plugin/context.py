"""What a step implementation gets besides the conversation.

:class:`StepContext` is the plugin API, exactly what docs/plugins.md documents: the policy
snapshot of the call, the wire format's codec, the session id, the spill store, the report
recorder and the state a plugin hands from one of its hooks to another. Its ``internal``
member is what the built-in steps, the host and the pipeline share beyond it
(:class:`Internal`), and the functions at the end of this module work on a context for
them (asking the capability hooks, checking a reading against the spill store, forking a
context for a third-party implementation): none of that is part of the plugin API.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from middleware.cache.kept import KeptReadings, ReadingStore
from middleware.cache.lru import DerivedCache
from middleware.plugin.settings import time_limit
from middleware.report import Action, ProblemReport
from middleware.session.cold_cache import ColdRequest
from middleware.session.previous import Carry
from middleware.session.resume import Resume

if TYPE_CHECKING:
    from middleware.formats.base import Codec
    from middleware.plugin.capabilities import DeclaredCap, FileAccess, SpillStore
    from middleware.policy import Policy
    from middleware.session.decisions import DecisionLedger
    from middleware.spill.session_store import SessionStore
    from middleware.view import ConversationIndex

T = TypeVar("T")
#: Tells a cached ``None`` from a miss.
_ABSENT = object()


class Capabilities(Protocol):
    """The capability hooks a step may ask for (the plugin host provides them); each
    records the failures of the plugins it asked in ``problems`` and applies the time
    limit of ``policy``."""

    def tool_result_cap(
        self, tool_name: str, problems: list[ProblemReport], *, policy: Policy | None = None
    ) -> DeclaredCap | None:
        """The cap a plugin declares for ``tool_name``."""
        ...

    def tool_file_access(
        self, tool_name: str, problems: list[ProblemReport], *, policy: Policy | None = None
    ) -> FileAccess | None:
        """What a plugin declares ``tool_name`` does with files."""
        ...

    def implements(self, hook_name: str) -> bool:
        """Whether any plugin implements the hook ``hook_name``."""
        ...

    def summarize_result(
        self, text: str, tool_name: str | None, content_type: str, path: str,
        problems: list[ProblemReport], *, policy: Policy | None = None,
    ) -> str | None:  # fmt: skip
        """A plugin's summary of an old result."""
        ...

    def detect_content_type(
        self, text: str, tool_name: str | None, problems: list[ProblemReport], *,
        policy: Policy | None = None,
    ) -> str | None:  # fmt: skip
        """The content type a plugin names for a result."""
        ...

    def compact_before_spill(
        self, index: ConversationIndex, before_turn: int, context: StepContext
    ) -> int | None:
        """The characters a plugin's compaction promises to take off the history."""
        ...


@dataclass
class StepContext:
    """The policy snapshot of one ``process()`` call, the wire format's codec, the session
    id, the spill store and the report recorder, for the step being run: the plugin API
    (docs/plugins.md). :attr:`internal` is the built-in steps' own."""

    policy: Policy
    #: The wire format's codec (``codec.name``: ``anthropic``, ``openai``...).
    codec: Codec
    session_id: str
    #: Where the full text of results cut from the context is kept.
    spill: SpillStore
    #: State a plugin hands from one of its hook implementations to another within the
    #: same ``process()`` call, under a key of its own: the dictionary is the same for
    #: every step of the call (the microcompaction plugin keeps there what it promised
    #: the budget step through ``compact_before_spill``).
    shared: dict[str, Any] = field(default_factory=dict)
    #: What the built-in steps, the host and the pipeline share beyond the plugin API
    #: (:class:`Internal`).
    internal: Internal = field(kw_only=True)

    def record(
        self,
        kind: str,
        *,
        tool_call_id: str,
        tool_name: str | None = None,
        message_index: int | None = None,
        chars_before: int = 0,
        chars_after: int = 0,
        **detail: Any,
    ) -> None:
        """Add an action of this step to the report. ``kind`` is an
        :class:`~middleware.report.ActionKind` for a built-in step, any text for a plugin;
        the action holds it as plain text, so what is written of it stays the same."""
        self.internal.actions.append(
            Action(
                str(self.internal.step),
                str(kind),
                tool_call_id,
                tool_name,
                message_index,
                chars_before,
                chars_after,
                detail,
            )
        )


@dataclass
class Internal:
    """What one step's run shares with the host and the pipeline beyond the plugin API:
    the step's name, the capability hooks, its actions and problems, frozen decisions,
    what the request knows of its session's cache, the previous request it continues and
    what this one leaves for the next, and the caches of derived data. Not part of the
    plugin API (a third-party plugin never needs it; it may change in any release)."""

    #: The step's name in the report (``budget``).
    step: str
    #: The capability hooks the step may ask (the plugin host).
    host: Capabilities
    #: The provider holds earlier turns the history does not repeat (``process(...,
    #: continuation=True)``): a result may answer a call the history does not show.
    continuation: bool = False
    #: What the step did (:meth:`StepContext.record`), for the report.
    actions: list[Action] = field(default_factory=list)
    #: What went wrong with the plugins the step ran or asked, for the report.
    problems: list[ProblemReport] = field(default_factory=list)
    #: Decisions frozen per call id (admitted results, and all of them when the policy
    #: freezes decisions); ``None`` outside a pipeline.
    decisions: DecisionLedger | None = None
    #: What the request knows of its session's prompt cache beyond the history (whether
    #: it is cold, the moves made when it was); ``None`` outside a pipeline.
    cold_cache: ColdRequest | None = None
    #: Set when this request continues the session's previous one (:class:`Resume`).
    resume: Resume | None = None
    #: What this step leaves for the next request of the conversation, which may then
    #: continue from this one (``resume.carried[step]`` there). The pipeline remembers a
    #: request for that only when a step left something.
    carry: Carry | None = None
    #: Derived data of results reused across requests (keys are exact inputs, so it never
    #: changes what a step computes); outside a pipeline, one that keeps nothing.
    cache: DerivedCache = field(default_factory=lambda: DerivedCache(0))
    #: Where readings of result texts are kept for a process that starts cold (the
    #: session's local workspace); ``None``: kept in :attr:`cache` only.
    readings: ReadingStore | None = None
    #: The session's spill store as its conversation holds it, which says what it can
    #: do: what it remembers in :attr:`cache` (a step's verified readings are kept under
    #: its token), how one call uses it (:func:`bound_store`). ``None``: outside a
    #: pipeline, the context's store as it is.
    store: SessionStore | None = None

    @property
    def kept(self) -> KeptReadings:
        """:attr:`cache`, with the readings that scan a whole text kept in :attr:`readings`."""
        return KeptReadings(self.cache, self.readings)


# -- what the host and the built-in steps do with a context, beyond the plugin API ---------


def fork(context: StepContext) -> StepContext:
    """A copy for one third-party implementation to work on: its own actions, problems,
    shared state (a shallow copy) and carry, so that what it does after its time limit
    touches nothing the request uses. :func:`adopt` takes its work over."""
    internal = replace(context.internal, actions=[], problems=[])
    spill = bound_store(internal, context.policy) or context.spill
    return replace(context, spill=spill, shared=dict(context.shared), internal=internal)


def bound_store(internal: Internal, policy: Policy) -> SpillStore | None:
    """The session's store as the run of ``internal`` uses it: a plugin's reports its
    failures into the run's problems (a fork's into its own, which touch nothing the
    request uses after its time limit) under ``policy``'s time limit."""
    if internal.store is None:
        return None
    return internal.store.reporting_to(internal.problems, time_limit(policy))


def adopt(context: StepContext, forked: StepContext) -> None:
    """Take over the actions, shared state and carry of a :func:`fork` that finished in
    time (its problems are the caller's to take, whether it succeeded or not)."""
    context.internal.actions.extend(forked.internal.actions)
    context.shared.clear()
    context.shared.update(forked.shared)
    context.internal.carry = forked.internal.carry


def verified(
    context: StepContext,
    key: tuple[Hashable, ...],
    read: Callable[[Callable[[str], str | None]], T],
    size: Callable[[T], int],
    texts: Callable[[T], tuple[str, ...]] = lambda _: (),
) -> T:
    """``read(load)``, a reading of a text checked against the spill store through
    ``load`` (is it a preview this product wrote, and of what), kept across requests
    under ``key`` when the store is the pipeline's own. A reading for which a location
    was missing is not kept: the file may be written later. ``size`` measures the
    value, less ``texts(value)``: the texts the entry keeps alive (in ``key`` or the
    value), which the cache counts once however many entries hold them."""
    store, cache = context.spill, context.internal.cache
    token = context.internal.store.token if context.internal.store else None
    if token is None or not cache.enabled:
        return read(store.load)
    entry = ("verified", token, *key)
    found = cache.get(entry, _ABSENT)
    if found is not _ABSENT:
        value: T = found
        return value
    missed = False

    def load(location: str) -> str | None:
        nonlocal missed
        content = store.load(location)
        missed = missed or content is None
        return content

    value = read(load)
    if not missed:
        cache.put(entry, value, size(value), texts(value))
    return value


def declared_cap(context: StepContext, tool_name: str) -> DeclaredCap | None:
    """The cap a plugin declares for ``tool_name`` (plugin failures are reported)."""
    internal = context.internal
    return internal.host.tool_result_cap(tool_name, internal.problems, policy=context.policy)


def file_access(context: StepContext, tool_name: str) -> FileAccess | None:
    """What a plugin declares ``tool_name`` does with files (failures are reported)."""
    internal = context.internal
    return internal.host.tool_file_access(tool_name, internal.problems, policy=context.policy)


def plugin_summary(
    context: StepContext, text: str, tool_name: str | None, content_type: str, path: str
) -> str | None:
    """A plugin's summary of an old result (naming ``path``), if any plugin writes one."""
    internal = context.internal
    return internal.host.summarize_result(
        text, tool_name, content_type, path, internal.problems, policy=context.policy
    )


def plugin_content_type(context: StepContext, text: str, tool_name: str | None) -> str | None:
    """The content type a plugin names for a result, if any plugin does."""
    internal = context.internal
    return internal.host.detect_content_type(
        text, tool_name, internal.problems, policy=context.policy
    )


def compaction_promised(
    context: StepContext, index: ConversationIndex, before_turn: int
) -> int | None:
    """The characters a plugin's compaction promises to take off the history by
    compacting the results of turns before ``before_turn`` later in this call;
    ``None``: no plugin promises anything (count the history as it is)."""
    return context.internal.host.compact_before_spill(index, before_turn, context)
