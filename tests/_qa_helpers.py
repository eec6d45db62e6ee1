"""Fakes shared by the QA pipeline and service tests."""

from __future__ import annotations

from collections.abc import Sequence

from tooluse.memory import MessageWindowChatMemory
from tooluse.messages import Message
from tooluse.rag import Document, Query


class CountingRetriever:
    """Returns fixed documents and counts how often it was asked."""

    def __init__(self, documents: Sequence[Document] = ()) -> None:
        self.documents = list(documents)
        self.queries: list[Query] = []

    def retrieve(self, query: str | Query) -> list[Document]:
        self.queries.append(query if isinstance(query, Query) else Query(query))
        return list(self.documents)

    async def aretrieve(self, query: str | Query) -> list[Document]:
        return self.retrieve(query)


class CountingMemory(MessageWindowChatMemory):
    """A window memory that records every write (``aadd`` goes through ``add``)."""

    def __init__(self, max_messages: int = 20) -> None:
        super().__init__(max_messages=max_messages)
        self.writes: list[list[Message]] = []

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        batch = [messages] if not isinstance(messages, Sequence) else list(messages)
        self.writes.append(batch)
        super().add(conversation_id, messages)
