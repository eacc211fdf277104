"""Schema versions: a new database is made at this release's version, an older one is
upgraded as a store opens it (keeping its rows), and one a newer release wrote is refused
with a message that names both versions."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations
from record_builders import answer

from middleware.records import migrations, queries
from middleware.records.migrations import VERSION, SchemaVersionError, upgrade
from middleware.records.store import RecordStore
from middleware.records.tables import ANSWERS, META, added_in_2


def version_of(store: RecordStore) -> int:
    with store.connection() as connection:
        return int(connection.execute(sa.select(META.c.value)).scalar_one())


def test_a_new_database_is_at_this_releases_version(store: RecordStore) -> None:
    assert version_of(store) == VERSION


def test_an_older_database_is_upgraded_and_keeps_its_rows(store: RecordStore) -> None:
    store.write([answer("a1")], [])

    def add_a_column(connection: sa.Connection) -> None:
        Operations(MigrationContext.configure(connection)).add_column(
            ANSWERS.name, sa.Column("region", sa.String(32))
        )

    found = upgrade(store.engine, store.where, (*migrations.MIGRATIONS, add_a_column))
    assert found == VERSION
    assert version_of(store) == VERSION + 1
    with store.connection() as connection:
        rows = connection.execute(sa.text("SELECT key, region FROM chatcli_answers")).all()
    assert [tuple(row) for row in rows] == [("a1", None)]
    assert upgrade(store.engine, store.where, (*migrations.MIGRATIONS, add_a_column)) == VERSION + 1


def test_a_newer_database_is_refused(store_url: str) -> None:
    store = RecordStore.open(store_url)
    with store.connection() as connection:
        connection.execute(sa.update(META).values(value=str(VERSION + 3)))
    with pytest.raises(SchemaVersionError) as refused:
        upgrade(store.engine, store.where)
    said = str(refused.value)
    assert f"schema version {VERSION + 3}" in said and f"version {VERSION} this release" in said
    store.close()


def test_stores_opening_one_database_together_make_it_once(store_url: str) -> None:
    if store_url == "sqlite://":
        pytest.skip("a database in memory is one process's")
    failures: list[BaseException] = []

    def open_one() -> None:
        try:
            RecordStore.open(store_url).close()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    store = RecordStore.open(store_url)
    assert version_of(store) == VERSION
    store.close()


def test_a_version_1_database_gains_version_2s_columns_and_keeps_its_sums(
    store_url: str,
) -> None:
    """A database the previous release made (version 1: no observe, refusal or read-back
    columns) is brought to version 2 as a store opens it: its rows and sums are kept, and
    what version 2 records is written and summed beside them."""
    if store_url == "sqlite://":
        pytest.skip("a database in memory is gone when its store closes")
    old = RecordStore.open(store_url)
    old.write([answer("a1")], [])
    with old.engine.begin() as connection:  # as the previous release left it
        operations = Operations(MigrationContext.configure(connection))
        for table, columns in added_in_2().items():
            with operations.batch_alter_table(table) as batch:
                for column in columns:
                    batch.drop_column(column.name)
        connection.execute(sa.update(META).values(value="1"))
    old.close()

    store = RecordStore.open(store_url)
    try:
        assert version_of(store) == VERSION == 2
        store.write([answer("a2", observed=True, dollars_projected=0.004, refused="400: no",
                            projected={"input": 4}, readbacks=1, readback_tokens=70,
                            dollars_readback=0.002)], [])  # fmt: skip
        row = queries.session(store, "s1")
        assert row is not None
        assert (row["answers"], row["dollars"], row["observed"], row["projected"]) == (
            2,
            pytest.approx(0.02),
            1,
            1,
        )
        assert row["dollars_projected"] == pytest.approx(0.004)
        assert (row["refused"], row["readbacks"], row["readback_tokens"]) == (1, 1, 70)
        assert row["dollars_readback"] == pytest.approx(0.002)
    finally:
        store.close()
