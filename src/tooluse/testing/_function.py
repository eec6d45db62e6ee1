"""``FunctionModel``: a chat model whose responses a function decides."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable

from tooluse.messages import ChatResponse, Prompt
from tooluse.testing._base import RecordingModel
from tooluse.testing._chunking import stream_chunks
from tooluse.testing._responses import ResponseLike, as_chat_response

__all__ = ["FunctionModel"]

ResponseFunction = Callable[[Prompt], ResponseLike | Awaitable[ResponseLike]]
StreamFunction = Callable[[Prompt], AsyncIterable[ResponseLike] | Iterable[ResponseLike]]


class FunctionModel(RecordingModel):
    """Answers each request with ``fn(prompt)``, a plain or ``async`` function returning a
    ``ChatResponse`` or a short form (see :class:`ScriptedModel`).

    Streaming uses ``stream_fn(prompt)`` when given (an iterable or async iterable of chunks,
    emitted as they are) and otherwise cuts ``fn``'s response into ``chunk_size`` pieces.
    Requests are recorded in :attr:`requests`; :attr:`responses` holds ``fn``'s responses
    and the chunks ``stream_fn`` yielded; ``keep=n`` keeps only the last ``n`` of each
    (``keep=0``: none), for a model that serves many requests (a benchmark, a long run).
    """

    model_name = "function"

    def __init__(
        self,
        fn: ResponseFunction,
        *,
        stream_fn: StreamFunction | None = None,
        chunk_size: int = 8,
        keep: int | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"FunctionModel needs a callable, got {type(fn).__name__}")
        if stream_fn is not None and not callable(stream_fn):
            raise TypeError(f"stream_fn must be callable, got {type(stream_fn).__name__}")
        super().__init__(chunk_size=chunk_size, keep=keep)
        self.fn = fn
        self.stream_fn = stream_fn

    def _record(self, item: ResponseLike, index: int, *, chunk: bool = False) -> ChatResponse:
        # A chunk is passed on as given: its empty call ids are the fragment rule's
        # "continues the previous call", not ids to fill in.
        response = (
            item
            if chunk and isinstance(item, ChatResponse)
            else as_chat_response(item, request_index=index)
        )
        self._record_response(response)
        return response

    async def acall(self, prompt: Prompt) -> ChatResponse:
        index = self._record_request(prompt)
        result = self.fn(prompt)
        if inspect.isawaitable(result):
            result = await result
        return self._record(result, index)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        if self.stream_fn is None:
            for chunk in stream_chunks(await self.acall(prompt), self.chunk_size):
                yield chunk
            return
        index = self._record_request(prompt)
        chunks = self.stream_fn(prompt)
        if isinstance(chunks, AsyncIterable):
            async for item in chunks:
                yield self._record(item, index, chunk=True)
        else:
            for item in chunks:
                yield self._record(item, index, chunk=True)
