"""The audit log's stores: a SQLite file or a PostgreSQL database (imported when first used:
the loop needs only :class:`AuditSink` and :class:`AuditRecord`)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Final

from tooluse._postgres import PostgresDatabase
from tooluse._sqlite import Synchronous
from tooluse._tables import OwnsTables, PostgresTables, Schema, SqliteTables, Tables, storable_text
from tooluse.calling._audit import (
    DEFAULT_AUDIT_RETENTION,
    DEFAULT_MAX_AUDIT_RECORDS,
    DEFAULT_MAX_AUDIT_TEXT,
    AuditRecord,
)

__all__ = ["PostgresAuditLog", "SqliteAuditLog"]

logger = logging.getLogger("tooluse.calling")

_FIELDS: Final = tuple(field.name for field in dataclasses.fields(AuditRecord))
_COLUMNS: Final = ", ".join(f'"{name}"' for name in _FIELDS)  # "user" is a word of SQL
_TABLE = """CREATE TABLE tool_audit (
        seq {serial},
        at {real} NOT NULL,
        tool TEXT NOT NULL,
        call_id TEXT NOT NULL,
        arguments TEXT NOT NULL,
        outcome TEXT NOT NULL,
        result TEXT NOT NULL,
        is_error {boolean} NOT NULL,
        latency_ms {real},
        approval TEXT NOT NULL,
        approved_by TEXT,
        "user" TEXT,
        tenant TEXT,
        conversation TEXT
    )"""
_INDEXES = (
    "CREATE INDEX tool_audit_at ON tool_audit (at)",
    'CREATE INDEX tool_audit_user ON tool_audit ("user", at)',
    "CREATE INDEX tool_audit_conversation ON tool_audit (conversation, at)",
)
_ADD_ROLES = "ALTER TABLE tool_audit ADD COLUMN roles TEXT"  # version 2: a JSON array
# Version 3: a tenant's recent calls (recent_calls) without a scan of the other tenants'.
_ADD_TENANT_INDEX = "CREATE INDEX tool_audit_tenant ON tool_audit (tenant, at)"
_SCHEMA = Schema(
    component="tool_audit",
    sqlite=(
        _TABLE.format(serial="INTEGER PRIMARY KEY AUTOINCREMENT", real="REAL", boolean="INTEGER"),
        *_INDEXES,
        _ADD_ROLES,
        _ADD_TENANT_INDEX,
    ),
    sqlite_version=3,
    sqlite_upgrades={1: (_ADD_ROLES,), 2: (_ADD_TENANT_INDEX,)},
    postgres=(
        (
            _TABLE.format(
                serial="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
                real="DOUBLE PRECISION",
                boolean="BOOLEAN",
            ),
            *_INDEXES,
        ),
        (_ADD_ROLES,),
        (_ADD_TENANT_INDEX,),
    ),
)
_ROW_VALUES: Final = f"({', '.join('?' for _ in _FIELDS)})"
# Records per INSERT: 14 values each, below the 999 parameters of SQLite before 3.32.
_INSERTED_AT_ONCE: Final = 50
# Deleting past the bounds is a scan: done at most this often as records are added.
_TIDY_EVERY: Final = 60.0


_Rounds = list[Sequence[AuditRecord]]
_Waiting = list[tuple[Sequence[AuditRecord], asyncio.Future[None]]]


class _GroupedWrites:
    """Rounds of audit records from concurrent calls written together (group commit): a
    round that comes while a write of its event loop runs waits, with every other round
    that comes meanwhile, and they go in one write (one transaction) once it ends.
    ``write`` gets the rounds and returns, for each, ``None`` or the exception its write
    raised, which reaches that round's caller. Each write runs in a task of its own, so a
    caller cancelled (its client gone) does not stop its records' write."""

    def __init__(self, write: Callable[[_Rounds], Awaitable[list[Exception | None]]]) -> None:
        self._write = write
        self._lock = threading.Lock()  # callers on event loops of other threads
        # A loop's write running: the rounds waiting for the next one, with their callers.
        self._writing: dict[asyncio.AbstractEventLoop, _Waiting] = {}
        self._groups: set[asyncio.Task[None]] = set()  # the loop holds tasks weakly

    async def write(self, records: Sequence[AuditRecord]) -> None:
        loop = asyncio.get_running_loop()
        written = loop.create_future()
        with self._lock:
            waiting = self._writing.get(loop)
            if waiting is None:
                self._writing[loop] = []
            else:
                waiting.append((records, written))
        if waiting is None:
            self._start(loop, [(records, written)])
        await written

    def _start(self, loop: asyncio.AbstractEventLoop, group: _Waiting) -> None:
        task = loop.create_task(self._write_group(loop, group))
        self._groups.add(task)
        task.add_done_callback(self._groups.discard)

    def _next(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            group = self._writing.pop(loop)
            if group:
                self._writing[loop] = []
        if group:
            self._start(loop, group)

    async def _write_group(self, loop: asyncio.AbstractEventLoop, group: _Waiting) -> None:
        try:
            failures = await self._write([records for records, _ in group])
        except BaseException as exc:  # the write itself (the loop closing): none written
            for _, written in group:
                if written.done():
                    continue
                if isinstance(exc, asyncio.CancelledError):
                    written.cancel()
                else:
                    written.set_exception(exc)
            raise
        finally:
            self._next(loop)
        for (_, written), failure in zip(group, failures, strict=True):
            if not written.done():
                if failure is None:
                    written.set_result(None)
                else:
                    written.set_exception(failure)
            elif failure is not None:  # its caller was cancelled: nobody else to tell
                logger.error("Audit records of a cancelled call were not stored", exc_info=failure)


class _TableAuditLog:
    """An :class:`AuditSink` in a table of ``_tables`` (a SQLite file or a PostgreSQL
    database), bounded: records older than ``retention`` seconds go, and the oldest beyond
    ``max_records``; the arguments and the result are cut to ``max_text`` characters (a note
    says how long they were)."""

    _tables: Tables
    retention: float
    max_records: int
    max_text: int
    _clock: Callable[[], float]
    _tidied_at: float

    def _configure(
        self, retention: float, max_records: int, max_text: int, clock: Callable[[], float]
    ) -> None:
        if not retention > 0:
            raise ValueError(f"retention must be > 0 seconds, got {retention!r}")
        for what, value in (("max_records", max_records), ("max_text", max_text)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{what} must be a positive integer, got {value!r}")
        self.retention = retention
        self.max_records = max_records
        self.max_text = max_text
        self._clock = clock
        self._tidied_at = float("-inf")
        self._grouped = _GroupedWrites(self._write_rounds)

    async def record(self, records: Sequence[AuditRecord]) -> None:
        if records:
            await self._grouped.write(records)

    def query(
        self,
        *,
        tool: str | None = None,
        user: str | None = None,
        tenant: str | None = None,
        conversation: str | None = None,
        since: float | None = None,
        limit: int | None = None,
    ) -> list[AuditRecord]:
        """The records matching every filter given, oldest first (the newest ``limit``)."""
        filters = {"tool": tool, "user": user, "tenant": tenant, "conversation": conversation}
        where = [f'"{column}" = ?' for column, value in filters.items() if value is not None]
        values: list[Any] = [value for value in filters.values() if value is not None]
        if since is not None:
            where.append("at >= ?")
            values.append(since)
        sql = f"SELECT {_COLUMNS} FROM tool_audit"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC"
        if limit is not None:
            sql += " LIMIT ?"
            values.append(limit)
        with self._tables.read() as connection:
            rows = connection.execute(sql, values).fetchall()
        return [_record(row) for row in reversed(rows)]

    def recent_calls(
        self,
        *,
        tenant: str | None,
        since: float,
        limit: int,
        ignore: Collection[str] = (),
    ) -> list[tuple[float, str, str | None]]:
        """``(at, tool, conversation)`` of the calls made for ``tenant`` (``None``: for no
        tenant, not for any) at ``since`` or later that gave a result (outcome ``ran`` or
        ``repeat``, not an error), but those of the ``ignore`` tools: the newest ``limit``,
        oldest first. What :meth:`~tooluse.search.ToolCoUsage.from_calls` learns a tenant's
        usage from (three columns: none of the records' texts is read)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        skipped = sorted(ignore)
        where = ["tenant IS NULL" if tenant is None else "tenant = ?", "at >= ?"]
        values: list[Any] = ([] if tenant is None else [tenant]) + [since]
        where.append("outcome IN ('ran', 'repeat') AND NOT is_error")
        if skipped:
            where.append(f"tool NOT IN ({', '.join('?' for _ in skipped)})")
            values += skipped
        sql = (
            f"SELECT at, tool, conversation FROM tool_audit WHERE {' AND '.join(where)} "
            "ORDER BY at DESC LIMIT ?"
        )
        with self._tables.read() as connection:
            rows = connection.execute(sql, [*values, limit]).fetchall()
        rows.reverse()  # tuples on both engines (no row factory)
        return rows

    async def _write_rounds(self, rounds: _Rounds) -> list[Exception | None]:
        """:meth:`_insert_rounds`, the usual write (a few rows, no tidying due) as one
        statement from the event loop (on PostgreSQL on its own connections, no thread)."""
        records = [record for records in rounds for record in records]
        if self._tidy_due() or len(records) > _INSERTED_AT_ONCE:
            return await asyncio.to_thread(self._insert_rounds, rounds)
        try:
            await self._tables.aexecute_one(*self._insertion(records))
        except Exception as exc:
            if len(rounds) == 1:
                return [exc]
            _grouped_write_failed(len(rounds))
            return await asyncio.to_thread(self._insert_each, rounds)
        return [None] * len(rounds)

    def _insert_rounds(self, rounds: _Rounds) -> list[Exception | None]:
        """Each round's failure or ``None``: the rounds in one write, or, when it fails,
        each in its own, so that a round that cannot be stored costs no other its records
        and its caller gets its own error."""
        if len(rounds) > 1:
            try:
                self._insert([record for records in rounds for record in records])
            except Exception:
                _grouped_write_failed(len(rounds))
            else:
                return [None] * len(rounds)
        return self._insert_each(rounds)

    def _insert_each(self, rounds: _Rounds) -> list[Exception | None]:
        failures: list[Exception | None] = []
        for records in rounds:
            try:
                self._insert(records)
            except Exception as exc:  # raised to the round's caller
                failures.append(exc)
            else:
                failures.append(None)
        return failures

    def _tidy_due(self) -> bool:
        return self._clock() - self._tidied_at >= _TIDY_EVERY

    def _insertion(self, records: Sequence[AuditRecord]) -> tuple[str, list[Any]]:
        """The statement inserting ``records`` (at most :data:`_INSERTED_AT_ONCE`), and its
        parameters."""
        # The fields read one by one: dataclasses.astuple deep-copies each value, a cost the
        # size of the rest of the insert.
        values = [
            self._stored(name, getattr(record, name)) for record in records for name in _FIELDS
        ]
        statement = f"INSERT INTO tool_audit ({_COLUMNS}) VALUES " + ", ".join(
            [_ROW_VALUES] * len(records)
        )
        return statement, values

    def _insert(self, records: Sequence[AuditRecord]) -> None:
        now = self._clock()
        tidy = now - self._tidied_at >= _TIDY_EVERY
        # A round's records in one statement (on PostgreSQL executemany is a pipeline, which
        # costs more than the statement for a few rows), which commits on its own unless
        # there is more to do.
        alone = not tidy and len(records) <= _INSERTED_AT_ONCE
        with self._tables.write_one() if alone else self._tables.write() as connection:
            for first in range(0, len(records), _INSERTED_AT_ONCE):
                connection.execute(*self._insertion(records[first : first + _INSERTED_AT_ONCE]))
            if tidy:
                self._tidied_at = now
                connection.execute("DELETE FROM tool_audit WHERE at < ?", (now - self.retention,))
                connection.execute(
                    "DELETE FROM tool_audit WHERE seq <= (SELECT MAX(seq) FROM tool_audit) - ?",
                    (self.max_records,),
                )

    def _stored(self, name: str, value: object) -> object:
        if name == "roles":
            return json.dumps(value)
        if not isinstance(value, str):
            return value
        text = storable_text(value)
        if name not in ("arguments", "result") or len(text) <= self.max_text:
            return text
        return f"{text[: self.max_text]}... [{len(text)} characters in all]"


class SqliteAuditLog(SqliteTables, _TableAuditLog):
    """The audit log in a SQLite file (the service's database by default); bounded as the
    module's :class:`AuditSink` stores are (``retention``, ``max_records``, ``max_text``)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        retention: float = DEFAULT_AUDIT_RETENTION,
        max_records: int = DEFAULT_MAX_AUDIT_RECORDS,
        max_text: int = DEFAULT_MAX_AUDIT_TEXT,
        busy_timeout: float = 10.0,
        synchronous: Synchronous = "NORMAL",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._configure(retention, max_records, max_text, clock)
        super().__init__(path, _SCHEMA, busy_timeout=busy_timeout, synchronous=synchronous)
        self._tables = self


class PostgresAuditLog(OwnsTables, _TableAuditLog):
    """The audit log in a PostgreSQL database, one for every worker on every host (bounded
    as :class:`SqliteAuditLog` is). ``database`` is a URL (``postgresql://...``; the log
    opens its own connection pool, closed with it) or a
    :class:`~tooluse.memory.PostgresDatabase` shared with other stores. Needs
    ``pip install 'tooluse[postgres]'``."""

    def __init__(
        self,
        database: str | PostgresDatabase,
        *,
        retention: float = DEFAULT_AUDIT_RETENTION,
        max_records: int = DEFAULT_MAX_AUDIT_RECORDS,
        max_text: int = DEFAULT_MAX_AUDIT_TEXT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._configure(retention, max_records, max_text, clock)
        self._tables = PostgresTables(database, _SCHEMA)


def _grouped_write_failed(rounds: int) -> None:
    logger.warning(
        "A grouped write of %d rounds of audit records failed; writing each alone",
        rounds,
        exc_info=True,
    )


def _record(row: Sequence[Any]) -> AuditRecord:
    values = dict(zip(_FIELDS, row, strict=True))
    values["is_error"] = bool(values["is_error"])
    values["roles"] = () if values["roles"] is None else tuple(json.loads(values["roles"]))
    return AuditRecord(**values)
