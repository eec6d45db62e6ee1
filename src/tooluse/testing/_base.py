"""What the test doubles share: recorded requests and responses, and streaming by cutting a
whole response into chunks."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from typing import Any

from tooluse.messages import ChatResponse, Prompt
from tooluse.models._base import BaseChatModel
from tooluse.testing._chunking import stream_chunks

__all__ = ["RecordingModel", "RespondingModel"]


class RecordingModel(BaseChatModel):
    """Keeps every request's ``Prompt`` in :attr:`requests` and every response served in
    :attr:`responses` (or, ``keep=n``, the last ``n`` of each: a double serving thousands of
    requests, e.g. in a benchmark, then holds no growing history); streams cut responses into
    ``chunk_size``-character pieces. :attr:`request_count` counts every request."""

    def __init__(self, *, chunk_size: int, keep: int | None = None) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1 character, got {chunk_size!r}")
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
            raise ValueError(f"keep must be a number of requests (0 or more) or None, got {keep!r}")
        self.chunk_size = chunk_size
        self.keep = keep
        self.request_count = 0
        self.requests: list[Prompt] = []
        self.responses: list[ChatResponse] = []

    def _record_request(self, prompt: Prompt) -> int:
        """Record ``prompt``; its number (0 for the first request), counted past the kept."""
        number = self.request_count
        self.request_count += 1
        _append(self.requests, prompt, self.keep)
        return number

    def _record_response(self, response: ChatResponse) -> None:
        _append(self.responses, response, self.keep)


def _append(items: list[Any], item: Any, keep: int | None) -> None:
    if keep == 0:
        return
    items.append(item)
    if keep is not None and len(items) > keep:
        del items[0]  # one at a time: the list never holds more than keep + 1


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
