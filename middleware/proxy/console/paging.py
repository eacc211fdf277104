"""A page of a session's requests, as the console's page asks for them: the latest, those
before or after a request's number, or those kept or billed since the page last asked,
and the session's running cost, a few hundred points at most. A poll with nothing new is
a few hundred bytes, however many requests the session keeps."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: Points of a session's running cost sent at most (every so many requests, and the last).
COST_POINTS = 240


class Note(Protocol):
    """A request's record as the book keeps it (:class:`.book.Note`)."""

    number: int
    #: The book's version when it last changed.
    stamp: int
    #: What its answer cost, billed and without the middleware (``None``: not priced).
    dollars: tuple[float, float] | None

    def json(self) -> bytes: ...


@dataclass(frozen=True)
class Asked:
    """What a page asks of a session's requests: ``limit`` of them at most, the latest, or
    the latest ``before`` request number N, or the first ``after`` it, or (``since`` a
    :attr:`~.ConsoleBook.version`) those kept or billed since, the first first. With
    ``costs``, the running cost as well (with ``since``, only if anything changed)."""

    limit: int
    before: int | None = None
    after: int | None = None
    since: int | None = None
    costs: bool = False


@dataclass(frozen=True)
class Requests:
    """Some of a session's requests, as :meth:`ConsoleBook.requests` reads them."""

    #: The session's counts, and how many of its requests were forgotten.
    summary: dict[str, Any]
    #: The requests' records as a JSON array, the first first.
    records: bytes
    #: How many requests the session keeps, and the numbers of the first and the last.
    kept: int
    first: int | None
    last: int | None
    #: Whether it keeps requests before the first of these.
    older: bool
    #: Whether there is more to ask for after these (``after``, ``since``).
    more: bool
    #: What to ask ``since`` next: only what changes after these is new.
    version: int
    #: The running cost, billed and without the middleware, at each of some requests
    #: (:data:`COST_POINTS` at most, the last included): ``[number, billed, without]``.
    costs: list[tuple[int, float, float]] | None


def page_of(notes: Sequence[Note], summary: dict[str, Any], version: int, asked: Asked) -> Requests:
    """What ``asked`` asks of ``notes`` (a session's records, by number), the book at
    ``version``."""
    limit, before, after, since = asked.limit, asked.before, asked.after, asked.since
    more = False
    chosen: Sequence[Note]
    if since is not None:
        changed = sorted((n for n in notes if n.stamp > since), key=_stamp)
        chosen, more = sorted(changed[:limit], key=_number), len(changed) > limit
        if more:  # the rest at the next ask, since the last sent
            version = changed[limit - 1].stamp
    elif after is not None:
        start = bisect.bisect_right(notes, after, key=_number)
        chosen, more = notes[start : start + limit], start + limit < len(notes)
    else:
        end = len(notes)
        if before is not None:
            end = bisect.bisect_left(notes, before, key=_number)
        chosen = notes[max(end - limit, 0) : end]
    return Requests(
        summary=summary,
        records=b"[" + b",".join(note.json() for note in chosen) + b"]",
        kept=len(notes),
        first=notes[0].number if notes else None,
        last=notes[-1].number if notes else None,
        older=bool(chosen) and chosen[0] is not notes[0],
        more=more,
        version=version,
        costs=_running_cost(notes) if asked.costs and (since is None or chosen) else None,
    )


def _number(note: Note) -> int:
    return note.number


def _stamp(note: Note) -> int:
    return note.stamp


def _running_cost(notes: Sequence[Note]) -> list[tuple[int, float, float]]:
    """What the requests of ``notes`` cost in all, billed and without, after each priced
    one; :data:`COST_POINTS` of them at most, evenly spread, the last included."""
    points: list[tuple[int, float, float]] = []
    billed = without = 0.0
    for note in notes:
        if note.dollars is not None:
            billed += note.dollars[0]
            without += note.dollars[1]
            points.append((note.number, billed, without))
    if len(points) <= COST_POINTS:
        return points
    step = len(points) / (COST_POINTS - 1)
    return [points[int(i * step)] for i in range(COST_POINTS - 1)] + [points[-1]]
