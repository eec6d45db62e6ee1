"""``MessageWindowChatMemory``: keeps the last N messages of each conversation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from tooluse.history import paused_turn_of, with_held_rounds_completed
from tooluse.memory._api import (
    AsyncChatMemoryRepository,
    ChatMemoryRepository,
    validate_conversation_id,
)
from tooluse.memory._in_memory import InMemoryChatMemoryRepository
from tooluse.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)

__all__ = ["MessageWindowChatMemory"]

_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolResponseMessage)


class MessageWindowChatMemory:
    """A chat memory that keeps at most ``max_messages`` per conversation (Spring's rule).

    On ``add``: if the new messages bring a system message that is not stored yet, the stored
    system messages are dropped (a changed system prompt replaces the old one). When the total
    exceeds ``max_messages``, the oldest non-system messages are evicted and the cut moves
    forward to the next user message, so the window always starts a turn and a tool call is
    never kept without its result (if no user message is left, every non-system message goes).
    System messages are always kept. Unlike Spring, a tool result never starts the window: one
    whose call was evicted is dropped too. A round stored while paused for approval (its
    record: :func:`~tooluse.history.held_round_record`) is replaced in place by the completed
    round when the resumed run adds it, so no call keeps two results. Likewise the messages
    that stand for a paused turn (marked with its id, their ``paused_turn``) are replaced
    where they are by a batch whose first message carries the same id: the resumed turn.

    Each ``add`` is one atomic read-modify-write in the repository, so concurrent writers to
    one conversation never lose each other's messages.
    """

    def __init__(
        self, max_messages: int = 20, repository: ChatMemoryRepository | None = None
    ) -> None:
        if isinstance(max_messages, bool) or not isinstance(max_messages, int):
            raise TypeError(f"max_messages must be an int, got {max_messages!r}")
        if max_messages <= 0:
            raise ValueError(f"max_messages must be greater than 0, got {max_messages}")
        self._max_messages = max_messages
        self._repository: ChatMemoryRepository = (
            repository if repository is not None else InMemoryChatMemoryRepository()
        )
        # Checked once: a protocol's isinstance looks up each of its methods.
        self._async_repository = (
            self._repository if isinstance(self._repository, AsyncChatMemoryRepository) else None
        )

    @property
    def max_messages(self) -> int:
        return self._max_messages

    @property
    def repository(self) -> ChatMemoryRepository:
        return self._repository

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        validate_conversation_id(conversation_id)
        batch = _as_batch(messages)
        if batch:
            self._repository.update(conversation_id, self._windowed(batch))

    def _windowed(self, batch: list[Message]) -> Callable[[list[Message]], list[Message]]:
        return lambda stored: _window(stored, batch, self._max_messages)

    def get(self, conversation_id: str) -> list[Message]:
        return self._repository.find_by_conversation_id(validate_conversation_id(conversation_id))

    def clear(self, conversation_id: str) -> None:
        self._repository.delete_by_conversation_id(validate_conversation_id(conversation_id))

    async def aadd(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        if self._async_repository is None:
            await asyncio.to_thread(self.add, conversation_id, messages)
            return
        validate_conversation_id(conversation_id)
        batch = _as_batch(messages)
        if batch:
            await self._async_repository.aupdate(conversation_id, self._windowed(batch))

    async def aadd_with(
        self,
        conversation_id: str,
        messages: Message | Sequence[Message],
        also: tuple[str, Sequence[Any]],
    ) -> None:
        """:meth:`aadd` of at least one message, and ``also`` (a write of the repository's
        database, ``%s`` placeholders, and its parameters) in the same transaction: for an
        :class:`~tooluse.memory.AsyncChatMemoryRepository` only."""
        validate_conversation_id(conversation_id)
        batch = _as_batch(messages)
        if self._async_repository is None or not batch:
            raise ValueError("aadd_with writes messages to an AsyncChatMemoryRepository")
        await self._async_repository.aupdate(conversation_id, self._windowed(batch), also=also)

    async def aget(self, conversation_id: str) -> list[Message]:
        if self._async_repository is None:
            return await asyncio.to_thread(self.get, conversation_id)
        return await self._async_repository.afind_by_conversation_id(
            validate_conversation_id(conversation_id)
        )

    async def aclear(self, conversation_id: str) -> None:
        await asyncio.to_thread(self.clear, conversation_id)


def _as_batch(messages: Message | Sequence[Message]) -> list[Message]:
    if isinstance(messages, _MESSAGE_TYPES):
        return [messages]
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise TypeError(f"expected a message or a sequence of messages, got {messages!r}")
    batch = list(messages)
    for index, message in enumerate(batch):
        if not isinstance(message, _MESSAGE_TYPES):
            raise TypeError(f"messages[{index}] is not a message: {message!r}")
    return batch


def _window(stored: list[Message], new: list[Message], max_messages: int) -> list[Message]:
    if any(isinstance(m, SystemMessage) and m not in stored for m in new):
        stored = [m for m in stored if not isinstance(m, SystemMessage)]
    # A resumed run's batch starts with the paused round completed: it takes the place of
    # the round's record (further back if other turns were stored since the pause).
    combined = with_held_rounds_completed(_with_paused_turn_completed(stored, new))
    others = [m for m in combined if not isinstance(m, SystemMessage)]
    starts_with_result = bool(others) and isinstance(others[0], ToolResponseMessage)
    if len(combined) <= max_messages and not starts_with_result:
        return combined
    if len(combined) > max_messages:
        # The total (system messages included) decides how many to evict, as in Spring.
        cut = len(combined) - max_messages
        while cut < len(others) and not isinstance(others[cut], UserMessage):
            cut += 1
        others = others[cut:]
    start = 0
    while start < len(others) and isinstance(others[start], ToolResponseMessage):
        start += 1  # a result whose call an earlier add evicted: it cannot start the window
    return [m for m in combined if isinstance(m, SystemMessage)] + others[start:]


def _with_paused_turn_completed(stored: list[Message], new: list[Message]) -> list[Message]:
    """``stored`` then ``new``, except that a batch whose first message carries a paused
    turn's id is that turn resumed (or paused again): it takes the place of the stored
    messages with that id, also when other turns were stored since the pause."""
    turn = paused_turn_of(new[0]) if new else None
    first = None
    if turn is not None:
        first = next((i for i, m in enumerate(stored) if paused_turn_of(m) == turn), None)
    if first is None:
        return stored + new
    later = [m for m in stored[first:] if paused_turn_of(m) != turn]
    return [*stored[:first], *new, *later]
