"""SQLite plumbing shared by the embedded stores (chat memory, vector store).

Every store opens its file the same way: WAL journal (readers never block the writer), a busy
timeout (writers from other threads or processes wait instead of failing), explicit
``BEGIN IMMEDIATE`` transactions (the write lock is taken up front, so a read-modify-write
cannot interleave with another writer), and a per-component schema version.
"""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Literal, Self

from tooluse._fork import ForkGate, PerProcess, ProcessLock
from tooluse.errors import SchemaVersionError

__all__ = [
    "SCHEMA_TABLE",
    "SqliteStore",
    "Synchronous",
    "check_schema",
    "connect",
    "ensure_schema",
    "sqlite_gate",
    "write_transaction",
]

logger = logging.getLogger(__name__)

SCHEMA_TABLE = "tooluse_schema_version"


Synchronous = Literal["NORMAL", "FULL"]

# Every SQLite call of the stores runs inside this gate: a fork taken while another thread was
# inside SQLite could leave its global mutexes locked in the child, which then hangs on its
# first SQLite call.
sqlite_gate = ForkGate()


def connect(
    path: str | os.PathLike[str], *, busy_timeout: float, synchronous: Synchronous
) -> sqlite3.Connection:
    """Open ``path`` in autocommit mode (transactions are explicit) with WAL on.

    ``synchronous="NORMAL"`` (WAL's usual setting) keeps every committed transaction through a
    crash of the process; ``"FULL"`` also through a power cut, at one fsync per commit.
    """
    if busy_timeout < 0:
        raise ValueError(f"busy_timeout must be >= 0 seconds, got {busy_timeout}")
    if synchronous not in ("NORMAL", "FULL"):
        raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
    connection = sqlite3.connect(
        os.fspath(path), timeout=busy_timeout, isolation_level=None, check_same_thread=False
    )
    try:
        mode = _enter_wal(connection, busy_timeout)
        if mode != "wal" and os.fspath(path) != ":memory:":
            logger.warning("SQLite file %s is in %s mode, not WAL (file system?)", path, mode)
        connection.execute(f"PRAGMA synchronous={synchronous}")
    except BaseException:
        connection.close()
        raise
    return connection


def _enter_wal(connection: sqlite3.Connection, busy_timeout: float) -> str:
    """``PRAGMA journal_mode=WAL``, retried until ``busy_timeout``: switching a fresh file to
    WAL needs an exclusive lock, and SQLite reports a busy lock there at once instead of
    calling the busy handler, so processes racing to create one file would otherwise fail."""
    deadline = time.monotonic() + busy_timeout
    pause = 0.001
    while True:
        try:
            return str(connection.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
            if time.monotonic() + pause > deadline:
                raise sqlite3.OperationalError(
                    f"{error} (switching to WAL for over {busy_timeout} s)"
                ) from error
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


@contextmanager
def write_transaction(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction; rolled back on any exception."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:  # also when COMMIT itself failed
            connection.execute("ROLLBACK")
        raise


def ensure_schema(
    connection: sqlite3.Connection,
    *,
    component: str,
    version: int,
    statements: Iterable[str],
    location: str,
    upgrades: Mapping[int, Sequence[str]] | None = None,
) -> None:
    """Create ``component``'s tables (``statements``, the schema of ``version``) on first
    use; bring a file of an older version up to date with ``upgrades`` (``upgrades[n]``: the
    statements taking version ``n`` to ``n + 1``), in the same transaction; refuse a file of
    another version (:class:`~tooluse.errors.SchemaVersionError`)."""
    upgrades = upgrades or {}
    with write_transaction(connection):
        connection.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} "
            "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        found = _stored_version(connection, component)
        if found is None:
            for statement in statements:
                connection.execute(statement)
            connection.execute(
                f"INSERT INTO {SCHEMA_TABLE} (component, version) VALUES (?, ?)",
                (component, version),
            )
            return
        if found == version:
            return
        if (
            not isinstance(found, int)
            or found > version
            or any(n not in upgrades for n in range(found, version))
        ):
            raise SchemaVersionError(location, component, found, version)  # newer, or unknown
        for n in range(found, version):
            for statement in upgrades[n]:
                connection.execute(statement)
        connection.execute(
            f"UPDATE {SCHEMA_TABLE} SET version = ? WHERE component = ?", (version, component)
        )


def _stored_version(connection: sqlite3.Connection, component: str) -> object:
    row = connection.execute(
        f"SELECT version FROM {SCHEMA_TABLE} WHERE component = ?", (component,)
    ).fetchone()
    return None if row is None else row[0]


def check_schema(
    connection: sqlite3.Connection, *, component: str, version: int, location: str
) -> bool:
    """Whether the file holds ``component``'s tables (``False``: not created yet, nothing is
    created here); :class:`~tooluse.errors.SchemaVersionError` when of another version."""
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (SCHEMA_TABLE,)
    ).fetchone()
    if exists is None:
        return False
    found = _stored_version(connection, component)
    if found is None:
        return False
    if found != version:
        raise SchemaVersionError(location, component, found, version)
    return True


class _StoreLock:
    """A store's own lock (per process), then :data:`sqlite_gate`."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = ProcessLock()

    def __enter__(self) -> None:
        self._lock.__enter__()
        try:
            sqlite_gate.__enter__()
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise

    def __exit__(self, *exc_info: object) -> None:
        sqlite_gate.__exit__()
        self._lock.__exit__()


class SqliteStore:
    """A store in one SQLite file: one connection, opened as :func:`connect` does with
    ``component``'s tables ensured, used by one thread at a time and only inside ``_lock``;
    closing the store (or leaving its ``with`` block) closes the connection.

    The connection and the lock are per process: a forked child (a pre-fork server) opens
    its own connection on first use, as SQLite requires, and never waits on a lock that
    another thread of the parent held at the fork. ``_lock`` also holds forks off while the
    connection is in use (:data:`sqlite_gate`)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        component: str,
        version: int,
        statements: Iterable[str],
        busy_timeout: float,
        synchronous: Synchronous,
        upgrades: Mapping[int, Sequence[str]] | None = None,
    ) -> None:
        self._path = os.fspath(path)
        self._lock: AbstractContextManager[None] = _StoreLock()
        self._connections = PerProcess(
            functools.partial(connect, path, busy_timeout=busy_timeout, synchronous=synchronous),
            shared=self._path == ":memory:",  # no file: the child has its own copy
        )
        with self._lock:
            connection = self._connection  # opened now: a bad path fails here
            try:
                ensure_schema(
                    connection,
                    component=component,
                    version=version,
                    statements=statements,
                    location=self._path,
                    upgrades=upgrades,
                )
            except BaseException:
                connection.close()
                raise

    @property
    def path(self) -> str:
        return self._path

    def check_schema(self, *, component: str, version: int) -> None:
        """Refuse the file now (:class:`~tooluse.errors.SchemaVersionError`) if it holds
        another ``component`` at another schema version: for a store of the same file that
        is opened later (e.g. in the background)."""
        with self._lock:
            check_schema(
                self._connection, component=component, version=version, location=self._path
            )

    @property
    def _connection(self) -> sqlite3.Connection:
        return self._connections.get()

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
