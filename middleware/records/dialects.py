"""What differs between the databases the records go to, as SQLAlchemy's own constructs:
an ``INSERT`` that skips the rows whose key is there already, and one that merges them into
the row there. Each dialect has its own construct for them (``ON CONFLICT DO NOTHING`` and
``ON CONFLICT DO UPDATE`` in both, written by the dialect); this table is the one place
that names them."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

_INSERTS: dict[str, Callable[[sa.Table], Any]] = {
    "sqlite": sqlite.insert,
    "postgresql": postgresql.insert,
}


def new_rows(connection: sa.Connection, table: sa.Table, returning: str | None = None) -> Any:
    """An ``INSERT`` into ``table`` that writes only the rows whose primary key (or other
    unique key) it does not hold yet, and leaves the others as they are (``returning``:
    the column of the rows written it returns). One statement per dialect, table and
    column, made once: SQLAlchemy keys its compiled form by it, and execution binds the
    rows."""
    return _new_rows(connection.dialect.name, table, returning)


@functools.cache
def _new_rows(dialect: str, table: sa.Table, returning: str | None) -> Any:
    try:
        insert = _INSERTS[dialect]
    except KeyError:
        raise ValueError(
            f"the records store works with SQLite and PostgreSQL, not {dialect}"
        ) from None
    statement = insert(table).on_conflict_do_nothing()
    return statement if returning is None else statement.returning(table.c[returning])


#: How a row merges into the one with its key: the row there (its table) and the row given
#: (``excluded``) to the values the row there takes.
Merge = Callable[[sa.Table, Any], Mapping[str, Any]]


def merged_rows(
    connection: sa.Connection, table: sa.Table, keys: Sequence[str], merge: Merge
) -> Any:
    """An ``INSERT`` into ``table`` that writes the rows whose ``keys`` it does not hold
    yet and, for the others, sets the row there as ``merge`` says (in one statement, the
    row locked). Made once per dialect, table, keys and merge, as :func:`new_rows`."""
    return _merged_rows(connection.dialect.name, table, tuple(keys), merge)


@functools.cache
def _merged_rows(dialect: str, table: sa.Table, keys: tuple[str, ...], merge: Merge) -> Any:
    try:
        insert = _INSERTS[dialect](table)
    except KeyError:
        raise ValueError(
            f"the records store works with SQLite and PostgreSQL, not {dialect}"
        ) from None
    return insert.on_conflict_do_update(
        index_elements=list(keys), set_=dict(merge(table, insert.excluded))
    )
