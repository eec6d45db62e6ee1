"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, Ollama, ...)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tooluse._fork import PerProcess
from tooluse._loop_clients import AsyncClients, ClientKind, check_client
from tooluse.embedding._protocol import Vectors
from tooluse.models._errors import from_sdk_error, sdk_failures

if TYPE_CHECKING:
    import openai

__all__ = ["OpenAIEmbeddingModel"]

_OWNER = "OpenAIEmbeddingModel"
_SYNC_METHODS = "embed_documents(), embed_query() and embed_queries()"
_ASYNC_METHODS = "aembed_documents() and aembed_query()"

# OpenAI's limits on one request: inputs, and tokens summed over them.
_MAX_INPUTS = 2048
_MAX_REQUEST_TOKENS = 300_000


def _most_tokens(text: str) -> int:
    """An upper bound of the tokens in ``text``: its UTF-8 bytes. OpenAI's tokenizers are
    byte-level BPE, every token at least one byte (characters would undercount: one CJK
    character or emoji can be 2-3 tokens). English reads about 4 bytes a token, so long
    texts go in more requests than needed, never too many tokens in one. (tiktoken would
    count exactly, but downloads its encodings at run time.)"""
    return len(text.encode("utf-8", "surrogatepass"))


@contextlib.contextmanager
def _provider_errors() -> Iterator[None]:
    """The SDK's errors, after its retries, as :class:`~tooluse.models.ProviderError`."""
    import openai

    try:
        yield
    except sdk_failures(openai.OpenAIError) as exc:
        raise from_sdk_error("openai", exc, openai) from exc


