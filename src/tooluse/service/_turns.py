"""``ConversationTurns``: the turns of one conversation run one after another."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator

__all__ = ["ConversationTurns"]


class ConversationTurns:
    """One turn at a time per conversation; the turns of other conversations are not held up.

    A turn reads its conversation's memory when it starts and writes it when it ends. A turn
    that started while another turn of the same conversation ran would read the memory as
    it was before that turn: a message sent while an approved call runs would read the
    paused turn's account, that the call did not run. So a turn waits for the conversation's
    running turn (a new question, or a resumed run) to end, in the order they came.

    The locks live in this process, on the event loop that serves the app; a conversation's
    lock is dropped once no turn holds it or waits for it.
    """

    __slots__ = ("_locks", "_users")

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: Counter[str] = Counter()  # the turns holding or waiting for each lock

    @contextlib.asynccontextmanager
    async def turn(self, conversation_id: str | None) -> AsyncIterator[None]:
        """Held while a turn of ``conversation_id`` runs; waits for the one running. A run
        without a conversation (``None``: its history came with it) waits for nothing."""
        if conversation_id is None:
            yield
            return
        lock = self._locks.setdefault(conversation_id, asyncio.Lock())
        self._users[conversation_id] += 1
        try:
            async with lock:
                yield
        finally:
            self._users[conversation_id] -= 1
            if not self._users[conversation_id]:
                del self._users[conversation_id], self._locks[conversation_id]

    def __len__(self) -> int:
        """How many conversations have a turn running or waiting."""
        return len(self._locks)
