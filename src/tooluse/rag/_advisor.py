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
from tooluse.messages import ChatResponse, Usage, UserMessage, sum_usage
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
    ``original_text``. The tokens the transformers' model calls used (``Query.usage``) are
    added to the response's usage, so a request's usage counts every call made for it.
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
        augmented, used = await self._augment(request)
        response = await chain.next_call(augmented)
        if used is None or response.chat_response is None:
            return response
        return response.replace(chat_response=_plus_usage(response.chat_response, used))

    async def advise_stream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        augmented, used = await self._augment(request)
        if used is None:
            async for item in chain.next_stream(augmented):
                yield item
            return
        # A stream's usage is the total so far (the last one reported wins): each reported
        # usage gets the rewriting's added, and a stream that reports none gets it at its end.
        reported = False
        context = augmented.context
        async for item in chain.next_stream(augmented):
            context = item.context
            chunk = item.chat_response
            if chunk is not None and chunk.usage is not None and not chunk.usage.is_empty():
                reported = True
                item = item.replace(chat_response=_plus_usage(chunk, used))
            yield item
        if not reported:
            yield ChatClientResponse(ChatResponse(usage=used), context)

    async def _augment(self, request: ChatClientRequest) -> tuple[ChatClientRequest, Usage | None]:
        """The request with its user message augmented, and the tokens the query
        transformers used."""
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
        augmented_request = request.replace(
            prompt=request.prompt.replace(messages=messages), context=context
        )
        return augmented_request, search.usage

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


def _plus_usage(response: ChatResponse, usage: Usage) -> ChatResponse:
    return response.model_copy(update={"usage": sum_usage(response.usage, usage)})
