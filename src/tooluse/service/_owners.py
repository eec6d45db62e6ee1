"""Who owns each conversation, stored in SQLite or PostgreSQL beside the conversations.

A conversation started by a named user (an API key of theirs, a proxy's header, a token) is
theirs: another caller is answered as if it did not exist. Conversations of anonymous
callers (an open service, its one shared key) have no row; nor do those stored before
owners were recorded, which the service therefore treats as anonymous ones.
"""

from __future__ import annotations

import time

from tooluse._tables import Location, Schema, open_tables
from tooluse.calling import Caller

__all__ = ["ConversationOwners", "owner_of"]

_TABLE = """CREATE TABLE qa_conversation_owner (
    conversation_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    tenant_id TEXT,
    created_at {real} NOT NULL
)"""
_SCHEMA = Schema(
    component="qa_conversation_owner",
    sqlite=(_TABLE.format(real="REAL"),),
    sqlite_version=1,
    postgres=((_TABLE.format(real="DOUBLE PRECISION"),),),
)

Owner = tuple[str | None, str | None]
"""``(user id, tenant id)``; ``(None, None)``: anonymous."""


def owner_of(caller: Caller) -> Owner:
    return caller.user_id, caller.tenant_id


class ConversationOwners:
    """The owner of each conversation a named user started (:meth:`claim`)."""

    def __init__(self, location: Location, *, busy_timeout: float = 30.0) -> None:
        self._tables = open_tables(location, _SCHEMA, busy_timeout=busy_timeout)

    def close(self) -> None:
        self._tables.close()

    def __enter__(self) -> ConversationOwners:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def owner(self, conversation_id: str) -> Owner:
        """The conversation's owner; ``(None, None)`` when no named user owns it."""
        with self._tables.read() as connection:
            row = connection.execute(
                "SELECT user_id, tenant_id FROM qa_conversation_owner WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    def claim(self, conversation_id: str, caller: Caller) -> Owner:
        """Make a named caller the owner of a conversation nobody owns yet; the owner it
        has then (another's, when one claimed it first)."""
        if caller.user_id is None:
            raise ValueError("an anonymous caller owns no conversation")
        with self._tables.write() as connection:
            connection.execute(
                "INSERT INTO qa_conversation_owner (conversation_id, user_id, tenant_id, "
                "created_at) VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id) DO NOTHING",
                (conversation_id, caller.user_id, caller.tenant_id, time.time()),
            )
            row = connection.execute(
                "SELECT user_id, tenant_id FROM qa_conversation_owner WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()
        return row[0], row[1]