class OpenAIEmbeddingModel:
    """An embedding model behind an OpenAI-compatible endpoint, via the official ``openai`` SDK.

    ``dimensions`` is the vector size the endpoint returns (checked on every response);
    ``send_dimensions=True`` also asks the endpoint to shorten vectors to that size (OpenAI's
    ``text-embedding-3-*`` support it, most others reject it). ``query_prefix`` and
    ``document_prefix`` serve asymmetric models (``"query: "`` / ``"passage: "`` for E5).
    Vectors are L2-normalised here, because not every server normalises them. Retries and
    timeouts are the SDK's (``max_retries``, ``timeout``); what fails after them is a
    :class:`~tooluse.models.ProviderError`.

    Documents go in requests of at most ``batch_size`` texts (OpenAI takes up to 2,048) and
    ``max_batch_tokens`` tokens, estimated from above as UTF-8 bytes (OpenAI takes up to
    300,000; ``None``: no cap, for servers without one); a text over the cap goes alone, and
    the endpoint's own limit applies. An empty text (after its prefix) is refused before any
    request: endpoints answer an empty input with an error.

    ``client`` (an ``openai.AsyncOpenAI``, for the ``aembed_*`` methods) / ``sync_client`` (an
    ``openai.OpenAI``, for the blocking ``embed_*`` methods) inject preconfigured SDK clients.
    An injected async client is used as it is on every event loop, and its connections belong
    to the loop that opened them: use it from one loop only. The async clients the model
    builds itself are one per event loop. ``close()`` / ``await aclose()`` close the clients
    the model built.
    """

    def __init__(
        self,
        model: str,
        *,
        dimensions: int,
        base_url: str | None = None,
        api_key: str | None = None,
        send_dimensions: bool = False,
        query_prefix: str = "",
        document_prefix: str = "",
        batch_size: int = 256,
        max_batch_tokens: int | None = _MAX_REQUEST_TOKENS,
        timeout: float = 60.0,
        max_retries: int = 3,
        client: openai.AsyncOpenAI | None = None,
        sync_client: openai.OpenAI | None = None,
    ) -> None:
        if not model.strip():
            raise ValueError("model must name the embedding model, got a blank string")
        if dimensions < 1:
            raise ValueError(f"dimensions must be at least 1, got {dimensions}")
        if not 1 <= batch_size <= _MAX_INPUTS:
            raise ValueError(
                f"batch_size must be between 1 and {_MAX_INPUTS} (the most inputs OpenAI's "
                f"embeddings API takes in one request), got {batch_size}"
            )
        if max_batch_tokens is not None and max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be at least 1 or None, got {max_batch_tokens}")
        self._model = model
        self._dimensions = dimensions
        self._send_dimensions = send_dimensions
        self._query_prefix = query_prefix
        self._document_prefix = document_prefix
        self._batch_size = batch_size
        self._max_batch_tokens = max_batch_tokens
        self._base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        settings: dict[str, Any] = {
            "base_url": self._base_url,
            "api_key": api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
            "timeout": timeout,
            "max_retries": max_retries,
        }
        import openai

        check_client(
            _OWNER,
            "sync_client",
            sync_client,
            openai.OpenAI,
            "openai.OpenAI",
            other=openai.AsyncOpenAI,
            other_hint="pass it as client= instead",
        )
        self._clients: AsyncClients[openai.AsyncOpenAI] = AsyncClients(
            ClientKind(_OWNER, openai.AsyncOpenAI, openai.AsyncOpenAI, "openai.AsyncOpenAI"),
            settings,
            client,
            blocking_type=openai.OpenAI,
            blocking_hint="pass it as sync_client= instead",
        )
        # The embed methods are blocking (the EmbeddingModel protocol is), so this model keeps
        # a blocking client too: the injected one, else one per process made on first use.
        self._given_sync = sync_client
        self._new_sync_client = functools.partial(openai.OpenAI, **settings)
        self._sync_clients: PerProcess[openai.OpenAI] = PerProcess(self._new_sync_client)
        given = client or sync_client
        self._given_base_url = str(given.base_url) if given is not None else None

    @property
    def model_id(self) -> str:
        """Identifies endpoint, model and shape, for caches keyed by model."""
        base_url = self._given_base_url or self._base_url or "https://api.openai.com/v1"
        return (
            f"openai/{base_url}/{self._model}/{self._dimensions}"
            f"/{self._query_prefix!r}/{self._document_prefix!r}"
        )

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def _sync_client(self) -> openai.OpenAI:
        """The injected blocking client, else this process's own. Given only an async
        client, the other kind is refused rather than made from settings, which could reach
        another endpoint (Azure, a proxy) than the injected client."""
        if self._given_sync is not None:
            return self._given_sync
        if self._clients.given is not None:
            raise RuntimeError(
                f"{_OWNER} was given an async client only; pass sync_client=openai.OpenAI(...) "
                f"as well to use {_SYNC_METHODS}, or use {_ASYNC_METHODS}"
            )
        return self._sync_clients.get()

    def _aclient(self) -> openai.AsyncOpenAI:
        """The injected async client, else the running event loop's own (refused when only
        a blocking client was given, as in :meth:`_sync_client`)."""
        if self._clients.given is None and self._given_sync is not None:
            raise RuntimeError(
                f"{_OWNER} was given a blocking client only; pass client=openai.AsyncOpenAI(...) "
                f"as well to use {_ASYNC_METHODS}, or use {_SYNC_METHODS}"
            )
        return self._clients.get()

    # -- lifecycle --------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the clients this model built (injected ones are their owner's): the
        blocking one and the running loop's async one now, the async ones of other loops on
        their loops; see :meth:`tooluse.models.OpenAIChatModel.aclose`. The model stays
        usable."""
        await self._clients.aclose()
        sync_client = self._take_sync_client()
        if sync_client is not None:
            await asyncio.to_thread(sync_client.close)

    def close(self) -> None:
        """:meth:`aclose` from synchronous code."""
        sync_client = self._take_sync_client()
        if sync_client is not None:
            sync_client.close()
        self._clients.close()

    def _take_sync_client(self) -> openai.OpenAI | None:
        sync_client = self._sync_clients.made()
        if sync_client is not None:
            self._sync_clients = PerProcess(self._new_sync_client)
        return sync_client

    def _request(self, texts: list[str]) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self._model, "input": texts}
        if self._send_dimensions:
            request["dimensions"] = self._dimensions
        return request

    def _vectors(self, response: Any, expected: int) -> Vectors:
        rows = sorted(response.data, key=lambda item: item.index)
        if len(rows) != expected:
            raise ValueError(
                f"embedding endpoint returned {len(rows)} vectors for {expected} texts"
            )
        matrix = np.asarray([row.embedding for row in rows], dtype=np.float32)
        if matrix.shape[1] != self._dimensions:
            raise ValueError(
                f"embedding endpoint returned vectors of size {matrix.shape[1]}, "
                f"expected dimensions={self._dimensions}"
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        if not np.all(norms > 0):
            raise ValueError("embedding endpoint returned an all-zero vector")
        normalised: Vectors = matrix / norms
        return normalised

    def _batches(self, texts: Sequence[str], *, queries: bool = False) -> list[list[str]]:
        """The texts as sent (prefixed as documents, or as ``queries``), in requests within
        ``batch_size`` and ``max_batch_tokens``; checked whole before any request."""
        if isinstance(texts, str):
            method = "embed_queries" if queries else "embed_documents"
            raise TypeError(f"{method} takes a sequence of texts, not one string")
        prefix = self._query_prefix if queries else self._document_prefix
        inputs = [prefix + text for text in texts]
        if "" in inputs:
            raise ValueError(
                f"texts[{inputs.index('')}] is empty; embedding endpoints refuse an empty input"
            )
        cap = self._max_batch_tokens if self._max_batch_tokens is not None else math.inf
        batches: list[list[str]] = []
        tokens = 0
        for text in inputs:
            size = _most_tokens(text)
            if not batches or len(batches[-1]) == self._batch_size or tokens + size > cap:
                batches.append([])
                tokens = 0
            batches[-1].append(text)
            tokens += size
        return batches

    def _query(self, text: str) -> list[str]:
        if not isinstance(text, str):
            raise TypeError(f"embed_query takes one text, got {type(text).__name__}")
        if not self._query_prefix + text:
            raise ValueError(
                "embed_query got an empty text; embedding endpoints refuse an empty input"
            )
        return [self._query_prefix + text]

    def _embed(self, batch: list[str]) -> Vectors:
        with _provider_errors():
            response = self._sync_client().embeddings.create(**self._request(batch))
        return self._vectors(response, len(batch))

    async def _aembed(self, batch: list[str]) -> Vectors:
        with _provider_errors():
            response = await self._aclient().embeddings.create(**self._request(batch))
        return self._vectors(response, len(batch))

    def _stacked(self, parts: list[Vectors]) -> Vectors:
        return np.concatenate(parts) if parts else np.empty((0, self._dimensions), np.float32)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._stacked([self._embed(batch) for batch in self._batches(texts)])

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self._embed(self._query(text))[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Several queries in as few requests as ``batch_size`` allows."""
        return self._stacked([self._embed(b) for b in self._batches(texts, queries=True)])

    async def aembed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._stacked([await self._aembed(batch) for batch in self._batches(texts)])

    async def aembed_query(self, text: str) -> Vectors:
        vector: Vectors = (await self._aembed(self._query(text)))[0]
        return vector
