"""``PostgresChatMemoryRepository``: conversations in PostgreSQL, for several service hosts."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tooluse._fork import PerProcess, ProcessLock
from tooluse.errors import SchemaVersionError
from tooluse.memory._api import validate_conversation_id
from tooluse.memory._rows import MESSAGE, MessageRow, message_rows
from tooluse.messages import Message, message_from_json

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresChatMemoryRepository"]

SCHEMA_VERSION = 1
_SCHEMA_LOCK = 7_436_871_502  # advisory lock id serialising schema creation across hosts
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
    (``tooluse_schema_version``); a database of another version is refused. One connection
    per repository and process, used by one thread at a time. Needs
    ``pip install 'tooluse[postgres]'``.
    """

    def __init__(self, conninfo: str, *, connect_timeout: float = 10.0) -> None:
        try:
            import psycopg
        except ImportError as exc:  # the postgres extra is optional
            raise ImportError(
                "PostgresChatMemoryRepository needs psycopg: pip install 'tooluse[postgres]'"
            ) from exc
        # Autocommit: every statement runs inside an explicit ``transaction()`` block. One
        # connection per process: a forked child must not talk on its parent's socket.
        self._connections: PerProcess[psycopg.Connection[Any]] = PerProcess(
            functools.partial(
                psycopg.connect,
                conninfo,
                autocommit=True,
                connect_timeout=max(1, round(connect_timeout)),
            )
        )
        self._lock = ProcessLock()
        connection = self._connection  # opened now: a bad address fails here
        try:
            self._ensure_schema()
        except BaseException:
            connection.close()
            raise

    @property
    def _connection(self) -> psycopg.Connection[Any]:
        return self._connections.get()

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def __enter__(self) -> PostgresChatMemoryRepository:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def find_conversation_ids(self) -> list[str]:
        with self._lock, self._connection.transaction():
            rows = self._connection.execute(
                "SELECT DISTINCT conversation_id FROM chat_memory_message ORDER BY 1"
            ).fetchall()
        return [row[0] for row in rows]

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        validate_conversation_id(conversation_id)
        with self._lock, self._connection.transaction():
            return self._load(conversation_id)

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        validate_conversation_id(conversation_id)
        rows = message_rows(conversation_id, messages)
        with self._lock, self._connection.transaction():
            self._lock_conversation(conversation_id)
            self._replace(conversation_id, rows)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        validate_conversation_id(conversation_id)
        with self._lock, self._connection.transaction():
            self._lock_conversation(conversation_id)
            self._connection.execute(
                "DELETE FROM chat_memory_message WHERE conversation_id = %s", (conversation_id,)
            )

    def update(
        self, conversation_id: str, change: Callable[[list[Message]], list[Message]]
    ) -> list[Message]:
        validate_conversation_id(conversation_id)
        with self._lock, self._connection.transaction():
            self._lock_conversation(conversation_id)
            updated = change(self._load(conversation_id))
            self._replace(conversation_id, message_rows(conversation_id, updated))
        return updated

    def _ensure_schema(self) -> None:
        with self._lock, self._connection.transaction():
            self._connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            self._connection.execute(
                "CREATE TABLE IF NOT EXISTS tooluse_schema_version "
                "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )
            row = self._connection.execute(
                "SELECT version FROM tooluse_schema_version WHERE component = 'chat_memory'"
            ).fetchone()
            if row is None:
                self._connection.execute(
                    """CREATE TABLE chat_memory_message (
                        conversation_id TEXT NOT NULL,
                        position INTEGER NOT NULL,
                        role TEXT NOT NULL,
                        message JSONB NOT NULL,
                        PRIMARY KEY (conversation_id, position)
                    )"""
                )
                self._connection.execute(
                    "INSERT INTO tooluse_schema_version (component, version) "
                    "VALUES ('chat_memory', %s)",
                    (SCHEMA_VERSION,),
                )
            elif row[0] != SCHEMA_VERSION:
                raise SchemaVersionError(
                    "the database",
                    "chat_memory",
                    row[0],
                    SCHEMA_VERSION,
                    instead="another database",
                )

    def _lock_conversation(self, conversation_id: str) -> None:
        self._connection.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (conversation_id,)
        )

    def _load(self, conversation_id: str) -> list[Message]:
        rows = self._connection.execute(
            "SELECT message FROM chat_memory_message WHERE conversation_id = %s ORDER BY position",
            (conversation_id,),
        ).fetchall()
        return [_message(row[0]) for row in rows]

    def _replace(self, conversation_id: str, rows: list[MessageRow]) -> None:
        self._connection.execute(
            "DELETE FROM chat_memory_message WHERE conversation_id = %s", (conversation_id,)
        )
        with self._connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO chat_memory_message (conversation_id, position, role, message) "
                "VALUES (%s, %s, %s, %s::jsonb)",
                [(*row[:3], _jsonb(row[3])) for row in rows],
            )


def _message(stored: object) -> Message:
    """The message a row's jsonb holds: an object, or the JSON text :func:`_jsonb` wrapped."""
    return message_from_json(stored) if isinstance(stored, str) else MESSAGE.validate_python(stored)


def _jsonb(message_json: str) -> str:
    """``message_json`` as jsonb takes it. jsonb cannot hold a NUL or a lone surrogate (a
    tool result read from a binary file, a model's ``"\\ud800"``), so such a message is
    stored as a JSON string holding its JSON text, read back by :func:`message_from_json`
    (a message itself is always an object)."""
    return json.dumps(message_json) if _JSONB_UNSAFE.search(message_json) else message_json
