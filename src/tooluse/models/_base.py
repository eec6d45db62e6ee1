"""The model protocol that providers and test doubles implement, and their base class."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from tooluse._sync import run_sync
from tooluse.messages import ChatResponse, Prompt


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: ``acall`` answers a prompt, ``stream`` yields the answer in chunks. The
    protocol is async only; :class:`BaseChatModel` adds a blocking ``call`` for scripts and
    tests, and ``ChatClient.call()`` is the blocking form of a whole tool loop.

    ``stream`` yields ``ChatResponse`` chunks. A chunk's ``AssistantMessage.tool_calls`` are
    *fragments*: fragments with the same ``id`` belong to one call (name and arguments are
    concatenated in order) and a fragment with an empty ``id`` continues the call before it.
    Providers that number calls by index translate the index to the call's id. A whole call
    is a single fragment: ``OpenAIChatModel``, ``OpenAIResponsesChatModel`` and
    ``AnthropicChatModel`` send each call whole once it is complete, so names can be mapped
    back from provider aliases. See
    :func:`tooluse.streaming.merge_chunks`.
    """

    async def acall(self, prompt: Prompt) -> ChatResponse: ...

    def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]: ...


class BaseChatModel(abc.ABC):
    """A :class:`ChatModel` from its ``acall`` and ``stream``, with ``call``, the blocking
    form of ``acall``. The providers and the test doubles subclass it."""

    __slots__ = ()

    @abc.abstractmethod
    async def acall(self, prompt: Prompt) -> ChatResponse: ...

    @abc.abstractmethod
    def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]: ...

    def call(self, prompt: Prompt) -> ChatResponse:
        """``acall`` run to its end on this thread's event loop (see ``tooluse._sync``); inside
        a running event loop it raises ``RuntimeError``: await ``acall`` there."""
        return run_sync(
            self.acall(prompt),
            sync_name=f"{type(self).__name__}.call()",
            async_name="model.acall(prompt)",
        )
