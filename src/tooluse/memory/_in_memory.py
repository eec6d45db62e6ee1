"""``InMemoryChatMemoryRepository``: conversations in a dict, for tests and single processes."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tooluse._fork import ProcessLock
from tooluse.memory._api import validate_conversation_id
from tooluse.messages import Message

__all__ = ["InMemoryChatMemoryRepository"]


class InMemoryChatMemoryRepository:
    """Thread-safe; reads return copies, ``save_all`` replaces a conversation's messages."""

    def __init__(self) -> None:
        self._conversations: dict[str, tuple[Message, ...]] = {}
        self._lock = ProcessLock()

    def find_conversation_ids(self) -> list[str]:
        with self._lock:
            return list(self._conversations)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        validate_conversation_id(conversation_id)
        with self._lock:
            return list(self._conversations.get(conversation_id, ()))

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        validate_conversation_id(conversation_id)
        with self._lock:
            self._conversations[conversation_id] = tuple(messages)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        validate_conversation_id(conversation_id)
        with self._lock:
            self._conversations.pop(conversation_id, None)

    def update(
        self, conversation_id: str, change: Callable[[list[Message]], list[Message]]
    ) -> list[Message]:
        validate_conversation_id(conversation_id)
        with self._lock:
            updated = change(list(self._conversations.get(conversation_id, ())))
            self._conversations[conversation_id] = tuple(updated)
            return list(updated)
