"""Budget decisions frozen per tool call id (Claude Code's ``ContentReplacementState``).

Once the budget step (or :meth:`Pipeline.admit`) has decided what a result becomes, that
decision is replayed on every later request that carries the same result: a policy reload
or a changed context can then never rewrite an old result, so the prompt-cache prefix
survives. A decision is keyed by the call id *and* a digest of the text it was made for,
so a host that changes a result's text gets a fresh decision rather than a stale one.
Decisions can be exported and restored, so they survive a session resume.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from middleware.cache import DerivedCache

#: Bytes a decision holds besides its text: the record, its id and digest, the map's slot.
DECISION_BYTES = 400


@dataclass(frozen=True)
class Decision:
    """What the result of ``call_id`` with text digest ``digest`` became."""

    call_id: str
    digest: str
    #: The text the model sees; ``None`` when the result was kept whole (only its digest is
    #: kept, so a long session of large kept results costs little memory).
    text: str | None
    #: ``"admit"`` (made at dispatch time) or ``"request"`` (made by the budget step).
    made_by: Literal["admit", "request"]

    def outcome(self, incoming: str) -> str:
        """The text to send for ``incoming`` (which :meth:`DecisionLedger.lookup` matched)."""
        return incoming if self.text is None else self.text

    def as_dict(self) -> dict[str, str | None]:
        return {"call_id": self.call_id, "digest": self.digest, "text": self.text,
                "made_by": self.made_by}  # fmt: skip


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class DecisionLedger:
    """Thread-safe map of call id to :class:`Decision`; the first decision for an id wins."""

    def __init__(
        self,
        decisions: Iterable[Decision | Mapping[str, Any]] = (),
        *,
        cache: DerivedCache | None = None,
    ) -> None:
        #: Digests of texts seen before (every request carries every old result again).
        self._cache = cache if cache is not None else DerivedCache(0)
        self._lock = threading.Lock()
        self._by_id: dict[str, Decision] = {}
        #: Bytes the decisions hold (an estimate: their texts, and a record each).
        self.bytes = 0
        for item in decisions:
            decision = item if isinstance(item, Decision) else _from_mapping(item)
            if self._by_id.setdefault(decision.call_id, decision) is decision:
                self.bytes += _size(decision)

    def lookup(self, call_id: str, text: str) -> Decision | None:
        """The decision made for this call id, if it was made for this text or its
        outcome is this text (a host that sends back what it received)."""
        with self._lock:
            decision = self._by_id.get(call_id)
        if decision is None:
            return None
        sent_back = decision.text is not None and decision.text == text
        return decision if sent_back or decision.digest == self._digest(text) else None

    def record(
        self, call_id: str, before: str, after: str, made_by: Literal["admit", "request"]
    ) -> Decision:
        """Freeze ``before`` → ``after`` for ``call_id`` unless a decision already exists."""
        with self._lock:
            known = self._by_id.get(call_id)
        if known is not None:
            return known
        decision = Decision(
            call_id, self._digest(before), None if after == before else after, made_by
        )
        with self._lock:
            kept = self._by_id.setdefault(call_id, decision)
            if kept is decision:
                self.bytes += _size(decision)
            return kept

    def clear(self) -> None:
        """Forget every decision: results are decided again, from the history and the
        policy, as a restarted process decides them (a session pool that needs the memory
        does this)."""
        with self._lock:
            self._by_id.clear()
            self.bytes = 0

    def _digest(self, text: str) -> str:
        return self._cache.derive(("text-digest", text), lambda: text_digest(text), 100, (text,))

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_id)

    def __iter__(self) -> Iterator[Decision]:
        with self._lock:
            return iter(list(self._by_id.values()))

    def export(self) -> list[dict[str, str | None]]:
        """The decisions as JSON-ready dicts (store them with the session to resume it)."""
        return [decision.as_dict() for decision in self]


def _size(decision: Decision) -> int:
    return DECISION_BYTES + len(decision.call_id) + (len(decision.text or ""))


def _from_mapping(item: Mapping[str, Any]) -> Decision:
    missing = [key for key in ("call_id", "digest", "text", "made_by") if key not in item]
    if missing:
        raise ValueError(f"not a decision record (missing {', '.join(missing)})")
    made_by = item["made_by"]
    if made_by not in ("admit", "request"):
        raise ValueError(f"made_by must be 'admit' or 'request', got {made_by!r}")
    origin: Literal["admit", "request"] = "admit" if made_by == "admit" else "request"
    text = item["text"]
    if text is not None and not isinstance(text, str):
        raise ValueError(f"text must be a string or null, got {type(text).__name__}")
    return Decision(str(item["call_id"]), str(item["digest"]), text, origin)
