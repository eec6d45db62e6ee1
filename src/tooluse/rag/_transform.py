"""Query transformers: what retrieval searches for, rewritten before it searches.

A follow-up such as "那能延期吗？" ("can they be extended?") says nothing about its subject;
searched as it is, it finds whatever is closest to "extended". Spring AI's pre-retrieval
stage rewrites it first: :class:`CompressionQueryTransformer` folds the conversation into a
standalone question, :class:`RewriteQueryTransformer` makes a question fit for a search.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping, Sequence
from typing import Final, Protocol, runtime_checkable

from tooluse._sync import run_sync
from tooluse.client import ChatClient
from tooluse.history import as_asked
from tooluse.messages import AssistantMessage, ChatOptions, Message, Usage, UserMessage
from tooluse.models import ChatModel
from tooluse.rag._document import Query
from tooluse.rag._retrieval import as_query
from tooluse.rag._template import PromptTemplate

__all__ = [
    "DEFAULT_COMPRESSION_TEMPLATE",
    "DEFAULT_REWRITE_TEMPLATE",
    "CompressionQueryTransformer",
    "QueryTransformError",
    "QueryTransformer",
    "RewriteQueryTransformer",
    "format_history",
]

logger = logging.getLogger(__name__)

# Spring's templates, with one rule added to each: keep the language of the question. A
# model asked for "a standalone query" often answers in English, and cross-lingual search is
# where a small multilingual embedding model is weakest.
DEFAULT_COMPRESSION_TEMPLATE: Final = """Below are a conversation and a follow-up question. \
Rewrite the follow-up as one concise, standalone question that can be understood without \
the conversation: name what it refers to, keep what the user wants to know, and keep the \
language of the follow-up question. Reply with the question only.

Conversation:
{history}

Follow-up question:
{query}

Standalone question:"""

DEFAULT_REWRITE_TEMPLATE: Final = """Rewrite the question below so that it finds better \
results when searched in a {target}: leave out what does not matter for the search, make it \
concise and specific, and keep its language. Reply with the rewritten question only.

Question:
{query}

Rewritten question:"""


class QueryTransformError(RuntimeError):
    """A query transformer could not transform a query: its model failed. The message names
    the transformer and the question; ``__cause__`` is the model's error (e.g. a
    :class:`tooluse.models.ProviderError`)."""


@runtime_checkable
class QueryTransformer(Protocol):
    """Turns the query retrieval is asked for into the query it searches with (the
    question the model answers stays as asked)."""

    def transform(self, query: str | Query) -> Query: ...

    async def atransform(self, query: str | Query) -> Query: ...


def format_history(messages: Sequence[Message]) -> str:
    """The conversation as ``User: ...`` / ``Assistant: ...`` lines: questions as the user
    asked them (without documents an advisor put around them), answers by their text; system
    messages, tool results and answers without text (tool calls) are left out."""
    lines: list[str] = []
    for message in messages:
        message = as_asked(message)
        if isinstance(message, UserMessage):
            role = "User"
        elif isinstance(message, AssistantMessage):
            role = "Assistant"
        else:
            continue
        text = (message.text or "").strip()
        if text:
            lines.append(f"{role}: {text}")
    return "\n".join(lines)


class _ModelQueryTransformer(abc.ABC):
    """A transformer that asks a chat model for the new query text with a prompt template.

    A blank reply keeps the query as it was (with a warning in the log), as in Spring; a
    failed model call raises :class:`QueryTransformError`.
    """

    _required: frozenset[str]
    _known: frozenset[str]

    def __init__(
        self, chat_model: ChatModel, prompt_template: str, options: ChatOptions | None
    ) -> None:
        name = type(self).__name__
        if not isinstance(chat_model, ChatModel):
            raise TypeError(
                f"{name} needs a chat model (call, acall, stream), got {type(chat_model).__name__}"
            )
        template = PromptTemplate(prompt_template)
        missing = self._required - template.variables
        if missing:
            raise ValueError(
                f"{name}: prompt_template must contain "
                f"{', '.join('{' + v + '}' for v in sorted(self._required))}; missing: "
                f"{', '.join('{' + v + '}' for v in sorted(missing))}"
            )
        unknown = template.variables - self._known
        if unknown:
            raise ValueError(
                f"{name}: prompt_template has placeholders without a value: {sorted(unknown)} "
                f"(it gets {', '.join('{' + v + '}' for v in sorted(self._known))})"
            )
        self._template = template
        # No tools: the transformer's model only writes text.
        self._client = ChatClient(chat_model, options=options, auto_register_tool_advisor=False)

    @abc.abstractmethod
    def _values(self, query: Query) -> Mapping[str, str] | None:
        """The template's values for ``query``; ``None`` when there is nothing to do."""

    def transform(self, query: str | Query) -> Query:
        """Sync form of :meth:`atransform` (not from inside a running event loop)."""
        query = as_query(query)
        values = self._values(query)
        if values is None:
            return query
        return run_sync(
            self._ask(query, values),
            sync_name=f"{type(self).__name__}.transform()",
            async_name="transformer.atransform(...)",
        )

    async def atransform(self, query: str | Query) -> Query:
        query = as_query(query)
        values = self._values(query)
        if values is None:
            return query
        return await self._ask(query, values)

    async def _ask(self, query: Query, values: Mapping[str, str]) -> Query:
        try:
            response = await self._client.prompt().user(self._template.render(values)).acall()
            reply = response.content()
        except Exception as exc:
            raise self._failure(query, exc) from exc
        return self._result(query, reply, response.chat_response().usage)

    def _failure(self, query: Query, exc: Exception) -> QueryTransformError:
        return QueryTransformError(
            f"{type(self).__name__} could not rewrite the question {query.text!r:.200} for "
            f"retrieval: {type(exc).__name__}: {exc}"
        )

    def _result(self, query: Query, reply: str, usage: Usage | None) -> Query:
        """The query with the model's ``reply`` as its text; the call's ``usage`` is counted
        even when the reply is blank and the text stays as it was."""
        text = reply.strip()
        if not text:
            logger.warning(
                "%s: the model's reply was blank; retrieving with the question as asked: %r",
                type(self).__name__,
                query.text,
            )
            return query if usage is None else query.replace(text=query.text, usage=usage)
        logger.debug("%s: %r -> %r", type(self).__name__, query.text, text)
        return query.replace(text=text, usage=usage)


