"""``PostgresDatabase``: the pool the PostgreSQL stores share, and versioned migrations."""

from __future__ import annotations

import asyncio
import logging
import threading

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from tooluse._postgres import DEFAULT_POOL_SIZE, connections_available
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


# The event loop's own connections (PostgresDatabase.async_connection): what the service's
# turns read and write their memory on, without a thread.


async def backend(connection: psycopg.AsyncConnection) -> int:
    cursor = await connection.execute("SELECT pg_backend_pid()")
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def test_a_loop_reuses_its_connections_and_opens_at_most_max_size(
    postgres_url: str,
) -> None:
    with PostgresDatabase(postgres_url, max_size=2) as database:
        async with database.async_connection() as connection:
            first = await backend(connection)
            assert connection.autocommit
        async with database.async_connection() as connection:
            assert await backend(connection) == first  # the idle one again
        held = [database.async_connection() for _ in range(2)]
        connections = [await manager.__aenter__() for manager in held]
        # A third waits, in order, for one given back: the pool never opens more than two.
        third = asyncio.create_task(_backend_of(database))
        await asyncio.sleep(0.05)
        assert not third.done()
        given_back = await backend(connections[0])
        await held[0].__aexit__(None, None, None)
        assert await asyncio.wait_for(third, 5) == given_back
        await held[1].__aexit__(None, None, None)
        await database.aclose()
        with pytest.raises(RuntimeError, match="connections of this event loop are closed"):
            async with database.async_connection():
                pass


async def _backend_of(database: PostgresDatabase) -> int:
    async with database.async_connection() as connection:
        return await backend(connection)


async def test_a_loop_waits_for_a_connection_at_most_its_timeout(postgres_url: str) -> None:
    with PostgresDatabase(postgres_url, max_size=1, timeout=0.2) as database:
        async with database.async_connection():
            with pytest.raises(PoolTimeout, match=r"within 0.2 s: all 1 of this worker's"):
                async with database.async_connection():
                    pass
        async with database.async_connection() as connection:  # its place was kept
            await backend(connection)
        await database.aclose()


async def test_a_connection_given_back_in_a_transaction_is_closed_and_its_place_freed(
    postgres_url: str,
) -> None:
    with PostgresDatabase(postgres_url, max_size=1) as database:
        async with database.async_connection() as connection:
            await connection.execute("BEGIN")  # left open: what it did must not leak on
            await connection.execute("CREATE TEMP TABLE scratch (n INTEGER)")
            left = await backend(connection)
        assert connection.closed
        async with database.async_connection() as connection:  # a new one in its place
            assert await backend(connection) != left
            assert connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        await database.aclose()


async def test_a_waiter_cancelled_as_it_is_given_a_connection_passes_it_on(
    postgres_url: str,
) -> None:
    with PostgresDatabase(postgres_url, max_size=1) as database:
        holding = database.async_connection()
        connection = await holding.__aenter__()
        held = await backend(connection)
        waiter = asyncio.create_task(_backend_of(database))
        after = asyncio.create_task(_backend_of(database))
        await asyncio.sleep(0.05)
        await holding.__aexit__(None, None, None)  # given to the waiter, which is cancelled
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert await asyncio.wait_for(after, 5) == held  # the next waiter got it
        await database.aclose()


async def test_each_event_loop_has_connections_of_its_own(postgres_url: str) -> None:
    with PostgresDatabase(postgres_url) as database:
        mine = await _backend_of(database)
        other = await asyncio.to_thread(asyncio.run, _backend_of(database))
        assert other != mine
        assert await _backend_of(database) == mine
        await database.aclose()


def test_connections_available_counts_what_the_server_still_takes(postgres_url: str) -> None:
    # The tests' server: max_connections 200, 3 reserved for superusers.
    before = connections_available(postgres_url)
    assert 150 < before <= 197
    held = [psycopg.connect(postgres_url) for _ in range(5)]
    try:
        during = connections_available(postgres_url)
    finally:
        for connection in held:
            connection.close()
    assert before - 7 <= during <= before - 3  # five more open (another test's may close)


def test_serve_warns_when_the_workers_may_open_more_than_the_server_takes(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from tooluse.cli.serve import _warn_if_short_of_connections

    available = connections_available(postgres_url)
    too_many = available // (2 * DEFAULT_POOL_SIZE) + 1
    with caplog.at_level(logging.WARNING, logger="tooluse.service"):
        _warn_if_short_of_connections(postgres_url, 1)
        assert caplog.messages == []
        _warn_if_short_of_connections(postgres_url, too_many)
    [warning] = caplog.messages
    assert f"{too_many} worker(s) may open {too_many * 2 * DEFAULT_POOL_SIZE}" in warning
    assert "Raise its max_connections or run fewer workers" in warning
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tooluse.service"):
        _warn_if_short_of_connections("postgresql://nobody@127.0.0.1:1/none", 2)
    [unreachable] = caplog.messages
    assert unreachable.startswith("could not ask PostgreSQL how many connections it takes")
