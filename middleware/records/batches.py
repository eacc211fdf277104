"""A batch of rows written to a records database in one transaction: the rows it does not
hold yet, each counted once by its key however often it is written, and what they add to
their sessions' and days' running sums."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from middleware.records.dialects import merged_rows, new_rows
from middleware.records.rows import AnswerRow, RequestRow
from middleware.records.tables import (
    ANSWER_TAGS,
    ANSWERS,
    DAYS,
    REQUESTS,
    SESSION_MODELS,
    SESSIONS,
    SUMS,
    TOKEN_KINDS,
)


def write_batch(
    connection: sa.Connection, answers: Sequence[AnswerRow], requests: Sequence[RequestRow]
) -> int:
    """Write the rows the database does not hold yet and add them to their sessions' and
    days' sums, on ``connection`` (one transaction); how many rows were new."""
    # A row given twice in one batch is written once, as if in two.
    requests = list({r.key: r for r in reversed(requests)}.values())[::-1]
    answers = list({a.key: a for a in reversed(answers)}.values())[::-1]
    # Each session's row is locked (made if need be) before any row is numbered: a
    # session's requests then get their ``seq`` in the order they are committed, which
    # the console's polls (after the newest seq shown) rely on; and in one order for all
    # sessions, so two batches never wait for each other's.
    spans: dict[str, tuple[float, float]] = {}
    rows: list[AnswerRow | RequestRow] = [*requests, *answers]
    for row in rows:
        if row.session is not None:
            first, last = spans.get(row.session, (row.time, row.time))
            spans[row.session] = (min(first, row.time), max(last, row.time))
    _lock_sessions(connection, spans)
    seen: list[RequestRow] = []
    fresh: list[AnswerRow] = []
    if requests:
        written = _insert_new(connection, REQUESTS, [r.row() for r in requests], "key")
        seen = [r for r in requests if r.key in written]
    if answers:
        written = _insert_new(connection, ANSWERS, [a.row() for a in answers], "key")
        fresh = [a for a in answers if a.key in written]
        tags = [
            {"answer": a.key, "name": name, "value": value} for a in fresh for name, value in a.tags
        ]
        if tags:
            connection.execute(new_rows(connection, ANSWER_TAGS), tags)
    _add_to_sessions(connection, seen, fresh)
    _add_to_days(connection, fresh)
    return len(seen) + len(fresh)


def _insert_new(
    connection: sa.Connection, table: sa.Table, rows: list[dict[str, Any]], key: str
) -> set[str]:
    """Insert ``rows`` but those whose ``key`` is there; the keys of those inserted."""
    return set(connection.execute(new_rows(connection, table, key), rows).scalars().all())


# Each batch moves the sums through these statements, made once with their parameters
# bound at each execution (one execution for all the sessions or days of a batch): building
# and keying a statement per row cost more CPU than the database's work (issue 44, item 8).


def _widened(table: sa.Table, given: Any) -> dict[str, sa.ColumnElement[Any]]:
    """``first`` and ``last`` widened to the row ``given``'s."""
    c = table.c
    return {
        "first": sa.case((c.first > given.first, given.first), else_=c.first),
        "last": sa.case((c.last < given.last, given.last), else_=c.last),
    }


def _summed(names: Sequence[str]) -> Callable[[sa.Table, Any], dict[str, Any]]:
    """Each column of ``names`` plus the row given's."""

    def merge(table: sa.Table, given: Any) -> dict[str, Any]:
        return {n: table.c[n] + given[n] for n in names}

    return merge


_ADD_ANSWERS = _summed(("answers",))
_ADD_SUMS = _summed(SUMS)

#: What the console's requests add to their session's row (and the names they set).
_REQUEST_COUNTS = ("requests", "repairs", "spills", "compactions")
_REQUEST_NAMES = ("agent", "source", "format", "caller")

_S = SESSIONS
#: A batch's addition to a session's row: its requests' counts and names, its answers' sums.
_ADD_TO_SESSION = (
    sa.update(_S)
    .where(_S.c.session == sa.bindparam("at_session", type_=sa.String))
    .values(
        {
            **{
                n: _S.c[n] + sa.bindparam(f"add_{n}", type_=_S.c[n].type)
                for n in (*_REQUEST_COUNTS, *SUMS)
            },
            **{
                n: sa.func.coalesce(sa.bindparam(f"set_{n}", type_=sa.String), _S.c[n])
                for n in _REQUEST_NAMES
            },
        }
    )
)


