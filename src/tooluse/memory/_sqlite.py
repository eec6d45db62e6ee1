"""``SqliteChatMemoryRepository``: conversations in a SQLite file, the embedded default."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from tooluse._sqlite import SqliteStore, Synchronous, write_transaction
from tooluse.memory._api import validate_conversation_id
from tooluse.memory._rows import MessageRow, changed_rows, message_rows, messages_from_rows
from tooluse.messages import Message

__all__ = ["SqliteChatMemoryRepository"]

SCHEMA_VERSION = 1
_SCHEMA = (
    """CREATE TABLE chat_memory_message (
        conversation_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        role TEXT NOT NULL,
        message TEXT NOT NULL,
        PRIMARY KEY (conversation_id, position)
    ) WITHOUT ROWID""",
)


class SqliteChatMemoryRepository(SqliteStore):
    """Stores each message as a JSON row (tool calls and results intact).

    Safe with concurrent writers in threads and processes: the file runs in WAL mode, writers
    wait up to ``busy_timeout`` seconds for the lock, and each save (and each
    :meth:`update`, the read-modify-write a window memory does) is one ``BEGIN IMMEDIATE``
    transaction. A committed message survives a crash of the process (``synchronous="FULL"``:
    a power cut too). The tables carry a schema version; a file of another version is refused.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        synchronous: Synchronous = "NORMAL",
    ) -> None:
        super().__init__(
            path,
            component="chat_memory",
            version=SCHEMA_VERSION,
            statements=_SCHEMA,
            busy_timeout=busy_timeout,
            synchronous=synchronous,
        )

    def find_conversation_ids(self) -> list[str]:
        with self._lock:
            rows = self._connection.execute(
                "SELECT DISTINCT conversation_id FROM chat_memory_message ORDER BY conversation_id"
            ).fetchall()
        return [row[0] for row in rows]

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        validate_conversation_id(conversation_id)
        with self._lock:
            return self._load(conversation_id)[1]

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        validate_conversation_id(conversation_id)
        rows = message_rows(conversation_id, messages)
        with self._lock, write_transaction(self._connection):
            self._replace(conversation_id, rows)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        validate_conversation_id(conversation_id)
        with self._lock, write_transaction(self._connection):
            self._connection.execute(
                "DELETE FROM chat_memory_message WHERE conversation_id = ?", (conversation_id,)
            )

    def update(
        self, conversation_id: str, change: Callable[[list[Message]], list[Message]]
    ) -> list[Message]:
        validate_conversation_id(conversation_id)
        with self._lock, write_transaction(self._connection):
            positions, stored = self._load(conversation_id)
            updated = change(stored)
            below, rows = changed_rows(conversation_id, positions, stored, updated)
            if below is not None:
                self._connection.execute(
                    "DELETE FROM chat_memory_message WHERE conversation_id = ? AND position < ?",
                    (conversation_id, below),
                )
            self._insert(rows)
        return updated

    def _load(self, conversation_id: str) -> tuple[list[int], list[Message]]:
        rows = self._connection.execute(
            "SELECT position, message FROM chat_memory_message WHERE conversation_id = ? "
            "ORDER BY position",
            (conversation_id,),
        ).fetchall()
        return [row[0] for row in rows], messages_from_rows([row[1] for row in rows])

    def _replace(self, conversation_id: str, rows: list[MessageRow]) -> None:
        self._connection.execute(
            "DELETE FROM chat_memory_message WHERE conversation_id = ?", (conversation_id,)
        )
        self._insert(rows)

    def _insert(self, rows: list[MessageRow]) -> None:
        self._connection.executemany(
            "INSERT INTO chat_memory_message (conversation_id, position, role, message) "
            "VALUES (?, ?, ?, ?)",
            rows,
        )
