"""The answer stage's gates: no retrieval at all, and no rewriting of the question for it,
when the tools already fetched the data."""

from __future__ import annotations

from tooluse.qa._ledger import FetchLedger
from tooluse.rag import Document, DocumentRetriever, Query, QueryTransformer

__all__ = ["FetchGateQueryTransformer", "FetchGateRetriever"]


class FetchGateRetriever:
    """The outermost retriever of the answer stage.

    When the request context carries a non-empty :class:`FetchLedger` it returns no documents
    without calling ``delegate``: retrieval and reranking do not run (rather than run and be
    ignored), so documents can never compete with the fetched data. Otherwise it retrieves
    through ``delegate``.
    """

    __slots__ = ("_delegate",)

    def __init__(self, delegate: DocumentRetriever) -> None:
        if not callable(getattr(delegate, "aretrieve", None)) or not callable(
            getattr(delegate, "retrieve", None)
        ):
            raise TypeError(
                f"FetchGateRetriever wraps a DocumentRetriever (retrieve, aretrieve), got "
                f"{type(delegate).__name__}"
            )
        self._delegate = delegate

    @property
    def delegate(self) -> DocumentRetriever:
        return self._delegate

    def retrieve(self, query: str | Query) -> list[Document]:
        query = query if isinstance(query, Query) else Query(query)
        if FetchLedger.of(query.context):
            return []
        return self._delegate.retrieve(query)

    async def aretrieve(self, query: str | Query) -> list[Document]:
        query = query if isinstance(query, Query) else Query(query)
        if FetchLedger.of(query.context):
            return []
        return await self._delegate.aretrieve(query)


class FetchGateQueryTransformer:
    """A query transformer of the answer stage: when the request context carries a non-empty
    :class:`FetchLedger` (no retrieval will run) the query passes through without calling
    ``delegate``, so a model call that rewrites the question for retrieval is not paid for
    nothing. Otherwise it transforms through ``delegate``."""

    __slots__ = ("_delegate",)

    def __init__(self, delegate: QueryTransformer) -> None:
        if not isinstance(delegate, QueryTransformer):
            raise TypeError(
                f"FetchGateQueryTransformer wraps a QueryTransformer (transform, atransform), "
                f"got {type(delegate).__name__}"
            )
        self._delegate = delegate

    @property
    def delegate(self) -> QueryTransformer:
        return self._delegate

    def transform(self, query: str | Query) -> Query:
        query = query if isinstance(query, Query) else Query(query)
        if FetchLedger.of(query.context):
            return query
        return self._delegate.transform(query)

    async def atransform(self, query: str | Query) -> Query:
        query = query if isinstance(query, Query) else Query(query)
        if FetchLedger.of(query.context):
            return query
        return await self._delegate.atransform(query)
