"""Retrievers: ``DocumentRetriever``, ``VectorStoreRetriever`` and the reranking hook."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from tooluse.rag._document import Document, Query
from tooluse.rag._filter import Filter, compile_filter
from tooluse.rag._index import validate_limits
from tooluse.rag._store import VectorStore

__all__ = [
    "FILTER_EXPRESSION",
    "DocumentReranker",
    "DocumentRetriever",
    "RerankingRetriever",
    "VectorStoreRetriever",
    "as_query",
]

FILTER_EXPRESSION = "vector_store_filter_expression"
"""Request-context key of a per-request metadata filter (replaces the retriever's own)."""


def as_query(query: str | Query) -> Query:
    if isinstance(query, Query):
        return query
    if isinstance(query, str):
        return Query(query)
    raise TypeError(f"retrieve takes a str or a Query, got {type(query).__name__}")


@runtime_checkable
class DocumentRetriever(Protocol):
    """Finds the documents relevant to a query. Retrievers compose: a gate or a reranker
    wraps another retriever."""

    def retrieve(self, query: str | Query) -> list[Document]: ...

    async def aretrieve(self, query: str | Query) -> list[Document]: ...


class VectorStoreRetriever:
    """Retrieves from a :class:`VectorStore` by similarity.

    ``filter`` applies to every query unless the request context carries its own under
    :data:`FILTER_EXPRESSION` (e.g. the user's tenant or language).
    """

    def __init__(
        self,
        store: VectorStore,
        *,
        top_k: int = 4,
        threshold: float = 0.0,
        filter: Filter | None = None,
    ) -> None:
        validate_limits(top_k, threshold)
        compile_filter(filter)  # reject a malformed filter now, not at the first question
        self._store = store
        self._top_k = top_k
        self._threshold = threshold
        self._filter = filter

    @property
    def store(self) -> VectorStore:
        return self._store

    def _filter_for(self, query: Query) -> Filter | None:
        override = query.context.get(FILTER_EXPRESSION)
        return override if override is not None else self._filter

    def retrieve(self, query: str | Query) -> list[Document]:
        query = as_query(query)
        return self._store.similarity_search(
            query.text, self._top_k, self._threshold, self._filter_for(query)
        )

    async def aretrieve(self, query: str | Query) -> list[Document]:
        query = as_query(query)
        return await self._store.asimilarity_search(
            query.text, self._top_k, self._threshold, self._filter_for(query)
        )


@runtime_checkable
class DocumentReranker(Protocol):
    """Reorders (and may drop) retrieved documents, e.g. with a cross-encoder."""

    def rerank(self, query: Query, documents: Sequence[Document]) -> list[Document]: ...


class RerankingRetriever:
    """The reranking hook: retrieves with ``retriever``, then lets ``reranker`` reorder the
    documents and keeps the first ``top_n`` (all when ``None``). Rerankers are CPU-bound, so
    the async form runs them in a worker thread."""

    def __init__(
        self, retriever: DocumentRetriever, reranker: DocumentReranker, *, top_n: int | None = None
    ) -> None:
        if top_n is not None and (isinstance(top_n, bool) or top_n < 1):
            raise ValueError(f"top_n must be a positive int or None, got {top_n!r}")
        self._retriever = retriever
        self._reranker = reranker
        self._top_n = top_n

    def _finish(self, query: Query, documents: list[Document]) -> list[Document]:
        if not documents:
            return documents
        reranked = self._reranker.rerank(query, documents)
        return reranked if self._top_n is None else reranked[: self._top_n]

    def retrieve(self, query: str | Query) -> list[Document]:
        query = as_query(query)
        return self._finish(query, self._retriever.retrieve(query))

    async def aretrieve(self, query: str | Query) -> list[Document]:
        query = as_query(query)
        documents = await self._retriever.aretrieve(query)
        return await asyncio.to_thread(self._finish, query, documents)
