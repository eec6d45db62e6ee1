"""PostgreSQL plumbing shared by the PostgreSQL stores (chat memory, vector store).

A :class:`PostgresDatabase` is a connection pool (psycopg-pool) to one database, made again
in each process (a forked child must not talk on its parent's sockets), that any number of
stores share. Each store's tables carry a schema version per component in
``tooluse_schema_version`` (the table the SQLite stores use too) and are created or migrated
when the store opens: :meth:`PostgresDatabase.migrate` runs the steps the database lacks,
under an advisory lock, so workers starting at once migrate it once.

Code on an event loop (the service's turns) reaches the database without a thread:
:meth:`PostgresDatabase.async_connection` is a connection of that loop's own (opened as
needed, ``_LoopConnections``). A busy loop held the GIL while a thread's query waited for
it after each read of its socket: under load a round trip from a thread took tens of
milliseconds, most of it waiting for the GIL and for a thread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tooluse._fork import PerProcess
from tooluse.errors import SchemaVersionError

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = [
    "DEFAULT_POOL_SIZE",
    "PostgresDatabase",
    "connections_available",
    "database_of",
    "postgres_errors",
]

SCHEMA_TABLE = "tooluse_schema_version"
DEFAULT_POOL_SIZE = 10
"""Connections a :class:`PostgresDatabase` opens at most for a process's threads, and as many
for each event loop: a service's worker, on one loop, may hold twice this."""
_SCHEMA_LOCK = 7_436_871_502  # advisory lock id serialising migrations across hosts


def _import_psycopg() -> None:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:  # the postgres extra is optional
        raise ImportError(
            "The PostgreSQL stores need psycopg and psycopg-pool: pip install 'tooluse[postgres]'"
        ) from exc


