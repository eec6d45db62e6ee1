"""The idempotency journal's stores: a SQLite file or a PostgreSQL database (imported when
first used: the loop needs only :class:`ToolCallJournal`)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import Any, Final

from tooluse._postgres import PostgresDatabase
from tooluse._sqlite import Synchronous
from tooluse._tables import OwnsTables, PostgresTables, Schema, SqliteTables, Tables, storable_text
from tooluse.calling._journal import DEFAULT_JOURNAL_RETENTION, JournalEntry

__all__ = ["PostgresToolCallJournal", "SqliteToolCallJournal"]

_TABLE = """CREATE TABLE tool_call_journal (
        key TEXT PRIMARY KEY,
        tool TEXT NOT NULL,
        call_id TEXT NOT NULL,
        state TEXT NOT NULL,
        started_at {real} NOT NULL,
        result TEXT,
        finished_at {real}
    )"""
_BY_START = "CREATE INDEX tool_call_journal_started ON tool_call_journal (started_at)"
_SCHEMA = Schema(
    component="tool_call_journal",
    sqlite=(_TABLE.format(real="REAL"), _BY_START),
    sqlite_version=1,
    postgres=((_TABLE.format(real="DOUBLE PRECISION"), _BY_START),),
)

_COLUMNS = "key, tool, call_id, state, started_at, result, finished_at"
# Deleting every expired entry is a scan of the index: done at most this often per process
# as keys are claimed (an expired entry of the key being claimed goes at once).
_TIDY_EVERY: Final = 60.0


class _TableToolCallJournal:
    """A :class:`ToolCallJournal` in a table of ``_tables`` (a SQLite file or a PostgreSQL
    database). A claim is one ``INSERT ... ON CONFLICT DO NOTHING``: of two calls racing on
    one key, in any processes, the database lets one insert the row; the other waits for
    that transaction and then reads the row it wrote."""

    _tables: Tables
    retention: float
    _clock: Callable[[], float]
    _tidied_at: float

    def _configure(self, retention: float, clock: Callable[[], float]) -> None:
        if not retention > 0:
            raise ValueError(f"retention must be > 0 seconds, got {retention!r}")
        self.retention = retention
        self._clock = clock
        self._tidied_at = float("-inf")

    async def begin(self, key: str, *, tool: str, call_id: str) -> JournalEntry | None:
        return await asyncio.to_thread(self._begin, key, tool, call_id)

    async def finish(self, key: str, result: str) -> None:
        await asyncio.to_thread(self._finish, key, result)

    async def release(self, key: str) -> None:
        await asyncio.to_thread(self._delete, key)

    async def entry(self, key: str) -> JournalEntry | None:
        return await asyncio.to_thread(self._entry, key)

    async def forget(self, key: str) -> bool:
        return await asyncio.to_thread(self._delete, key)

    def unfinished(self) -> list[JournalEntry]:
        """The live entries still ``started``: calls that may have acted without a recorded
        result (running now, or cut off by a crash), oldest first."""
        with self._tables.read() as connection:
            rows = connection.execute(
                f"SELECT {_COLUMNS} FROM tool_call_journal WHERE state = 'started' "
                "AND started_at > ? ORDER BY started_at",
                (self._clock() - self.retention,),
            ).fetchall()
        return [_entry(row) for row in rows]

    def _begin(self, key: str, tool: str, call_id: str) -> JournalEntry | None:
        now = self._clock()
        expired = now - self.retention
        if now - self._tidied_at >= _TIDY_EVERY:
            self._tidied_at = now
            with self._tables.write() as connection:
                connection.execute(
                    "DELETE FROM tool_call_journal WHERE started_at <= ?", (expired,)
                )
        with self._tables.write() as connection:
            connection.execute(
                "DELETE FROM tool_call_journal WHERE key = ? AND started_at <= ?", (key, expired)
            )
            while True:
                claimed = connection.execute(
                    "INSERT INTO tool_call_journal (key, tool, call_id, state, started_at) "
                    "VALUES (?, ?, ?, 'started', ?) ON CONFLICT (key) DO NOTHING",
                    (key, storable_text(tool), storable_text(call_id), now),
                )
                if claimed.rowcount == 1:
                    return None
                row = connection.execute(
                    f"SELECT {_COLUMNS} FROM tool_call_journal WHERE key = ?", (key,)
                ).fetchone()
                if row is not None:
                    return _entry(row)
                # (PostgreSQL: its holder released the key between the two statements)

    def _finish(self, key: str, result: str) -> None:
        with self._tables.write() as connection:
            connection.execute(
                "UPDATE tool_call_journal SET state = 'done', result = ?, finished_at = ? "
                "WHERE key = ?",
                # as a JSON string: a lone surrogate or a NUL in it cannot be stored as text
                (json.dumps(result), self._clock(), key),
            )

    def _delete(self, key: str) -> bool:
        with self._tables.write() as connection:
            deleted = connection.execute("DELETE FROM tool_call_journal WHERE key = ?", (key,))
            return deleted.rowcount > 0

    def _entry(self, key: str) -> JournalEntry | None:
        with self._tables.read() as connection:
            row = connection.execute(
                f"SELECT {_COLUMNS} FROM tool_call_journal WHERE key = ? AND started_at > ?",
                (key, self._clock() - self.retention),
            ).fetchone()
        return None if row is None else _entry(row)


class SqliteToolCallJournal(SqliteTables, _TableToolCallJournal):
    """A :class:`ToolCallJournal` in a SQLite file (the service's database by default),
    shared by the processes of one machine.

    ``retention``: seconds an entry answers repeats, from when its call started; older ones
    are deleted as new keys are claimed. ``synchronous="FULL"`` (the default here) keeps a
    claim through a power cut too: the claim is what stops a second run. ``clock`` gives the
    time (for tests)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        retention: float = DEFAULT_JOURNAL_RETENTION,
        busy_timeout: float = 10.0,
        synchronous: Synchronous = "FULL",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._configure(retention, clock)
        super().__init__(path, _SCHEMA, busy_timeout=busy_timeout, synchronous=synchronous)
        self._tables = self

    def __repr__(self) -> str:
        return f"SqliteToolCallJournal({self.path!r}, retention={self.retention:g})"


class PostgresToolCallJournal(OwnsTables, _TableToolCallJournal):
    """A :class:`ToolCallJournal` in a PostgreSQL database, shared by every worker on every
    host: a key one worker claimed is not run by another. ``database`` is a URL
    (``postgresql://...``; the journal opens its own connection pool, closed with it) or a
    :class:`~tooluse.memory.PostgresDatabase` shared with other stores. ``retention`` and
    ``clock`` as for :class:`SqliteToolCallJournal` (the clock is each worker's: keep the
    hosts' clocks in step, as NTP does). Needs ``pip install 'tooluse[postgres]'``."""

    def __init__(
        self,
        database: str | PostgresDatabase,
        *,
        retention: float = DEFAULT_JOURNAL_RETENTION,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._configure(retention, clock)
        self._tables = PostgresTables(database, _SCHEMA)

    def __repr__(self) -> str:
        return f"PostgresToolCallJournal(retention={self.retention:g})"


def _entry(row: tuple[Any, ...]) -> JournalEntry:
    key, tool, call_id, state, started_at, result, finished_at = row
    stored = None if result is None else json.loads(result)
    return JournalEntry(key, tool, call_id, state, started_at, stored, finished_at)
