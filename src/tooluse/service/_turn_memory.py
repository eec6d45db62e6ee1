"""``TurnMemory``: a conversation's memory read once per turn of the service, not once per
stage, and its writes stored with the turn's other records: on the event loop when the
memory's repository does its own async I/O (PostgreSQL), else in one hop to a thread."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from tooluse.memory import AsyncChatMemoryRepository, ChatMemory, MessageWindowChatMemory
from tooluse.messages import Message

__all__ = ["HeldRecord", "TurnMemory"]


class HeldRecord(Protocol):
    """A turn's record stored after its memory's writes (:meth:`TurnMemory.store_held`):
    ``store`` in the thread that wrote them, ``astore`` on the loop after writes made
    there; or, when ``write`` gives one, as that statement of the memory's database and
    its parameters, made in the transaction of the memory's last write."""

    def store(self) -> None: ...

    async def astore(self) -> None: ...

    def write(self) -> tuple[str, Sequence[Any]] | None: ...


class _Held:
    """A running turn's view of its conversation: the messages last read (``None``: read
    them), a count of the writes, so that a read that a write overtook is not kept, and,
    for a turn that holds its writes, those not stored yet."""

    __slots__ = ("holds_writes", "messages", "unstored", "writes")

    def __init__(self, holds_writes: bool) -> None:
        self.messages: tuple[Message, ...] | None = None
        self.writes = 0
        self.holds_writes = holds_writes
        self.unstored: list[Message | Sequence[Message]] = []


def _empty(messages: Message | Sequence[Message]) -> bool:
    return isinstance(messages, Sequence) and not messages


class TurnMemory:
    """``memory``, whose messages a running turn reads from the store once: the router's
    stage and the answer's each read the conversation, and the question's request may have
    read it already (:meth:`remember_read`), each read a hop to a thread and a query.

    Within :meth:`turn` (held while the conversation's turn holds its lock,
    :class:`~tooluse.service._turns.ConversationTurns`, so no other turn of it writes
    meanwhile) the messages read are kept and given to later reads; every write goes to the
    store and drops them (the next read reads again). Outside a turn every call goes to the
    store. Callers get a list of their own.

    A turn that holds its writes (``turn(..., holds_writes=True)``) keeps them until
    :meth:`store_held`, which stores them and the turn's other records in one hop (the
    service calls it before it tells the client that the turn is answered), or until the
    turn ends, whichever comes first; a held write that fails raises from there, to the
    turn. Only the turn stores them: a read or a clear meanwhile (the page's, or the
    turn's own) reads or clears the store as it is, without them (the turn's stages read
    the conversation before they write it)."""

    __slots__ = ("_async_window", "_held", "_memory")

    def __init__(self, memory: ChatMemory) -> None:
        self._memory = memory
        self._held: dict[str, _Held] = {}
        # The window memory whose writes go on the event loop (None: in a thread): a thread
        # that waited for the GIL of a busy loop after each of its socket's reads made a
        # round trip tens of milliseconds.
        self._async_window = (
            memory
            if isinstance(memory, MessageWindowChatMemory)
            and isinstance(memory.repository, AsyncChatMemoryRepository)
            else None
        )

    @property
    def memory(self) -> ChatMemory:
        """The memory read and written."""
        return self._memory

    @contextlib.asynccontextmanager
    async def turn(
        self, conversation_id: str | None, *, holds_writes: bool = False
    ) -> AsyncIterator[None]:
        """Reads of ``conversation_id`` in this block (one turn of it) read the store once;
        with ``holds_writes``, its writes wait for :meth:`store_held` or the block's end.
        ``None`` (a run given its history) holds nothing."""
        if conversation_id is None:
            yield
            return
        held = _Held(holds_writes)
        self._held[conversation_id] = held
        try:
            yield
        finally:
            try:
                if held.unstored:  # e.g. the client left between the write and the answer
                    await self.store_held(conversation_id)
            finally:
                del self._held[conversation_id]

    async def store_held(self, conversation_id: str, then: HeldRecord | None = None) -> None:
        """Store the writes the turn of ``conversation_id`` holds, in the order they were
        made, then ``then`` (the turn's other records): on the loop (``then`` in the last
        write's transaction when it gives a statement), or in one hop to a thread. ``then``
        is not stored when a write fails. A write begun goes on if the turn is cancelled
        (its client left), as a thread's would."""
        held = self._held.get(conversation_id)
        unstored = self._take_unstored(held)
        if not unstored:
            if then is not None and self._async_window is not None:
                await then.astore()
            elif then is not None:
                await asyncio.to_thread(then.store)
            return

        def store() -> None:
            for messages in unstored:
                self._memory.add(conversation_id, messages)
            if then is not None:
                then.store()

        async def astore(memory: MessageWindowChatMemory) -> None:
            *first, last = unstored
            for messages in first:
                await memory.aadd(conversation_id, messages)
            write = None if then is None or _empty(last) else then.write()
            if write is not None:  # the record in the last write's transaction
                await memory.aadd_with(conversation_id, last, write)
                return
            await memory.aadd(conversation_id, last)
            if then is not None:
                await then.astore()

        self._written(conversation_id)
        try:
            if self._async_window is not None:
                await asyncio.shield(astore(self._async_window))
            else:
                await asyncio.to_thread(store)
        finally:  # a read that started while it wrote may hold the messages before it
            self._written(conversation_id)

    def remember_read(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """``messages``, read from ``memory`` in this turn (on the loop, once the read
        returned), as what the turn's next reads get."""
        held = self._held.get(conversation_id)
        if held is not None:
            held.messages = tuple(messages)

    @staticmethod
    def _take_unstored(held: _Held | None) -> list[Message | Sequence[Message]]:
        if held is None or not held.unstored:
            return []
        unstored, held.unstored = held.unstored, []
        return unstored

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
        held = self._held.get(conversation_id)
        if held is not None and held.holds_writes:
            held.messages = None
            held.unstored.append(messages)
            return
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