class PostgresDatabase:
    """A pool of up to ``max_size`` connections to ``url`` (``postgresql://...`` or a libpq
    conninfo string) in each process, in autocommit mode: a store runs its statements in
    explicit :meth:`transaction` blocks. The first connection is opened now, so a bad address
    fails here (after ``timeout`` seconds at most). Close it when done
    (``with PostgresDatabase(url) as database:``)."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = DEFAULT_POOL_SIZE,
        timeout: float = 30.0,
    ) -> None:
        _import_psycopg()
        if max_size < 1 or min_size < 0 or min_size > max_size:
            raise ValueError(
                f"pool sizes must satisfy 0 <= min_size <= max_size >= 1, got {min_size}, "
                f"{max_size}"
            )
        self.url = url
        self._timeout = timeout
        self._max_size = max_size
        self._pools: PerProcess[ConnectionPool[Any]] = PerProcess(
            functools.partial(self._open_pool, min_size, max_size)
        )
        self._pools.get()
        # Each event loop's connections (a loop runs in one process).
        self._loop_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopConnections] = (
            weakref.WeakKeyDictionary()
        )

    def _settings(self) -> dict[str, Any]:
        return {"autocommit": True, "connect_timeout": max(1, round(self._timeout))}

    def _open_pool(self, min_size: int, max_size: int) -> ConnectionPool[Any]:
        import psycopg
        from psycopg_pool import ConnectionPool

        settings = self._settings()
        # One connection first: a pool retries a failing address until its timeout and then
        # says only that it timed out; this says why at once (refused, bad password, ...).
        psycopg.connect(self.url, connect_timeout=settings["connect_timeout"]).close()
        pool: ConnectionPool[Any] = ConnectionPool(
            self.url,
            min_size=min_size,
            max_size=max_size,
            timeout=self._timeout,
            kwargs=settings,
            open=False,
            name="tooluse",
        )
        pool.open(wait=min_size > 0, timeout=self._timeout)
        return pool

    def connection(self) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]:
        """A connection of this process's pool, for this thread until the block ends."""
        # The pool's own context manager, not one wrapping it: a turn takes four.
        return self._pools.get().connection(timeout=self._timeout)

    def async_connection(
        self,
    ) -> contextlib.AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]:
        """A connection of the running event loop's own (up to ``max_size``, in autocommit
        mode, opened as they are first needed), for this task until the block ends."""
        return self._loop_connections().connection()

    def _loop_connections(self) -> _LoopConnections:
        loop = asyncio.get_running_loop()
        pool = self._loop_pools.get(loop)
        if pool is None:
            pool = self._loop_pools[loop] = _LoopConnections(
                self.url, self._settings(), self._max_size, self._timeout
            )
        return pool

    async def aclose(self) -> None:
        """Close the running event loop's connections (:meth:`async_connection`'s): those
        idle now, the others as they are given back; the loop takes no more."""
        self._loop_connections().close_idle()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection inside one transaction, committed when the block ends (rolled back
        on an exception)."""
        with self.connection() as connection, connection.transaction():
            yield connection

    def migrate(self, component: str, steps: Sequence[Sequence[str]]) -> None:
        """Bring ``component``'s tables to version ``len(steps)``: ``steps[n]`` holds the
        statements taking version ``n`` to ``n + 1`` (``steps[0]`` creates the tables). All
        the missing steps run in one transaction; a database at a later version than this
        tooluse knows is refused (:class:`~tooluse.errors.SchemaVersionError`)."""
        with self.transaction() as connection:
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            connection.execute(
                f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} "
                "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )
            row = connection.execute(
                f"SELECT version FROM {SCHEMA_TABLE} WHERE component = %s", (component,)
            ).fetchone()
            found = 0 if row is None else row[0]
            if not isinstance(found, int) or not 0 <= found <= len(steps):
                raise SchemaVersionError(
                    "the database", component, found, len(steps), instead="another database"
                )
            for step in steps[found:]:
                for statement in step:
                    connection.execute(statement)
            if found != len(steps):
                connection.execute(
                    f"INSERT INTO {SCHEMA_TABLE} (component, version) VALUES (%s, %s) "
                    "ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version",
                    (component, len(steps)),
                )

    def close(self) -> None:
        """Close this process's pool (its connections) and the event loops' connections
        idle now (:meth:`aclose` on a loop still running: no loop must use them)."""
        for connections in list(self._loop_pools.values()):
            connections.close_idle()
        pool = self._pools.made()
        if pool is not None:
            pool.close()

    def __enter__(self) -> PostgresDatabase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _LoopConnections:
    """The connections of one event loop's tasks: idle ones reused, new ones opened up to
    ``max_size``, then the tasks wait for one given back, in the order they came (at most
    ``timeout`` seconds). A connection given back in a transaction or a query (its task
    cancelled in it), or broken, is closed and its place freed.

    Not psycopg_pool's ``AsyncConnectionPool``: each of its takes and returns holds one
    ``asyncio.Lock``, whose every hand-over waited for a turn of a busy loop. At 100 turns
    per worker a connection was used for 1.5 ms and waited for 70 (`bench_service.py`).
    On one loop, nothing needs a lock."""

    __slots__ = (
        "_closed",
        "_idle",
        "_max_size",
        "_open",
        "_settings",
        "_timeout",
        "_url",
        "_waiting",
    )

    def __init__(self, url: str, settings: dict[str, Any], max_size: int, timeout: float) -> None:
        self._url = url
        self._settings = settings
        self._max_size = max_size
        self._timeout = timeout
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        # What waits for a connection: each is given one, or None (a place came free: open
        # one).
        self._waiting: collections.deque[asyncio.Future[psycopg.AsyncConnection[Any] | None]] = (
            collections.deque()
        )
        self._open = 0  # connections open or opening
        self._closed = False

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        connection = await self._take()
        try:
            yield connection
        finally:
            self._give_back(connection)

    async def _take(self) -> psycopg.AsyncConnection[Any]:
        if self._closed:
            raise RuntimeError("the database's connections of this event loop are closed")
        if self._idle:
            return self._idle.pop()
        if self._open >= self._max_size:
            connection = await self._wait()
            if connection is not None:
                return connection
        else:
            self._open += 1
        try:
            import psycopg

            return await psycopg.AsyncConnection.connect(self._url, **self._settings)
        except BaseException:
            self._free_place()
            raise

    async def _wait(self) -> psycopg.AsyncConnection[Any] | None:
        waiter: asyncio.Future[psycopg.AsyncConnection[Any] | None]
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            async with asyncio.timeout(self._timeout):
                return await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():  # given one as it stopped waiting
                given = waiter.result()
                if given is None:
                    self._free_place()
                else:
                    self._give_back(given)
            if isinstance(exc, TimeoutError):
                from psycopg_pool import PoolTimeout

                raise PoolTimeout(
                    f"no connection to the database came free within {self._timeout:g} s: "
                    f"all {self._max_size} of this worker's were in use"
                ) from None
            raise

    def _give_back(self, connection: psycopg.AsyncConnection[Any]) -> None:
        from psycopg.pq import TransactionStatus

        if self._closed or connection.pgconn.transaction_status != TransactionStatus.IDLE:
            connection.pgconn.finish()  # what AsyncConnection.close() does, not awaited
            self._free_place()
            return
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        self._idle.append(connection)

    def _free_place(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)  # it opens one in this place
                return
        self._open -= 1

    def close_idle(self) -> None:
        """Take no more tasks; close the idle connections (the others as they come back)."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.pgconn.finish()
        self._open -= len(idle)


def database_of(database: str | PostgresDatabase) -> tuple[PostgresDatabase, bool]:
    """The database a store runs on, and whether the store owns it (made it from a URL, so
    closes it) or shares one given to it (closed by its owner)."""
    if isinstance(database, PostgresDatabase):
        return database, False
    if not isinstance(database, str) or not database.strip():
        raise TypeError(f"expected a PostgreSQL URL or a PostgresDatabase, got {database!r}")
    return PostgresDatabase(database), True


def connections_available(url: str, timeout: float = 30.0) -> int:
    """How many more connections the PostgreSQL server at ``url`` takes from a role that is
    not a superuser: its ``max_connections`` less those reserved (for superusers, and for
    ``pg_use_reserved_connections`` from version 16) and the clients' connections open now,
    this one's excluded."""
    _import_psycopg()
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=max(1, round(timeout))) as c:
        row = c.execute(_CONNECTIONS_AVAILABLE).fetchone()
    assert row is not None  # one row, always
    return int(row[0])


_CONNECTIONS_AVAILABLE = (
    "SELECT current_setting('max_connections')::int"
    " - current_setting('superuser_reserved_connections')::int"
    " - coalesce(current_setting('reserved_connections', true)::int, 0)"
    " - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend') + 1"
)


def postgres_errors() -> tuple[type[Exception], ...]:
    """psycopg's errors (cannot connect, no pgvector, no permission, ...), when the
    postgres extra is installed: for a command to report them as its options' fault."""
    try:
        import psycopg
    except ImportError:
        return ()
    return (psycopg.Error,)
