"""A store's tables in a SQLite file or a PostgreSQL database: one store class, either engine.

A store writes its statements once, in the SQL both engines read, with ``?`` placeholders
(turned into psycopg's ``%s`` for PostgreSQL: the statements hold no other ``?`` or ``%``),
and declares its schema for each engine (:class:`Schema`: the column types differ). It runs
them in :meth:`Tables.write` (one transaction: SQLite's ``BEGIN IMMEDIATE``, PostgreSQL's
``BEGIN``) or :meth:`Tables.read` blocks. :func:`open_tables` picks the engine from where the
tables are: a ``postgresql://`` URL or a :class:`~tooluse._postgres.PostgresDatabase`, else a
SQLite file.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import dataclasses
import os
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self

from tooluse._postgres import PostgresDatabase, database_of
from tooluse._sqlite import SqliteStore, Synchronous, write_transaction

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "Location",
    "OwnsTables",
    "PostgresTables",
    "Rows",
    "Runner",
    "Schema",
    "SqliteTables",
    "Tables",
    "is_postgres_url",
    "location_label",
    "open_tables",
    "storable_text",
]

Location = str | os.PathLike[str] | PostgresDatabase
"""Where a store keeps its tables: a SQLite file, a PostgreSQL URL or database."""


class Rows(Protocol):
    """What running a statement gives (a DB-API cursor)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Runner(Protocol):
    def execute(self, statement: str, parameters: Sequence[Any] = ()) -> Rows: ...

    def executemany(self, statement: str, rows: Iterable[Sequence[Any]]) -> object:
        """One statement for each of ``rows`` (PostgreSQL: pipelined, one round trip)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Schema:
    """A store's tables on each engine: for SQLite the statements creating version
    ``sqlite_version`` and ``sqlite_upgrades`` from older versions (``tooluse._sqlite``),
    for PostgreSQL its migrations from nothing (``tooluse._postgres``)."""

    component: str
    sqlite: Sequence[str]
    sqlite_version: int
    sqlite_upgrades: Mapping[int, Sequence[str]] = dataclasses.field(default_factory=dict)
    postgres: Sequence[Sequence[str]]


class Tables(abc.ABC):
    """A store's tables; any thread may use them.

    ``row_lock`` ends a ``SELECT`` whose rows the transaction goes on to change: PostgreSQL
    reads committed rows without locking them, so two transactions could both read a row as
    it was and both act on it (``FOR UPDATE`` makes the second wait for the first); a SQLite
    write transaction holds the whole file already."""

    row_lock: str = ""

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the tables are, for messages (a file, or "the database")."""

    @abc.abstractmethod
    def write(self) -> contextlib.AbstractContextManager[Runner]:
        """One write transaction, committed when the block ends (rolled back on an
        exception)."""

    @abc.abstractmethod
    def read(self) -> contextlib.AbstractContextManager[Runner]:
        """Statements that only read."""

    def write_one(self) -> contextlib.AbstractContextManager[Runner]:
        """One statement that writes, committed on its own: a transaction of one statement
        without its ``BEGIN`` and ``COMMIT`` (on PostgreSQL a round trip each)."""
        return self.read()  # both engines' read() runs each statement on its own

    async def aexecute_one(self, statement: str, parameters: Sequence[Any] = ()) -> None:
        """:meth:`write_one`'s one statement, from a coroutine: here in a thread;
        PostgreSQL's on the running event loop's connections."""

        def execute() -> None:
            with self.write_one() as connection:
                connection.execute(statement, parameters)

        await asyncio.to_thread(execute)

    @abc.abstractmethod
    def close(self) -> None: ...


class SqliteTables(SqliteStore, Tables):
    """The tables in a SQLite file (WAL, one connection per process, used by one thread at a
    time); ``synchronous`` as :func:`tooluse._sqlite.connect` takes it."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        schema: Schema,
        *,
        busy_timeout: float,
        synchronous: Synchronous = "NORMAL",
    ) -> None:
        super().__init__(
            path,
            component=schema.component,
            version=schema.sqlite_version,
            statements=schema.sqlite,
            upgrades=schema.sqlite_upgrades,
            busy_timeout=busy_timeout,
            synchronous=synchronous,
        )

    @property
    def location(self) -> str:
        return self._path

    @contextlib.contextmanager
    def write(self) -> Iterator[Runner]:
        with self._lock, write_transaction(self._connection) as connection:
            yield connection

    @contextlib.contextmanager
    def read(self) -> Iterator[Runner]:
        with self._lock:
            yield self._connection


class PostgresTables(Tables):
    """The tables in a PostgreSQL database: each block on a pooled connection, so threads
    run at once. From a URL the tables open their own pool, closed with them; a shared
    :class:`~tooluse._postgres.PostgresDatabase` is closed by its owner."""

    row_lock = " FOR UPDATE"

    def __init__(self, database: str | PostgresDatabase, schema: Schema) -> None:
        self._database, self._owned = database_of(database)
        try:
            self._database.migrate(schema.component, schema.postgres)
        except BaseException:
            self.close()
            raise

    @property
    def location(self) -> str:
        return "the database"

    @contextlib.contextmanager
    def write(self) -> Iterator[Runner]:
        with self._database.transaction() as connection:
            yield _Placeholders(connection)

    @contextlib.contextmanager
    def read(self) -> Iterator[Runner]:
        with self._database.connection() as connection:
            yield _Placeholders(connection)

    async def aexecute_one(self, statement: str, parameters: Sequence[Any] = ()) -> None:
        async with self._database.async_connection() as connection:
            await connection.execute(statement.replace("?", "%s"), parameters)

    def close(self) -> None:
        if self._owned:
            self._database.close()


class OwnsTables:
    """A store on ``_tables`` that closes them when it closes (or leaves its ``with``
    block)."""

    _tables: Tables

    def close(self) -> None:
        self._tables.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _Placeholders:
    """A psycopg connection that takes the statements with ``?`` placeholders."""

    __slots__ = ("_connection",)

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self._connection = connection

    def execute(self, statement: str, parameters: Sequence[Any] = ()) -> Rows:
        return self._connection.execute(statement.replace("?", "%s"), parameters)

    def executemany(self, statement: str, rows: Iterable[Sequence[Any]]) -> object:
        with self._connection.cursor() as cursor:
            cursor.executemany(statement.replace("?", "%s"), rows)
        return None


def storable_text(text: str) -> str:
    """``text`` as both engines store it: a lone surrogate (a model's ``"\\ud800"`` escape)
    is not UTF-8, and PostgreSQL's text holds no NUL; both are written as escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def is_postgres_url(location: object) -> bool:
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def location_label(location: Location) -> str:
    """``location`` for a log line: a file's path, or a URL without its password."""
    url = location.url if isinstance(location, PostgresDatabase) else os.fspath(location)
    if "://" not in url:
        return url
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def open_tables(location: Location, schema: Schema, *, busy_timeout: float = 30.0) -> Tables:
    """The store's tables at ``location``: PostgreSQL for a ``postgresql://`` URL or a
    :class:`~tooluse._postgres.PostgresDatabase`, else a SQLite file."""
    if isinstance(location, PostgresDatabase) or is_postgres_url(location):
        assert isinstance(location, str | PostgresDatabase)
        return PostgresTables(location, schema)
    return SqliteTables(location, schema, busy_timeout=busy_timeout)
