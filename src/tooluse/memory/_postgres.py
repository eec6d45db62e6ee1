"""``PostgresChatMemoryRepository``: conversations in PostgreSQL, for several service hosts."""

from __future__ import annotations

import json
import re
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
)
SCHEMA_VERSION = len(_MIGRATIONS)
# What jsonb refuses in a string: the escape of NUL and surrogate escapes (a lone surrogate is
# written as one; a pair of an emoji only by the standard library's writer, and wrapping it
# too is harmless).
_JSONB_UNSAFE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


class PostgresChatMemoryRepository:
    """Stores each message as a JSONB row in ``chat_memory_message`` (tool calls and results
    intact), behind the same protocol as the SQLite repository.

    Each save, and each :meth:`update` (a window memory's read-modify-write), is one
    transaction that first takes a transaction-scoped advisory lock on the conversation id,
    so concurrent writers on any number of hosts never lose a message, even for a
    conversation that has no row yet. The tables carry a schema version
    (``tooluse_schema_version``), created or migrated when the repository opens; a database
    of a later version is refused.

    ``database`` is a URL (``postgresql://...``; the repository opens its own connection
    pool, closed with it) or a :class:`~tooluse.memory.PostgresDatabase` shared with other stores
    (closed by its owner). Any number of threads may use the repository at once, each on a
    pooled connection. Needs ``pip install 'tooluse[postgres]'``.
    """

    def __init__(self, database: str | PostgresDatabase) -> None:
        self._database, self._owned = database_of(database)
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
            return _load(connection, conversation_id)[1]

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
        with self._database.transaction() as connection:
            _lock_conversation(connection, conversation_id)
            positions, stored = _load(connection, conversation_id)
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


def _lock_conversation(connection: psycopg.Connection[Any], conversation_id: str) -> None:
    connection.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (conversation_id,))


def _load(
    connection: psycopg.Connection[Any], conversation_id: str
) -> tuple[list[int], list[Message]]:
    # `#>> '{}'`: the jsonb as text (a message's object), or the text a string holds (what
    # _jsonb wrapped), so the messages come from the texts this process parsed already: a
    # window is read twice a turn, and parsing its rows was most of a read's CPU.
    rows = connection.execute(
        "SELECT position, message #>> '{}' FROM chat_memory_message "
        "WHERE conversation_id = %s ORDER BY position",
        (conversation_id,),
    ).fetchall()
    return [row[0] for row in rows], messages_from_rows([row[1] for row in rows])


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
