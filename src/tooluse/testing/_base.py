"""What the test doubles share: recorded requests and responses, and streaming by cutting a
whole response into chunks."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator

from tooluse.messages import ChatResponse, Prompt
from tooluse.models._base import BaseChatModel
from tooluse.testing._chunking import stream_chunks

__all__ = ["RecordingModel", "RespondingModel"]


class RecordingModel(BaseChatModel):
    """Keeps every request's ``Prompt`` in :attr:`requests` and every response served in
    :attr:`responses`; streams cut responses into ``chunk_size``-character pieces."""

    def __init__(self, *, chunk_size: int) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1 character, got {chunk_size!r}")
        self.chunk_size = chunk_size
        self.requests: list[Prompt] = []
        self.responses: list[ChatResponse] = []


class RespondingModel(RecordingModel):
    """A test double whose answer to a request is computed synchronously by
    :meth:`_respond`: ``acall`` and ``stream`` (and so ``call``) serve that answer."""

    @abc.abstractmethod
    def _respond(self, prompt: Prompt) -> ChatResponse:
        """Record the request and give the response."""

    async def acall(self, prompt: Prompt) -> ChatResponse:
        return self._respond(prompt)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        for chunk in stream_chunks(self._respond(prompt), self.chunk_size):
            yield chunk
