"""PostgreSQL plumbing shared by the PostgreSQL stores (chat memory, vector store).

A :class:`PostgresDatabase` is a connection pool (psycopg-pool) to one database, made again
in each process (a forked child must not talk on its parent's sockets), that any number of
stores share. Each store's tables carry a schema version per component in
``tooluse_schema_version`` (the table the SQLite stores use too) and are created or migrated
when the store opens: :meth:`PostgresDatabase.migrate` runs the steps the database lacks,
under an advisory lock, so workers starting at once migrate it once.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tooluse._fork import PerProcess
from tooluse.errors import SchemaVersionError

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["PostgresDatabase", "database_of", "postgres_errors"]

SCHEMA_TABLE = "tooluse_schema_version"
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
        self, url: str, *, min_size: int = 1, max_size: int = 10, timeout: float = 30.0
    ) -> None:
        _import_psycopg()
        if max_size < 1 or min_size < 0 or min_size > max_size:
            raise ValueError(
                f"pool sizes must satisfy 0 <= min_size <= max_size >= 1, got {min_size}, "
                f"{max_size}"
            )
        self.url = url
        self._timeout = timeout
        self._pools: PerProcess[ConnectionPool[Any]] = PerProcess(
            functools.partial(self._open_pool, min_size, max_size)
        )
        self._pools.get()

    def _open_pool(self, min_size: int, max_size: int) -> ConnectionPool[Any]:
        import psycopg
        from psycopg_pool import ConnectionPool

        connect_timeout = max(1, round(self._timeout))
        settings: dict[str, Any] = {"autocommit": True, "connect_timeout": connect_timeout}
        # One connection first: a pool retries a failing address until its timeout and then
        # says only that it timed out; this says why at once (refused, bad password, ...).
        psycopg.connect(self.url, connect_timeout=connect_timeout).close()
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
        """Close this process's pool (its connections)."""
        pool = self._pools.made()
        if pool is not None:
            pool.close()

    def __enter__(self) -> PostgresDatabase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def database_of(database: str | PostgresDatabase) -> tuple[PostgresDatabase, bool]:
    """The database a store runs on, and whether the store owns it (made it from a URL, so
    closes it) or shares one given to it (closed by its owner)."""
    if isinstance(database, PostgresDatabase):
        return database, False
    if not isinstance(database, str) or not database.strip():
        raise TypeError(f"expected a PostgreSQL URL or a PostgresDatabase, got {database!r}")
    return PostgresDatabase(database), True


def postgres_errors() -> tuple[type[Exception], ...]:
    """psycopg's errors (cannot connect, no pgvector, no permission, ...), when the
    postgres extra is installed: for a command to report them as its options' fault."""
    try:
        import psycopg
    except ImportError:
        return ()
    return (psycopg.Error,)
