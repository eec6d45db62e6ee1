"""The SQLite plumbing every embedded store shares: opening a file many writers race to create."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from tooluse._sqlite import check_schema, connect, ensure_schema
from tooluse.embedding import SqliteEmbeddingCache
from tooluse.errors import SchemaVersionError


def test_threads_racing_to_create_one_file_all_get_a_wal_connection(tmp_path: Path) -> None:
    # Switching a fresh file to WAL answers "database is locked" at once (no busy handler)
    # when another connection is doing the same; before the retry about 1 in 100 of these
    # connections failed, so 60 files x 8 racers fail reliably without it.
    failures: list[BaseException] = []
    modes: list[str] = []

    def open_and_write(path: Path, go: threading.Event) -> None:
        go.wait()
        try:
            connection = connect(path, busy_timeout=30.0, synchronous="NORMAL")
            modes.append(connection.execute("PRAGMA journal_mode").fetchone()[0])
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("CREATE TABLE IF NOT EXISTS t (x)")
            connection.execute("INSERT INTO t VALUES (1)")
            connection.execute("COMMIT")
            connection.close()
        except BaseException as error:
            failures.append(error)

    for trial in range(60):
        path = tmp_path / f"race-{trial}.db"
        go = threading.Event()
        threads = [threading.Thread(target=open_and_write, args=(path, go)) for _ in range(8)]
        for thread in threads:
            thread.start()
        go.set()
        for thread in threads:
            thread.join()
        with sqlite3.connect(path) as check:
            assert check.execute("SELECT count(*) FROM t").fetchone()[0] == 8
    assert failures == []
    assert set(modes) == {"wal"}


def test_a_lock_held_past_the_busy_timeout_is_reported_with_the_wait(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # a fresh file in rollback mode: WAL needs this lock
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            connect(path, busy_timeout=0.05, synchronous="NORMAL")
    finally:
        holder.execute("COMMIT")
        holder.close()


def test_embedding_caches_racing_to_create_one_file(tmp_path: Path) -> None:
    failures: list[BaseException] = []
    go = threading.Event()

    def open_cache() -> None:
        go.wait()
        try:
            SqliteEmbeddingCache(tmp_path / "cache.sqlite3").close()
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=open_cache) for _ in range(8)]
    for thread in threads:
        thread.start()
    go.set()
    for thread in threads:
        thread.join()
    assert failures == []


@pytest.mark.parametrize(("name", "value"), [("busy_timeout", -1.0), ("synchronous", "OFF")])
def test_bad_settings_are_refused_by_name(tmp_path: Path, name: str, value: object) -> None:
    settings: dict[str, object] = {"busy_timeout": 1.0, "synchronous": "NORMAL", name: value}
    with pytest.raises(ValueError, match=name):
        connect(tmp_path / "x.db", **settings)  # type: ignore[arg-type]


def test_a_file_of_another_schema_version_raises_schema_version_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    SqliteEmbeddingCache(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE tooluse_schema_version SET version = 99")
    connection.close()
    with pytest.raises(SchemaVersionError) as raised:
        SqliteEmbeddingCache(path)
    error = raised.value
    assert isinstance(error, RuntimeError)  # what it was before it had a class
    assert (error.location, error.component, error.found, error.expected) == (
        str(path),
        "embedding_cache",
        99,
        1,
    )
    assert str(error) == (
        f"{path} holds embedding_cache schema version 99, but this version of tooluse reads "
        "version 1; use a matching tooluse or a new file"
    )


def test_check_schema_reads_without_creating(tmp_path: Path) -> None:
    connection = connect(tmp_path / "x.db", busy_timeout=1, synchronous="NORMAL")
    try:
        assert not check_schema(connection, component="a", version=1, location="x.db")
        ensure_schema(connection, component="a", version=1, statements=(), location="x.db")
        assert check_schema(connection, component="a", version=1, location="x.db")
        assert not check_schema(connection, component="b", version=1, location="x.db")
        with pytest.raises(SchemaVersionError, match=r"x\.db holds a schema version 1"):
            check_schema(connection, component="a", version=2, location="x.db")
        tables = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        assert [name for (name,) in tables] == ["tooluse_schema_version"]
    finally:
        connection.close()