class CompressionQueryTransformer(_ModelQueryTransformer):
    """Rewrites a follow-up question into a standalone one with the conversation before it
    (``Query.history``, as :func:`format_history` shows it), Spring's
    ``CompressionQueryTransformer``.

    A query without conversation (no history, or only system messages and tool traffic) is
    returned as it is, without a model call. ``prompt_template`` must contain ``{history}``
    and ``{query}``; ``options`` are the model call's (e.g. ``ChatOptions(temperature=0)``).
    A blank reply keeps the query; a failed model call raises :class:`QueryTransformError`
    (retrieval, and so the request, fails with it: a question searched without its subject
    would be answered from the wrong documents).
    """

    _required = frozenset({"history", "query"})
    _known = _required

    def __init__(
        self,
        chat_model: ChatModel,
        *,
        prompt_template: str = DEFAULT_COMPRESSION_TEMPLATE,
        options: ChatOptions | None = None,
    ) -> None:
        super().__init__(chat_model, prompt_template, options)

    def _values(self, query: Query) -> Mapping[str, str] | None:
        history = format_history(query.history)
        if not history:
            return None
        return {"history": history, "query": query.text}


class RewriteQueryTransformer(_ModelQueryTransformer):
    """Rewrites a question to search better in a ``target`` (``"vector store"``; a web
    search engine, say), Spring's ``RewriteQueryTransformer``: for verbose or rambling
    questions. Every query costs a model call. ``prompt_template`` must contain ``{query}``
    and may contain ``{target}``; a blank reply keeps the query; a failed model call raises
    :class:`QueryTransformError`.
    """

    _required = frozenset({"query"})
    _known = frozenset({"query", "target"})

    def __init__(
        self,
        chat_model: ChatModel,
        *,
        prompt_template: str = DEFAULT_REWRITE_TEMPLATE,
        target: str = "vector store",
        options: ChatOptions | None = None,
    ) -> None:
        if not isinstance(target, str) or not target.strip():
            raise ValueError(
                f"RewriteQueryTransformer: target must be a non-blank string, got {target!r}"
            )
        super().__init__(chat_model, prompt_template, options)
        self._target = target

    def _values(self, query: Query) -> Mapping[str, str] | None:
        return {"query": query.text, "target": self._target}
