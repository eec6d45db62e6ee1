"""``FetchGateRetriever``: no retrieval at all when the tools already fetched the data."""

from __future__ import annotations

from tooluse.qa._ledger import FetchLedger
from tooluse.rag import Document, DocumentRetriever, Query

__all__ = ["FetchGateRetriever"]


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
