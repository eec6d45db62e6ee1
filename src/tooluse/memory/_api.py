"""The chat-memory contracts: what a memory and a repository promise."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from tooluse.messages import Message

__all__ = [
    "CONVERSATION_ID",
    "AsyncChatMemoryRepository",
    "ChatMemory",
    "ChatMemoryRepository",
    "validate_conversation_id",
]

CONVERSATION_ID = "chat_memory_conversation_id"
"""Request-context key holding the conversation id (shared with tool search's session id)."""


def validate_conversation_id(conversation_id: object) -> str:
    """Return ``conversation_id`` if it is a non-blank string that every repository can
    store, else raise a specific error.

    A NUL character (PostgreSQL text cannot hold one) and a lone surrogate (not encodable
    as UTF-8, so SQLite and PostgreSQL cannot bind it) are refused here, for every
    repository alike, rather than failing deep inside one of them.
    """
    if not isinstance(conversation_id, str):
        raise TypeError(
            f"conversation id must be a str, got {type(conversation_id).__name__}: "
            f"{conversation_id!r:.100}"
        )
    if not conversation_id.strip():
        raise ValueError("conversation id must not be blank")
    problem = None
    if "\x00" in conversation_id:
        problem = f"a NUL character at position {conversation_id.index(chr(0))}"
    else:
        try:
            conversation_id.encode()
        except UnicodeEncodeError as error:
            problem = f"a lone surrogate at position {error.start}"
    if problem is not None:
        raise ValueError(
            f"conversation id must be text every repository can store; it holds {problem}: "
            f"{conversation_id!r:.100}"
        )
    return conversation_id


@runtime_checkable
class ChatMemory(Protocol):
    """The messages remembered per conversation (ids are non-blank strings).

    The async forms exist because repositories may do blocking I/O; they never block the loop.
    """

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None: ...

    def get(self, conversation_id: str) -> list[Message]: ...

    def clear(self, conversation_id: str) -> None: ...

    async def aadd(self, conversation_id: str, messages: Message | Sequence[Message]) -> None: ...

    async def aget(self, conversation_id: str) -> list[Message]: ...

    async def aclear(self, conversation_id: str) -> None: ...


@runtime_checkable
class ChatMemoryRepository(Protocol):
    """Stores whole conversations. ``save_all`` replaces what was stored (Spring semantics).

    ``update`` is the read-modify-write of one conversation as a single atomic step (one
    transaction in a database), so concurrent writers, threads or processes, never lose a
    message to each other. ``change`` computes the new messages from the stored ones and
    nothing else: a repository may call it more than once (PostgreSQL's calls it on the
    rows it last read, and again on the rows as they are when another writer changed
    them since).
    """

    def find_conversation_ids(self) -> list[str]: ...

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]: ...

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None: ...

    def delete_by_conversation_id(self, conversation_id: str) -> None: ...

    def update(
        self, conversation_id: str, change: Callable[[list[Message]], list[Message]]
    ) -> list[Message]: ...


@runtime_checkable
class AsyncChatMemoryRepository(ChatMemoryRepository, Protocol):
    """A repository that also reads and updates on the running event loop (its own async
    I/O, no thread): :class:`~tooluse.memory.MessageWindowChatMemory`'s ``aget`` and
    ``aadd`` call these rather than the blocking forms in a thread. A database's
    repository may write a statement of another store with an update (``also``)."""

    async def afind_by_conversation_id(self, conversation_id: str) -> list[Message]: ...

    async def aupdate(
        self,
        conversation_id: str,
        change: Callable[[list[Message]], list[Message]],
        *,
        also: tuple[str, Sequence[Any]] | None = None,
    ) -> list[Message]:
        """``update``, and ``also`` (a write of the repository's database and its
        parameters) in its transaction."""
        ...
