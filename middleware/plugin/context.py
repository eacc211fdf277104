"""What a step implementation gets besides the conversation."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from middleware.cache.kept import KeptReadings, ReadingStore
from middleware.cache.lru import DerivedCache
from middleware.plugin.settings import time_limit
from middleware.plugin.spill_guard import GuardedSpillStore
from middleware.report import Action, ProblemReport
from middleware.session.cold_cache import ColdRequest
from middleware.session.resume import Carry, Resume
from middleware.spill.remembered import RememberedStore

if TYPE_CHECKING:
    from middleware.formats.base import Codec
    from middleware.plugin.capabilities import DeclaredCap, FileAccess, SpillStore
    from middleware.policy import Policy
    from middleware.session.decisions import DecisionLedger
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
class Internal:
    """What the built-in steps and the pipeline share beyond the plugin API: frozen
    decisions, what the request knows of its session's cache, the previous request it
    continues and what this one leaves for the next, and the caches of derived data. Not
    part of the plugin API (a third-party plugin never needs it; it may change)."""

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

    @property
    def kept(self) -> KeptReadings:
        """:attr:`cache`, with the readings that scan a whole text kept in :attr:`readings`."""
        return KeptReadings(self.cache, self.readings)


@dataclass
class StepContext:
    """The policy snapshot of one ``process()`` call, the wire format's codec, the
    capability hooks and the report recorder, for the step being run: the plugin API
    (docs/plugins.md). :attr:`internal` is the built-in steps' own."""

    step: str
    policy: Policy
    codec: Codec
    host: Capabilities
    session_id: str
    #: Where the full text of results cut from the context is kept.
    spill: SpillStore
    #: State a plugin hands from one of its hook implementations to another within the
    #: same ``process()`` call, under a key of its own: the dictionary is the same for
    #: every step of the call (the microcompaction plugin keeps there what it promised
    #: the budget step through ``compact_before_spill``).
    shared: dict[str, Any] = field(default_factory=dict)
    #: The provider holds earlier turns the history does not repeat (``process(...,
    #: continuation=True)``): a result may answer a call the history does not show.
    continuation: bool = False
    actions: list[Action] = field(default_factory=list)
    problems: list[ProblemReport] = field(default_factory=list)
    #: The built-in steps' and the pipeline's own state (:class:`Internal`).
    internal: Internal = field(default_factory=Internal)

    def __post_init__(self) -> None:
        # A plugin's store reports its failures into this call's report, and runs under
        # this call's time limit.
        if isinstance(self.spill, GuardedSpillStore):
            self.spill = self.spill.reporting_to(self.problems, time_limit(self.policy))

    def fork(self) -> StepContext:
        """A copy for one third-party implementation to work on: its own actions, problems,
        shared state (a shallow copy) and carry, so that what it does after its time limit
        touches nothing the request uses. :meth:`adopt` takes its work over."""
        return replace(
            self, actions=[], problems=[], shared=dict(self.shared), internal=replace(self.internal)
        )

    def adopt(self, fork: StepContext) -> None:
        """Take over the actions, shared state and carry of a :meth:`fork` that finished in
        time (its problems are the caller's to take, whether it succeeded or not)."""
        self.actions.extend(fork.actions)
        self.shared.clear()
        self.shared.update(fork.shared)
        self.internal.carry = fork.internal.carry

    def verified(
        self,
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
        store, cache = self.spill, self.internal.cache
        if not isinstance(store, RememberedStore) or not cache.enabled:
            return read(store.load)
        entry = ("verified", store.token, *key)
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
        """Add an action of this step to the report."""
        self.actions.append(
            Action(
                self.step,
                kind,
                tool_call_id,
                tool_name,
                message_index,
                chars_before,
                chars_after,
                detail,
            )
        )

    def tool_cap(self, tool_name: str) -> DeclaredCap | None:
        """The cap a plugin declares for ``tool_name`` (plugin failures are reported)."""
        return self.host.tool_result_cap(tool_name, self.problems, policy=self.policy)

    def file_access(self, tool_name: str) -> FileAccess | None:
        """What a plugin declares ``tool_name`` does with files (failures are reported)."""
        return self.host.tool_file_access(tool_name, self.problems, policy=self.policy)

    def summary(self, text: str, tool_name: str | None, content_type: str, path: str) -> str | None:
        """A plugin's summary of an old result (naming ``path``), if any plugin writes one."""
        return self.host.summarize_result(
            text, tool_name, content_type, path, self.problems, policy=self.policy
        )

    def content_type(self, text: str, tool_name: str | None) -> str | None:
        """The content type a plugin names for a result, if any plugin does."""
        return self.host.detect_content_type(text, tool_name, self.problems, policy=self.policy)

    def compaction_promised(self, index: ConversationIndex, before_turn: int) -> int | None:
        """The characters a plugin's compaction promises to take off the history by
        compacting the results of turns before ``before_turn`` later in this call;
        ``None``: no plugin promises anything (count the history as it is)."""
        return self.host.compact_before_spill(index, before_turn, self)
