"""``RetrievalAugmentationAdvisor``: retrieve for the user's question, augment the prompt."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from tooluse.advisors import (
    HIGHEST_PRECEDENCE,
    AdvisorChain,
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
)
from tooluse.messages import UserMessage
from tooluse.rag._augmenter import ContextualQueryAugmenter, QueryAugmenter
from tooluse.rag._document import Query
from tooluse.rag._retrieval import DocumentRetriever
from tooluse.rag._transform import QueryTransformer

__all__ = [
    "DEFAULT_ORDER",
    "DOCUMENT_CONTEXT",
    "RETRIEVAL_QUERY",
    "RetrievalAugmentationAdvisor",
]

DOCUMENT_CONTEXT = "rag_document_context"
"""Request/response context key under which the retrieved documents are published."""
RETRIEVAL_QUERY = "rag_retrieval_query"
"""Request/response context key of the text retrieval searched with: the question, or what
the query transformers made of it."""
DEFAULT_ORDER = HIGHEST_PRECEDENCE + 250
"""Inside memory (+200), outside the tool loop (+300): retrieval runs once per request, not
once per tool round (Spring's default order 0 puts it inside the loop)."""


class RetrievalAugmentationAdvisor(BaseAdvisor):
    """Retrieves documents for the prompt's last user message and rewrites that message with
    the augmenter (by default :class:`ContextualQueryAugmenter`).

    The query carries the messages before the user message as ``history`` and the request
    context, so retrievers can read per-request settings (a filter, a gate). The
    ``query_transformers`` rewrite it in order before retrieval (e.g. a
    :class:`~tooluse.rag.CompressionQueryTransformer` for follow-up questions); only retrieval
    uses their result, the augmenter gets the question as asked. The documents are put in the
    context under :data:`DOCUMENT_CONTEXT`, the text retrieval searched with under
    :data:`RETRIEVAL_QUERY`; the augmented message keeps the user's own text as its
    ``original_text``.
    """

    def __init__(
        self,
        retriever: DocumentRetriever,
        *,
        query_transformers: Iterable[QueryTransformer] = (),
        augmenter: QueryAugmenter | None = None,
        order: int = DEFAULT_ORDER,
        name: str = "RetrievalAugmentationAdvisor",
    ) -> None:
        super().__init__(name=name, order=order)
        self._retriever = retriever
        self._transformers = tuple(query_transformers)
        for position, transformer in enumerate(self._transformers):
            if not isinstance(transformer, QueryTransformer):
                raise TypeError(
                    f"query_transformers[{position}] is not a QueryTransformer (transform, "
                    f"atransform): {transformer!r:.100}"
                )
        self._augmenter = augmenter if augmenter is not None else ContextualQueryAugmenter()

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        return await chain.next_call(await self._augment(request))

    async def advise_stream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        augmented = await self._augment(request)
        async for item in chain.next_stream(augmented):
            yield item

    async def _augment(self, request: ChatClientRequest) -> ChatClientRequest:
        messages = list(request.prompt.messages)
        position = next(
            (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], UserMessage)),
            None,
        )
        if position is None:
            raise ValueError(
                "RetrievalAugmentationAdvisor needs a user message in the prompt to retrieve for"
            )
        message = messages[position]
        assert isinstance(message, UserMessage)
        query = Query(message.text, messages[:position], request.context)
        search = await self._transformed(query)
        documents = await self._retriever.aretrieve(search)
        augmented = self._augmenter.augment(query, documents)
        asked = message.text if message.original_text is None else message.original_text
        messages[position] = message.model_copy(
            update={"text": augmented.text, "original_text": asked}
        )
        context = {**request.context, DOCUMENT_CONTEXT: documents, RETRIEVAL_QUERY: search.text}
        return request.replace(prompt=request.prompt.replace(messages=messages), context=context)

    async def _transformed(self, query: Query) -> Query:
        for transformer in self._transformers:
            result = await transformer.atransform(query)
            if not isinstance(result, Query):
                raise TypeError(
                    f"{type(transformer).__name__}.atransform returned "
                    f"{type(result).__name__}, not a Query"
                )
            query = result
        return query
