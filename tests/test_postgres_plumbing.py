"""``PostgresDatabase``: the pool the PostgreSQL stores share, and versioned migrations."""

from __future__ import annotations

import threading

import psycopg
import pytest

from tooluse.errors import SchemaVersionError
from tooluse.memory import PostgresDatabase

STEPS = (
    ("CREATE TABLE note (id INTEGER PRIMARY KEY)", "INSERT INTO note VALUES (1)"),
    ("ALTER TABLE note ADD COLUMN body TEXT NOT NULL DEFAULT 'migrated'",),
)


def version(url: str) -> int:
    with psycopg.connect(url) as connection:
        row = connection.execute(
            "SELECT version FROM tooluse_schema_version WHERE component = 'note'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_database_is_migrated_from_its_version_on(postgres_url: str) -> None:
    with PostgresDatabase(postgres_url) as database:
        database.migrate("note", STEPS[:1])
        assert version(postgres_url) == 1
        database.migrate("note", STEPS)  # a newer release opens the same database
        assert version(postgres_url) == 2
        database.migrate("note", STEPS)  # nothing left to do
        with database.connection() as connection:
            assert connection.execute("SELECT id, body FROM note").fetchall() == [(1, "migrated")]


def test_a_database_of_a_later_version_is_refused(postgres_url: str) -> None:
    with PostgresDatabase(postgres_url) as database:
        database.migrate("note", STEPS)
        with pytest.raises(SchemaVersionError, match=r"note schema version 2.*reads version 1"):
            database.migrate("note", STEPS[:1])


def test_workers_migrating_at_once_migrate_once(postgres_url: str) -> None:
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with PostgresDatabase(postgres_url, min_size=0, max_size=1) as database:
                database.migrate("note", STEPS)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert version(postgres_url) == 2
    with psycopg.connect(postgres_url) as connection:
        assert connection.execute("SELECT count(*) FROM note").fetchone() == (1,)


def test_a_bad_address_fails_when_the_database_is_made() -> None:
    with pytest.raises(psycopg.OperationalError):
        PostgresDatabase("postgresql://nobody@127.0.0.1:1/none", timeout=1)
