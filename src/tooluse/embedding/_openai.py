"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, Ollama, ...)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tooluse._fork import PerProcess
from tooluse.embedding._protocol import Vectors

if TYPE_CHECKING:
    import openai

__all__ = ["OpenAIEmbeddingModel"]


class OpenAIEmbeddingModel:
    """An embedding model behind an OpenAI-compatible endpoint, via the official ``openai`` SDK.

    ``dimensions`` is the vector size the endpoint returns (checked on every response);
    ``send_dimensions=True`` also asks the endpoint to shorten vectors to that size (OpenAI's
    ``text-embedding-3-*`` support it, most others reject it). ``query_prefix`` and
    ``document_prefix`` serve asymmetric models (``"query: "`` / ``"passage: "`` for E5).
    Vectors are L2-normalised here, because not every server normalises them. Retries and
    timeouts are the SDK's (``max_retries``, ``timeout``).
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
        timeout: float = 60.0,
        max_retries: int = 3,
        client: openai.OpenAI | None = None,
        async_client: openai.AsyncOpenAI | None = None,
    ) -> None:
        if not model.strip():
            raise ValueError("model must name the embedding model, got a blank string")
        if dimensions < 1:
            raise ValueError(f"dimensions must be at least 1, got {dimensions}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self._model = model
        self._dimensions = dimensions
        self._send_dimensions = send_dimensions
        self._query_prefix = query_prefix
        self._document_prefix = document_prefix
        self._batch_size = batch_size
        self._client_settings: dict[str, Any] = {
            "base_url": base_url or os.environ.get("OPENAI_BASE_URL"),
            "api_key": api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
            "timeout": timeout,
            "max_retries": max_retries,
        }
        self._given_client = client
        self._given_async_client = async_client
        # The clients made here are per process: a forked child must not share its parent's
        # HTTP connections.
        self._clients = PerProcess(self._new_client)
        self._async_clients = PerProcess(self._new_async_client)

    @property
    def model_id(self) -> str:
        """Identifies endpoint, model and shape, for caches keyed by model."""
        if self._given_client is not None:
            base_url = str(self._given_client.base_url)
        else:
            base_url = self._client_settings["base_url"] or "https://api.openai.com/v1"
        return (
            f"openai/{base_url}/{self._model}/{self._dimensions}"
            f"/{self._query_prefix!r}/{self._document_prefix!r}"
        )

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def _sync_client(self) -> openai.OpenAI:
        return self._given_client if self._given_client is not None else self._clients.get()

    def _aclient(self) -> openai.AsyncOpenAI:
        if self._given_async_client is not None:
            return self._given_async_client
        return self._async_clients.get()

    def _new_client(self) -> openai.OpenAI:
        import openai

        return openai.OpenAI(**self._client_settings)

    def _new_async_client(self) -> openai.AsyncOpenAI:
        import openai

        return openai.AsyncOpenAI(**self._client_settings)

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

    def _batches(self, texts: Sequence[str], prefix: str) -> list[list[str]]:
        if isinstance(texts, str):
            raise TypeError("embed_documents takes a sequence of texts, not one string")
        prefixed = [prefix + text for text in texts]
        return [
            prefixed[start : start + self._batch_size]
            for start in range(0, len(prefixed), self._batch_size)
        ]

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        parts = [
            self._vectors(self._sync_client().embeddings.create(**self._request(batch)), len(batch))
            for batch in self._batches(texts, self._document_prefix)
        ]
        return np.concatenate(parts) if parts else np.empty((0, self._dimensions), np.float32)

    def embed_query(self, text: str) -> Vectors:
        response = self._sync_client().embeddings.create(
            **self._request([self._query_prefix + text])
        )
        vector: Vectors = self._vectors(response, 1)[0]
        return vector

    async def aembed_documents(self, texts: Sequence[str]) -> Vectors:
        parts = []
        for batch in self._batches(texts, self._document_prefix):
            response = await self._aclient().embeddings.create(**self._request(batch))
            parts.append(self._vectors(response, len(batch)))
        return np.concatenate(parts) if parts else np.empty((0, self._dimensions), np.float32)

    async def aembed_query(self, text: str) -> Vectors:
        response = await self._aclient().embeddings.create(
            **self._request([self._query_prefix + text])
        )
        vector: Vectors = self._vectors(response, 1)[0]
        return vector
