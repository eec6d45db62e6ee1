"""The idempotency journal: a write tool's call, by its idempotency key, runs once.

A tool declares a key (``@tool(idempotency_key=True)``: all its arguments; or a function of
the arguments and the tool context, e.g. an order number and the user). Before the call
runs, the manager claims the key in the journal (a ``started`` entry, committed before the
tool is called); after it, records the result (``done``). A later call with the same key
within the retention window, from the model, a retry, a resumed run or a process started
after a crash, does not run the tool:

- ``done``: the stored result is returned, marked as a repeat;
- ``started``: a call with this key began and recorded no result. It is still running, or
  its process stopped while it ran (a crash between executing and recording): whether it
  acted is unknown, so it is not run again; the model is told so, and an operator clears
  the entry (:meth:`ToolCallJournal.forget`) once they have checked.

A call that raises (the tool refused, or failed before acting) releases its key, so a
corrected call may run; one that timed out keeps it ``started`` (it may still act).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, Protocol, runtime_checkable

from tooluse._postgres import PostgresDatabase
from tooluse._sqlite import Synchronous
from tooluse._tables import OwnsTables, PostgresTables, Schema, SqliteTables, Tables, storable_text
from tooluse.tools import ToolCallback, ToolContext

__all__ = [
    "DEFAULT_JOURNAL_RETENTION",
    "JournalEntry",
    "PostgresToolCallJournal",
    "SqliteToolCallJournal",
    "ToolCallJournal",
    "idempotency_key_of",
]

DEFAULT_JOURNAL_RETENTION: Final = 7 * 24 * 3600.0
"""Seconds a journal entry answers repeats: a week covers a model's repeats, a client's
retries and a run resumed after a weekend; then a call with the key runs again."""

JournalState = Literal["started", "done"]


@dataclasses.dataclass(frozen=True, slots=True)
class JournalEntry:
    """One key's record: which tool and call claimed it and when, its state, and for a
    ``done`` entry the result text the model read."""

    key: str
    tool: str
    call_id: str
    state: JournalState
    started_at: float
    result: str | None = None
    finished_at: float | None = None


@runtime_checkable
class ToolCallJournal(Protocol):
    """Where idempotency keys are claimed and results kept; SQLite by default
    (:class:`SqliteToolCallJournal`), PostgreSQL for several workers on several hosts
    (:class:`PostgresToolCallJournal`). ``begin`` must be atomic across every process
    sharing the journal: of two calls claiming one key at once, exactly one gets ``None``."""

    async def begin(self, key: str, *, tool: str, call_id: str) -> JournalEntry | None:
        """Claim ``key`` for a call about to run (``None``), or the live entry that holds it."""
        ...

    async def finish(self, key: str, result: str) -> None:
        """Record the result of the call that claimed ``key``."""
        ...

    async def release(self, key: str) -> None:
        """Give up ``key`` (its call raised before acting), so a later call may run."""
        ...

    async def entry(self, key: str) -> JournalEntry | None:
        """The live entry of ``key``, if any (e.g. to see calls whose outcome is unknown)."""
        ...

    async def forget(self, key: str) -> bool:
        """Delete ``key``'s entry (an operator cleared an unknown outcome); whether one was."""
        ...


def idempotency_key_of(callback: ToolCallback, arguments: str, context: ToolContext) -> str | None:
    """The journal key of a call to ``callback`` (``None``: the tool declares none): a hash of
    the tool's name and its declared key, all the arguments as canonical JSON for ``True``.
    Raises ``ValueError`` when the key function does not return a non-empty string."""
    declared = callback.metadata.idempotency_key
    if declared is None:
        return None
    name = callback.definition.name
    try:
        parsed: Any = json.loads(arguments)
    except ValueError:
        parsed = arguments  # the tool refuses it; the same text is still the same call
    if declared is True:
        key = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    else:
        values: Mapping[str, Any] = parsed if isinstance(parsed, dict) else {}
        key = _declared_key(declared, values, context, name)
    # (surrogatepass: a model's lone "\ud800" escape is still one key, not an error)
    return hashlib.sha256(f"{name}\x00{key}".encode("utf-8", "surrogatepass")).hexdigest()


def _declared_key(
    declared: Callable[[Mapping[str, Any], ToolContext], str],
    arguments: Mapping[str, Any],
    context: ToolContext,
    name: str,
) -> str:
    key = declared(arguments, context)
    if not isinstance(key, str) or not key:
        raise ValueError(
            f"The idempotency_key function of tool '{name}' returned {key!r}; it must return a "
            "non-empty string"
        )
    return key


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


def repeat_text(entry: JournalEntry) -> tuple[str, bool]:
    """What the model reads for a repeated call: the stored result marked as a repeat (not an
    error), or, for a call whose outcome is unknown, an error saying it was not run again."""
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(entry.started_at))
    if entry.state == "done" and entry.result is not None:
        note = (
            f"[Not run again: a call of '{entry.tool}' with the same idempotency key ran at "
            f"{started}; this is its result.]"
        )
        return f"{note}\n{entry.result}", False
    return (
        f"Tool '{entry.tool}' was not run: a call with the same idempotency key started at "
        f"{started} and recorded no result (it is still running, or was cut off). Whether it "
        "took effect is unknown; do not retry it. Tell the user a person must check.",
        True,
    )