def _lock_sessions(connection: sa.Connection, spans: dict[str, tuple[float, float]]) -> None:
    """The sessions' rows, made where there are none yet, their first and last times
    widened to ``spans``: each row locked, in one order for every batch."""
    sessions = sorted(spans)
    if sessions:
        connection.execute(
            merged_rows(connection, SESSIONS, ("session",), _widened),
            [{"session": s, "first": spans[s][0], "last": spans[s][1]} for s in sessions],
        )


def _add_to_sessions(
    connection: sa.Connection, requests: list[RequestRow], answers: list[AnswerRow]
) -> None:
    """Add the rows newly written to their sessions' rows (:func:`_lock_sessions` made
    them): the requests' counts and the agent, source, format and caller the latest of
    them says; the answers' sums, and their models."""
    asked: dict[str, list[RequestRow]] = defaultdict(list)
    for request in requests:
        asked[request.session].append(request)
    answered: dict[str, list[AnswerRow]] = defaultdict(list)
    for answer in answers:
        if answer.session is not None:
            answered[answer.session].append(answer)
    sessions = sorted({*asked, *answered})  # one order: no deadlock
    if not sessions:
        return
    additions = []
    models: dict[tuple[str, str], int] = defaultdict(int)
    for session in sessions:
        for answer in answered.get(session, []):
            if answer.model:
                models[session, answer.model] += 1
        found = asked.get(session, [])
        values: dict[str, Any] = {"at_session": session, "add_requests": len(found)}
        for name in _REQUEST_COUNTS[1:]:
            values[f"add_{name}"] = sum(getattr(r, name) for r in found)
        for name in _REQUEST_NAMES:
            said = [getattr(r, name) for r in found if getattr(r, name) is not None]
            values[f"set_{name}"] = said[-1] if said else None
        sums = _sums(answered.get(session, []))
        values.update({f"add_{name}": sums[name] for name in SUMS})
        additions.append(values)
    connection.execute(_ADD_TO_SESSION, additions)
    if models:
        connection.execute(
            merged_rows(connection, SESSION_MODELS, ("session", "model"), _ADD_ANSWERS),
            [{"session": s, "model": m, "answers": models[s, m]} for s, m in sorted(models)],
        )


def _add_to_days(connection: sa.Connection, answers: list[AnswerRow]) -> None:
    """Add the answers newly written to the sums of their days and models."""
    if not answers:
        return
    by_day: dict[tuple[str, str], list[AnswerRow]] = defaultdict(list)
    for answer in answers:
        by_day[answer.row()["day"], answer.model or ""].append(answer)
    connection.execute(
        merged_rows(connection, DAYS, ("day", "model"), _ADD_SUMS),
        [{"day": d, "model": m, **_sums(by_day[d, m])} for d, m in sorted(by_day)],
    )


def _sums(answers: list[AnswerRow]) -> dict[str, Any]:
    """What ``answers`` add to a row of running sums, by column (:data:`SUMS`)."""
    read = [a for a in answers if not a.unread]
    priced = [a for a in read if a.priced]
    expected = [a for a in read if a.expected_read is not None]
    values: dict[str, Any] = {
        "answers": len(answers),
        "unread": len(answers) - len(read),
        "unpriced": len(read) - len(priced),
        "dollars": sum(a.dollars or 0.0 for a in priced),
        "dollars_without": sum(a.dollars_without or 0.0 for a in priced),
        "expected_read": sum(a.expected_read or 0 for a in expected),
        "read_when_expected": sum(a.billed.get("cache_read", 0) for a in expected),
        "observed": sum(a.observed for a in read),
        "projected": sum(1 for a in read if a.observed and any(a.projected.values())),
        "dollars_observed": sum(a.dollars or 0.0 for a in read if a.projection_priced),
        "dollars_projected": sum(a.dollars_projected or 0.0 for a in read if a.projection_priced),
        "refused": sum(a.refused is not None for a in read),
        "readbacks": sum(a.readbacks for a in read),
        "readback_tokens": sum(a.readback_tokens for a in read),
        "dollars_readback": sum(a.dollars_readback or 0.0 for a in priced),
    }
    for kind in TOKEN_KINDS:
        for side in ("billed", "without"):
            values[f"{side}_{kind}"] = sum(getattr(a, side).get(kind, 0) for a in read)
    return values
