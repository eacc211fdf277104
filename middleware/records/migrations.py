"""Schema versions: a database is brought to :data:`VERSION` when a store opens it, and one
written by a newer release is refused rather than written wrongly.

Each migration takes a database from one version to the next inside the transaction that
then records the new version, so a replica that dies halfway leaves the old version whole,
and two replicas starting together upgrade it once (the second waits on the first's lock,
then finds the work done). Version 1 is the tables as :mod:`.tables` declares them; a
migration that changes a table will do it through alembic's
:class:`~alembic.operations.Operations`, which writes each dialect's DDL (and alembic then
joins the dependencies; tests/records/test_migrations.py runs one): no SQL here is written
for one database.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations

from middleware.errors import MiddlewareError
from middleware.records.dialects import new_rows
from middleware.records.tables import META, added_in_2, metadata

logger = logging.getLogger(__name__)

#: A step from version ``n`` to ``n + 1`` (the ``n``-th of :data:`MIGRATIONS`).
Migration = Callable[[sa.Connection], None]


class SchemaVersionError(MiddlewareError):
    """The database was written by a newer release than this one."""

    def __init__(self, found: int, known: int, where: str) -> None:
        self.found = found
        self.known = known
        super().__init__(
            f"the records database {where} has schema version {found}, newer than the "
            f"version {known} this release of chatcli-middleware knows: upgrade "
            "chatcli-middleware on this machine, or point ledger.url at another database"
        )


def _create(connection: sa.Connection) -> None:
    """Version 1: every table as :mod:`.tables` declares it."""
    metadata.create_all(connection)


def _savings_on_own_traffic(connection: sa.Connection) -> None:
    """Version 2: observe mode's projections, the refusals repairs spared, read-backs
    (:func:`.tables.added_in_2`). A database made at version 1 by this release already has
    them (version 1 makes the tables as they are declared now)."""
    operations = Operations(MigrationContext.configure(connection))
    inspector = sa.inspect(connection)
    for table, columns in added_in_2().items():
        have = {column["name"] for column in inspector.get_columns(table)}
        for column in columns:
            if column.name not in have:
                operations.add_column(table, column)


#: The steps, oldest first: a database at version ``n`` runs ``MIGRATIONS[n:]``.
MIGRATIONS: Sequence[Migration] = (_create, _savings_on_own_traffic)
#: The version this release writes.
VERSION = len(MIGRATIONS)
_NAME = "schema_version"


def upgrade(engine: sa.Engine, where: str, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring ``engine``'s database to the newest version (``len(migrations)``); returns
    the version it had (0: none, a new database).

    :raises SchemaVersionError: it has a version newer than ``migrations`` reach.
    """
    known = len(migrations)
    _create_meta(engine)
    with engine.begin() as connection:
        # The version row, claimed before it is read: the first write takes SQLite's write
        # lock, and the row lock holds PostgreSQL's other stores until this one commits.
        connection.execute(new_rows(connection, META).values(name=_NAME, value="0"))
        found = int(
            connection.execute(
                sa.select(META.c.value).where(META.c.name == _NAME).with_for_update()
            ).scalar_one()
        )
        if found > known:
            raise SchemaVersionError(found, known, where)
        for step in migrations[found:]:
            step(connection)
        if found < known:
            connection.execute(sa.update(META).where(META.c.name == _NAME).values(value=str(known)))
            logger.info(
                "records database %s upgraded from schema version %d to %d", where, found, known
            )
    return found


def _create_meta(engine: sa.Engine) -> None:
    """The version's table, made once however many stores start together (a second
    ``CREATE TABLE`` racing the first fails on PostgreSQL's catalog: it is there then)."""
    try:
        with engine.begin() as connection:
            META.create(connection, checkfirst=True)
    except sa.exc.DBAPIError:
        with engine.connect() as connection:
            if not sa.inspect(connection).has_table(META.name):
                raise
