"""The model protocol that providers and test doubles implement."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from tooluse.messages import ChatResponse, Prompt


@runtime_checkable
class ChatModel(Protocol):
    """A chat model. ``acall`` is the primary form; ``call`` exists for scripts and tests.

    ``stream`` yields ``ChatResponse`` chunks. A chunk's ``AssistantMessage.tool_calls`` are
    *fragments*: fragments with the same ``id`` belong to one call (name and arguments are
    concatenated in order) and a fragment with an empty ``id`` continues the call before it.
    Providers that number calls by index translate the index to the call's id. A whole call
    is a single fragment: ``OpenAIChatModel``, ``OpenAIResponsesChatModel`` and
    ``AnthropicChatModel`` send each call whole once it is complete, so names can be mapped
    back from provider aliases. See
    :func:`tooluse.streaming.merge_chunks`.
    """

    def call(self, prompt: Prompt) -> ChatResponse: ...

    async def acall(self, prompt: Prompt) -> ChatResponse: ...

    def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]: ...
