"""What differs between the databases the records go to, as SQLAlchemy's own constructs:
an ``INSERT`` that skips the rows whose key is there already. Each dialect has its own
construct for it (``ON CONFLICT DO NOTHING`` in both, written by the dialect); this table
is the one place that names them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

_INSERTS: dict[str, Callable[[sa.Table], Any]] = {
    "sqlite": sqlite.insert,
    "postgresql": postgresql.insert,
}


def new_rows(connection: sa.Connection, table: sa.Table) -> Any:
    """An ``INSERT`` into ``table`` that writes only the rows whose primary key (or other
    unique key) it does not hold yet, and leaves the others as they are."""
    try:
        insert = _INSERTS[connection.dialect.name]
    except KeyError:
        raise ValueError(
            f"the records store works with SQLite and PostgreSQL, not {connection.dialect.name}"
        ) from None
    return insert(table).on_conflict_do_nothing()
