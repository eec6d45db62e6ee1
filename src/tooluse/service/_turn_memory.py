"""``TurnMemory``: a conversation's memory read once per turn of the service, not once per
stage."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from tooluse.memory import ChatMemory
from tooluse.messages import Message

__all__ = ["TurnMemory"]


class _Held:
    """A running turn's view of its conversation: the messages last read (``None``: read
    them), and a count of the writes, so that a read that a write overtook is not kept."""

    __slots__ = ("messages", "writes")

    def __init__(self) -> None:
        self.messages: tuple[Message, ...] | None = None
        self.writes = 0


class TurnMemory:
    """``memory``, whose messages a running turn reads from the store once: the router's
    stage and the answer's each read the conversation, and the question's request may have
    read it already (:meth:`remember_read`), each read a hop to a thread and a query.

    Within :meth:`turn` (held while the conversation's turn holds its lock,
    :class:`~tooluse.service._turns.ConversationTurns`, so no other turn of it writes
    meanwhile) the messages read are kept and given to later reads; every write goes to the
    store and drops them (the next read reads again). Outside a turn every call goes to the
    store. Callers get a list of their own."""

    __slots__ = ("_held", "_memory")

    def __init__(self, memory: ChatMemory) -> None:
        self._memory = memory
        self._held: dict[str, _Held] = {}

    @property
    def memory(self) -> ChatMemory:
        """The memory read and written."""
        return self._memory

    @contextlib.contextmanager
    def turn(self, conversation_id: str | None) -> Iterator[None]:
        """Reads of ``conversation_id`` in this block (one turn of it) read the store once.
        ``None`` (a run given its history) holds nothing."""
        if conversation_id is None:
            yield
            return
        self._held[conversation_id] = _Held()
        try:
            yield
        finally:
            del self._held[conversation_id]

    def remember_read(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """``messages``, read from ``memory`` in this turn (on the loop, once the read
        returned), as what the turn's next reads get."""
        held = self._held.get(conversation_id)
        if held is not None:
            held.messages = tuple(messages)

    def _written(self, conversation_id: str) -> None:
        held = self._held.get(conversation_id)
        if held is not None:
            held.messages = None
            held.writes += 1

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        self._written(conversation_id)
        self._memory.add(conversation_id, messages)

    def get(self, conversation_id: str) -> list[Message]:
        return self._memory.get(conversation_id)

    def clear(self, conversation_id: str) -> None:
        self._written(conversation_id)
        self._memory.clear(conversation_id)

    async def aadd(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        self._written(conversation_id)
        try:
            await self._memory.aadd(conversation_id, messages)
        finally:  # a read that started while it wrote may hold the messages before it
            self._written(conversation_id)

    async def aget(self, conversation_id: str) -> list[Message]:
        held = self._held.get(conversation_id)
        if held is not None and held.messages is not None:
            return list(held.messages)
        writes = None if held is None else held.writes
        messages = await self._memory.aget(conversation_id)
        if held is not None and held.writes == writes and self._held.get(conversation_id) is held:
            held.messages = tuple(messages)
        return messages

    async def aclear(self, conversation_id: str) -> None:
        self._written(conversation_id)
        try:
            await self._memory.aclear(conversation_id)
        finally:
            self._written(conversation_id)
