"""The row layout both SQL repositories store a conversation in: one row per message,
``(conversation_id, position, role, message JSON)``."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import TypeAdapter

from tooluse.messages import Message, StoredMessage, message_to_json

__all__ = ["MESSAGE", "MessageRow", "message_rows"]

MESSAGE: TypeAdapter[Message] = TypeAdapter(StoredMessage)

MessageRow = tuple[str, int, str, str]


def message_rows(conversation_id: str, messages: Sequence[Message]) -> list[MessageRow]:
    return [
        (conversation_id, position, message.role, message_to_json(message))
        for position, message in enumerate(messages)
    ]
