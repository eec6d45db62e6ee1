"""Chat memory: what a conversation remembers between requests, and where it is stored.

``MessageWindowChatMemory`` keeps the last N messages per conversation in a repository
(``InMemoryChatMemoryRepository``, ``SqliteChatMemoryRepository``, the embedded default, or
``PostgresChatMemoryRepository`` for several hosts, on its own URL or a ``PostgresDatabase``
pool shared with the other PostgreSQL stores);
``MessageChatMemoryAdvisor`` replays and records it around each request;
``repair_tool_pairs`` makes any history safe to send to a provider.
"""

from tooluse._postgres import PostgresDatabase
from tooluse.history import UNANSWERED_TOOL_CALL_RESULT, repair_tool_pairs
from tooluse.memory._advisor import MessageChatMemoryAdvisor
from tooluse.memory._api import (
    CONVERSATION_ID,
    AsyncChatMemoryRepository,
    ChatMemory,
    ChatMemoryRepository,
)
from tooluse.memory._in_memory import InMemoryChatMemoryRepository
from tooluse.memory._postgres import PostgresChatMemoryRepository
from tooluse.memory._sqlite import SqliteChatMemoryRepository
from tooluse.memory._window import MessageWindowChatMemory

__all__ = [
    "CONVERSATION_ID",
    "UNANSWERED_TOOL_CALL_RESULT",
    "AsyncChatMemoryRepository",
    "ChatMemory",
    "ChatMemoryRepository",
    "InMemoryChatMemoryRepository",
    "MessageChatMemoryAdvisor",
    "MessageWindowChatMemory",
    "PostgresChatMemoryRepository",
    "PostgresDatabase",
    "SqliteChatMemoryRepository",
    "repair_tool_pairs",
]
