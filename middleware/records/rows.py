"""What the proxy records, as plain values: an answer's bill and a request's console record,
each with the key that makes writing it twice count it once."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from middleware.records.tables import KEY, TOKEN_KINDS

#: Tokens by kind, as :data:`.tables.TOKEN_KINDS` names them.
Tokens = Mapping[str, int]


@dataclass(frozen=True)
class AnswerRow:
    """One billed answer (``unread``: its usage could not be read, so no tokens)."""

    key: str
    time: float
    session: str | None
    replica: str
    format: str
    unread: bool = False
    billed: Tokens = field(default_factory=dict)
    without: Tokens = field(default_factory=dict)
    model: str | None = None
    priced_as: str | None = None
    dollars: float | None = None
    dollars_without: float | None = None
    expected_read: int | None = None
    #: The console record of the request it answers (:attr:`RequestRow.key`).
    request: str | None = None
    agent: str | None = None
    caller: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    #: Forwarded as it came (observe mode), and what its cleaned request would have been
    #: billed (empty: not projected) and cost (``None``: not projected, or not priced).
    observed: bool = False
    projected: Tokens = field(default_factory=dict)
    dollars_projected: float | None = None
    #: The provider's refusal the request as it came would have met (a repair spared it).
    refused: str | None = None
    #: The read-backs the request carried (what the proxy hid, gone back for), their
    #: tokens and what they cost (``None``: not priced).
    readbacks: int = 0
    readback_tokens: int = 0
    dollars_readback: float | None = None

    @property
    def size(self) -> int:
        """Bytes it holds, about (what the writer's bound counts)."""
        names = (
            self.key,
            self.session,
            self.model,
            self.priced_as,
            self.request,
            self.agent,
            self.refused,
        )
        return 400 + sum(len(n) for n in names if n) + sum(len(a) + len(b) for a, b in self.tags)

    def row(self) -> dict[str, Any]:
        """The ``answers`` row."""
        row: dict[str, Any] = {
            "key": self.key,
            "time": self.time,
            "day": day_of(self.time),
            "session": self.session,
            "request": self.request,
            "replica": self.replica,
            "agent": self.agent,
            "caller": self.caller,
            "format": self.format,
            "model": self.model,
            "priced_as": self.priced_as,
            "unread": self.unread,
            "dollars": self.dollars,
            "dollars_without": self.dollars_without,
            "expected_read": self.expected_read,
            "observed": self.observed,
            "dollars_projected": self.dollars_projected,
            "refused": self.refused,
            "readbacks": self.readbacks,
            "readback_tokens": self.readback_tokens,
            "dollars_readback": self.dollars_readback,
        }
        for kind in TOKEN_KINDS:
            row[f"billed_{kind}"] = self.billed.get(kind, 0)
            row[f"without_{kind}"] = self.without.get(kind, 0)
            row[f"projected_{kind}"] = self.projected.get(kind, 0)
        return row

    @property
    def priced(self) -> bool:
        return self.dollars is not None and self.dollars_without is not None

    @property
    def projection_priced(self) -> bool:
        """Observed, projected and priced: what it would have saved is a sum of dollars."""
        return self.observed and self.priced and self.dollars_projected is not None


@dataclass(frozen=True)
class RequestRow:
    """The console's record of one cleaned request (``record``: its JSON, already cut to
    ``proxy.console.request_bytes``), and what it adds to its session's counts."""

    key: str
    session: str
    time: float
    replica: str
    record: bytes
    agent: str | None = None
    source: str | None = None
    format: str | None = None
    caller: str | None = None
    repairs: int = 0
    spills: int = 0
    compactions: int = 0

    @property
    def size(self) -> int:
        return 200 + len(self.record) + len(self.session)

    def row(self) -> dict[str, Any]:
        """The ``requests`` row."""
        return {
            "key": self.key,
            "session": self.session,
            "time": self.time,
            "replica": self.replica,
            "record": self.record,
            "bytes": len(self.record),
        }


def day_of(when: float) -> str:
    """The day (UTC, ``YYYY-MM-DD``) of a time in seconds since the epoch."""
    return time.strftime("%Y-%m-%d", time.gmtime(when))


def digest_key(*parts: object) -> str:
    """A key two replicas compute alike from the same ``parts`` (an answer with no
    response id of its provider's): ``sha256:`` and 64 hex digits."""
    hasher = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else repr(part).encode("utf-8", "surrogatepass")
        hasher.update(len(data).to_bytes(8, "big"))
        hasher.update(data)
    return "sha256:" + hasher.hexdigest()


def answer_key(provider: str, response_id: str | None, *event: object) -> str:
    """The key of one recorded answer: its provider's response id where it gives one
    (``anthropic:msg_...:``, so the database names the provider's answer), and a digest
    of ``event`` (the replica, the session, the time, a count: one answer's, however
    often its row is written). The id alone is not a key: an upstream may give every
    answer the same one (a gateway, a local server, a stand-in)."""
    digest = digest_key(provider, response_id, *event).removeprefix("sha256:")
    if response_id and len(provider) + len(response_id) + 18 <= KEY and response_id.isprintable():
        return f"{provider}:{response_id}:{digest[:16]}"
    return f"sha256:{digest}"
