"""``PostgresChatMemoryRepository``: conversations in PostgreSQL, for several service hosts."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tooluse._postgres import PostgresDatabase, database_of
from tooluse.memory._api import validate_conversation_id
from tooluse.memory._rows import MessageRow, changed_rows, message_rows, messages_from_rows
from tooluse.messages import Message

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresChatMemoryRepository"]

# The schema's migrations, oldest first (tooluse._postgres): version 1 is the table as
# created by the first release.
_MIGRATIONS = (
    (
        """CREATE TABLE chat_memory_message (
            conversation_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            role TEXT NOT NULL,
            message JSONB NOT NULL,
            PRIMARY KEY (conversation_id, position)
        )""",
    ),
    # Version 2: the update of a window from the rows last read, as one statement.
    (
        """CREATE OR REPLACE FUNCTION tooluse_chat_memory_append(
            conversation TEXT, read_positions INTEGER[], read_digest TEXT, below INTEGER,
            new_rows JSONB
        ) RETURNS VOID LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(hashtextextended(conversation, 0));
            -- Each statement of a volatile function reads what committed before it: the
            -- rows as the lock's last holder left them.
            IF NOT EXISTS (
                SELECT FROM (
                    SELECT array_agg(position ORDER BY position) AS positions,
                        md5(string_agg(message #>> '{}', E'\\x1e' ORDER BY position)) AS digest
                    FROM chat_memory_message WHERE conversation_id = conversation
                ) AS stored
                WHERE positions IS NOT DISTINCT FROM read_positions
                    AND digest IS NOT DISTINCT FROM read_digest
            ) THEN
                -- Not as read: nothing of the statement is kept (a write made with it too).
                RAISE EXCEPTION 'the rows of the conversation changed since they were read'
                    USING ERRCODE = 'serialization_failure';
            END IF;
            DELETE FROM chat_memory_message
                WHERE conversation_id = conversation AND position < below;
            INSERT INTO chat_memory_message (conversation_id, position, role, message)
                SELECT conversation, (row_of->>0)::integer, row_of->>1, row_of->2
                FROM jsonb_array_elements(new_rows) AS row_of;
        END $$""",
    ),
    # Version 3: the same update, giving back the digest of the rows it leaves, so that the
    # writer knows them as the database does (a message comes back as jsonb prints it, not
    # as it was written) and its next update needs no read. A new name: workers of version
    # 2 keep calling theirs during a rolling upgrade.
    (
        """CREATE OR REPLACE FUNCTION tooluse_chat_memory_append_digest(
            conversation TEXT, read_positions INTEGER[], read_digest TEXT, below INTEGER,
            new_rows JSONB
        ) RETURNS TEXT LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
            PERFORM tooluse_chat_memory_append(
                conversation, read_positions, read_digest, below, new_rows
            );
            RETURN (
                SELECT md5(string_agg(message #>> '{}', E'\\x1e' ORDER BY position))
                FROM chat_memory_message WHERE conversation_id = conversation
            );
        END $$""",
    ),
)
SCHEMA_VERSION = len(_MIGRATIONS)
# What jsonb refuses in a string: the escape of NUL and surrogate escapes (a lone surrogate is
# written as one; a pair of an emoji only by the standard library's writer, and wrapping it
# too is harmless).
_JSONB_UNSAFE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
# Conversations whose last read this process remembers, for their next update.
_SEEN_CONVERSATIONS = 1024


class _Seen:
    """A conversation's rows as a read found them, or as this repository's last update left
    them: their positions, a digest of their texts (as :data:`_APPEND`'s function computes
    it; ``None`` for no rows) and their messages."""

    __slots__ = ("digest", "messages", "positions")

    def __init__(
        self, positions: list[int], digest: str | None, messages: Sequence[Message]
    ) -> None:
        self.positions = positions
        self.digest = digest
        self.messages = tuple(messages)

    @classmethod
    def read(cls, positions: list[int], texts: list[str], messages: list[Message]) -> _Seen:
        return cls(positions, _digest(texts) if texts else None, messages)


class PostgresChatMemoryRepository:
    """Stores each message as a JSONB row in ``chat_memory_message`` (tool calls and results
    intact), behind the same protocol as the SQLite repository.

    Each save, and each :meth:`update` (a window memory's read-modify-write), is one
    transaction that first takes a transaction-scoped advisory lock on the conversation id,
    so concurrent writers on any number of hosts never lose a message, even for a
    conversation that has no row yet. An update of a conversation this repository read
    (a service turn reads its window when it starts and writes it when it ends) is made
    from what it read, in one round trip that takes the lock and writes only if the rows
    are still those read (the same positions and texts); else it reads them under the
    lock and calls ``change`` again on them. The tables carry a schema version
    (``tooluse_schema_version``), created or migrated when the repository opens; a database
    of a later version is refused.

    ``database`` is a URL (``postgresql://...``; the repository opens its own connection
    pool, closed with it) or a :class:`~tooluse.memory.PostgresDatabase` shared with other stores
    (closed by its owner). Any number of threads may use the repository at once, each on a
    pooled connection. Needs ``pip install 'tooluse[postgres]'``.
    """

    def __init__(self, database: str | PostgresDatabase) -> None:
        self._database, self._owned = database_of(database)
        # Each conversation's last read, until its next update takes it (bounded: the
        # oldest go first): the service reads a window when a turn starts and updates it
        # when the turn ends.
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._seen_lock = threading.Lock()
        try:
            self._database.migrate("chat_memory", _MIGRATIONS)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the connection pool if the repository opened it (from a URL)."""
        if self._owned:
            self._database.close()

    def __enter__(self) -> PostgresChatMemoryRepository:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def find_conversation_ids(self) -> list[str]:
        with self._database.transaction() as connection:
            rows = connection.execute(
                "SELECT DISTINCT conversation_id FROM chat_memory_message ORDER BY 1"
            ).fetchall()
        return [row[0] for row in rows]

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        validate_conversation_id(conversation_id)
        # One statement reads one snapshot: no transaction needed (BEGIN and COMMIT are a
        # round trip each).
        with self._database.connection() as connection:
            read = _load(connection, conversation_id)
        return self._remembered(conversation_id, *read)

    def find_by_conversation_id_with_exists(
        self, conversation_id: str, query: str, parameters: Sequence[Any] = ()
    ) -> tuple[list[Message], bool]:
        """The conversation's messages, as :meth:`find_by_conversation_id` reads them, and
        whether ``query`` (another read of this database, ``%s`` placeholders for
        ``parameters``) finds a row, in one statement (the service reads whether a run of
        the conversation waits for approval with its window)."""
        validate_conversation_id(conversation_id)
        with self._database.connection() as connection:
            rows = connection.execute(
                _READ_WITH_EXISTS.replace("{query}", query), (*parameters, conversation_id)
            ).fetchall()
        return self._remembered(conversation_id, *_parsed(rows)), rows[0][2]

    async def afind_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """:meth:`find_by_conversation_id` on the running event loop's connections (no
        thread)."""
        validate_conversation_id(conversation_id)
        rows = await self._afetched(_READ, (conversation_id,))
        return self._remembered(conversation_id, *_parsed(rows))

    async def afind_by_conversation_id_with_exists(
        self, conversation_id: str, query: str, parameters: Sequence[Any] = ()
    ) -> tuple[list[Message], bool]:
        """:meth:`find_by_conversation_id_with_exists` on the running event loop's
        connections (no thread)."""
        validate_conversation_id(conversation_id)
        rows = await self._afetched(
            _READ_WITH_EXISTS.replace("{query}", query), (*parameters, conversation_id)
        )
        return self._remembered(conversation_id, *_parsed(rows)), rows[0][2]

    async def _afetched(self, statement: str, parameters: Sequence[Any]) -> list[Any]:
        async with self._database.async_connection() as connection:
            cursor = await connection.execute(statement, parameters)
            return await cursor.fetchall()

    def _remembered(
        self, conversation_id: str, positions: list[int], texts: list[str], messages: list[Message]
    ) -> list[Message]:
        """The messages read, remembered (bounded: the oldest go first) for the
        conversation's next update."""
        self._remember(conversation_id, _Seen.read(positions, texts, messages))
        return messages

    def _remember(self, conversation_id: str, seen: _Seen) -> None:
        with self._seen_lock:
            self._seen[conversation_id] = seen
            self._seen.move_to_end(conversation_id)
            if len(self._seen) > _SEEN_CONVERSATIONS:
                self._seen.popitem(last=False)

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        validate_conversation_id(conversation_id)
        rows = message_rows(conversation_id, messages)
        with self._database.transaction() as connection:
            _lock_conversation(connection, conversation_id)
            _replace(connection, conversation_id, rows)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        validate_conversation_id(conversation_id)
        with self._database.transaction() as connection:
            _lock_conversation(connection, conversation_id)
            connection.execute(
                "DELETE FROM chat_memory_message WHERE conversation_id = %s", (conversation_id,)
            )

    def update(
        self, conversation_id: str, change: Callable[[list[Message]], list[Message]]
    ) -> list[Message]:
        validate_conversation_id(conversation_id)
        import psycopg

        checked = self._checked_update(conversation_id, change)
        if checked is not None:
            updated, parameters, positions = checked
            try:
                with self._database.connection() as connection:
                    row = connection.execute(_APPEND, parameters).fetchone()
            except psycopg.errors.SerializationFailure:  # changed since read: as they are
                pass
            else:
                return self._written(conversation_id, positions, row, updated)
        return self._update_locked(conversation_id, change)

    async def aupdate(
        self,
        conversation_id: str,
        change: Callable[[list[Message]], list[Message]],
        *,
        also: tuple[str, Sequence[Any]] | None = None,
    ) -> list[Message]:
        """:meth:`update`; an update made from the rows last read (a turn's) on the running
        event loop's connections, the others in a thread. ``also``, a statement that writes
        to this database (``%s`` placeholders) and its parameters, is made in the update's
        transaction (the service's display record of the turn): both or neither."""
        validate_conversation_id(conversation_id)
        import psycopg

        checked = self._checked_update(conversation_id, change)
        if checked is not None:
            updated, parameters, positions = checked
            statement = _APPEND
            if also is not None:
                statement = f"WITH also AS ({also[0]}) {_APPEND}"
                parameters = [*also[1], *parameters]
            try:
                async with self._database.async_connection() as connection:
                    cursor = await connection.execute(statement, parameters)
                    row = await cursor.fetchone()
            except psycopg.errors.SerializationFailure:  # changed since read: as they are
                pass
            else:
                return self._written(conversation_id, positions, row, updated)
        return await asyncio.to_thread(self._update_locked, conversation_id, change, also)

    def _update_locked(
        self,
        conversation_id: str,
        change: Callable[[list[Message]], list[Message]],
        also: tuple[str, Sequence[Any]] | None = None,
    ) -> list[Message]:
        """The update made on the rows read under the conversation's lock (with ``also`` in
        its transaction)."""
        with self._database.transaction() as connection:
            _lock_conversation(connection, conversation_id)
            if also is not None:
                connection.execute(*also)
            positions, _, stored = _load(connection, conversation_id)
            updated = change(stored)
            below, rows = changed_rows(conversation_id, positions, stored, updated)
            if below is not None and rows and rows[0][1] >= below:
                # The window moved on: the rows below go in the statement that adds the new
                # ones after them (a round trip fewer).
                _insert(connection, rows, dropping=(conversation_id, below))
                return updated
            if below is not None:  # the rows numbered again from 0 go first
                connection.execute(
                    "DELETE FROM chat_memory_message WHERE conversation_id = %s AND position < %s",
                    (conversation_id, below),
                )
            _insert(connection, rows)
        return updated

    def _written(
        self, conversation_id: str, positions: list[int], row: Any, updated: list[Message]
    ) -> list[Message]:
        """``updated``, just written by :data:`_APPEND` (whose ``row`` holds the digest of
        the rows it left at ``positions``), remembered for the conversation's next update
        and for :meth:`remembered`."""
        self._remember(conversation_id, _Seen(positions, row[0], updated))
        return updated

    def remembered(self, conversation_id: str) -> list[Message] | None:
        """The conversation's messages as this repository last read or wrote them (no
        I/O), ``None`` if it holds none: the caller knows whether another writer may have
        come since (the service's turns do, from their conversation's lock)."""
        with self._seen_lock:
            seen = self._seen.get(conversation_id)
        return None if seen is None else list(seen.messages)

    def _checked_update(
        self, conversation_id: str, change: Callable[[list[Message]], list[Message]]
    ) -> tuple[list[Message], list[Any], list[int]] | None:
        """The update made from the rows last read, if this repository read the
        conversation and the update moves the window on: the messages it makes,
        :data:`_APPEND`'s parameters, which write them if the rows are still as read, and
        the positions of the rows it leaves; else ``None``: the caller reads them under the
        lock and changes them then (``change`` is called again, on the rows as they are)."""
        with self._seen_lock:
            seen = self._seen.pop(conversation_id, None)
        if seen is None:
            return None
        stored = list(seen.messages)
        updated = change(stored)
        below, rows = changed_rows(conversation_id, seen.positions, stored, updated)
        if not rows or (below is not None and rows[0][1] < below):
            return None  # nothing added, or the rows numbered again: the general path
        # The new rows as one JSON array of [position, role, message]: the messages' texts
        # go in as they are, and the statement is the same whatever the number of rows
        # (prepared once, not once per count).
        new_rows = ",".join(
            f"[{position},{json.dumps(role)},{_jsonb(message)}]"
            for _, position, role, message in rows
        )
        parameters = [
            conversation_id,
            _array_literal(seen.positions),
            seen.digest,
            below,
            f"[{new_rows}]",
        ]
        kept = seen.positions if below is None else [p for p in seen.positions if p >= below]
        return updated, parameters, [*kept, *(row[1] for row in rows)]


# The update of a window from the rows last read (a turn's start read them; the turn's
# end writes), in one statement and one transaction (the schema's function, version 2;
# version 3's gives back the digest of the rows it leaves):
# the conversation's lock, then, on the rows as they are once it is held, the rows below
# the position given deleted and the new ones added only if the rows are those read (the
# same positions, the same texts); else it fails (serialization_failure), and nothing of
# the statement is kept. A pipeline of the lock's
# statement and the write's, as before, was three socket writes to PostgreSQL (one per
# statement and the Sync), each waking its backend.
_APPEND = "SELECT tooluse_chat_memory_append_digest(%s, %s::integer[], %s, %s, %s::jsonb)"


def _array_literal(positions: Sequence[int]) -> str | None:
    """``positions`` as PostgreSQL's text of an integer array (``None`` for none): psycopg's
    dumper of a list of ints, in Python, cost the statement a fifth of its CPU."""
    return "{" + ",".join(map(str, positions)) + "}" if positions else None


def _digest(texts: Sequence[str]) -> str:
    """The digest of rows' texts that :data:`_APPEND`'s function computes."""
    return hashlib.md5("\x1e".join(texts).encode(), usedforsecurity=False).hexdigest()


# A conversation's lock, held until its transaction ends: its writers on every host take it.
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"


def _lock_conversation(connection: psycopg.Connection[Any], conversation_id: str) -> None:
    connection.execute(_LOCK, (conversation_id,))


def _load(
    connection: psycopg.Connection[Any], conversation_id: str
) -> tuple[list[int], list[str], list[Message]]:
    """The conversation's rows: their positions, texts and messages."""
    return _parsed(connection.execute(_READ, (conversation_id,)).fetchall())


def _parsed(rows: Sequence[Any]) -> tuple[list[int], list[str], list[Message]]:
    """:data:`_READ`'s rows (or :data:`_READ_WITH_EXISTS`'s): their positions, texts and
    messages."""
    if rows and rows[0][0] is None:  # the one row of a conversation without any
        rows = ()
    texts = [row[1] for row in rows]
    return [row[0] for row in rows], texts, messages_from_rows(texts)


# `#>> '{}'`: the jsonb as text (a message's object), or the text a string holds (what
# _jsonb wrapped), so the messages come from the texts this process parsed already: a
# window is read twice a turn, and parsing its rows was most of a read's CPU.
_READ = (
    "SELECT position, message #>> '{}' FROM chat_memory_message "
    "WHERE conversation_id = %s ORDER BY position"
)
# _READ's rows, each with whether `{query}` (another read) finds a row; one row without a
# position when the conversation has none. One statement: a pipeline of the two reads and
# its Sync was three socket writes to PostgreSQL, each waking its backend.
_READ_WITH_EXISTS = (
    "SELECT stored.position, stored.message, asked.found "
    "FROM (SELECT EXISTS ({query}) AS found) AS asked LEFT JOIN LATERAL ("
    "SELECT position, message #>> '{}' AS message FROM chat_memory_message "
    "WHERE conversation_id = %s) AS stored ON true ORDER BY stored.position"
)


def _replace(
    connection: psycopg.Connection[Any], conversation_id: str, rows: list[MessageRow]
) -> None:
    connection.execute(
        "DELETE FROM chat_memory_message WHERE conversation_id = %s", (conversation_id,)
    )
    _insert(connection, rows)


def _insert(
    connection: psycopg.Connection[Any],
    rows: list[MessageRow],
    dropping: tuple[str, int] | None = None,
) -> None:
    """Insert ``rows``; with ``dropping`` (a conversation and a position below the rows'),
    delete that conversation's rows below it in the same statement."""
    # One statement per _INSERTED_AT_ONCE rows: psycopg's executemany runs a pipeline, which
    # costs more than the statement for the turn's few rows.
    for first in range(0, len(rows), _INSERTED_AT_ONCE):
        chunk = rows[first : first + _INSERTED_AT_ONCE]
        head, parameters = "", []
        if dropping is not None and first == 0:
            head = (
                "WITH dropped AS (DELETE FROM chat_memory_message "
                "WHERE conversation_id = %s AND position < %s) "
            )
            parameters = list(dropping)
        connection.execute(
            head
            + "INSERT INTO chat_memory_message (conversation_id, position, role, message) VALUES "
            + ", ".join(["(%s, %s, %s, %s::jsonb)"] * len(chunk)),
            parameters + [value for row in chunk for value in (*row[:3], _jsonb(row[3]))],
        )


# Rows per INSERT: 4 parameters each, well below PostgreSQL's 65,535 per statement.
_INSERTED_AT_ONCE = 1000


def _jsonb(message_json: str) -> str:
    """``message_json`` as jsonb takes it. jsonb cannot hold a NUL or a lone surrogate (a
    tool result read from a binary file, a model's ``"\\ud800"``), so such a message is
    stored as a JSON string holding its JSON text, which :func:`_load` reads back as that
    text (a message itself is always an object)."""
    return json.dumps(message_json) if _JSONB_UNSAFE.search(message_json) else message_json
