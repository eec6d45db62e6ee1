"""Query augmenters: turning a question and the retrieved documents into the prompt text."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from tooluse.rag._document import Document, Query
from tooluse.rag._template import PromptTemplate

__all__ = [
    "DEFAULT_EMPTY_CONTEXT_TEMPLATE",
    "DEFAULT_PROMPT_TEMPLATE",
    "ContextualQueryAugmenter",
    "QueryAugmenter",
]

DEFAULT_PROMPT_TEMPLATE = """Context information is below.

---------------------
{context}
---------------------

Given the context information and no prior knowledge, answer the query.

Follow these rules:

1. If the answer is not in the context, just say that you don't know.
2. Avoid statements like "Based on the context..." or "The provided information...".

Query: {query}

Answer:"""

DEFAULT_EMPTY_CONTEXT_TEMPLATE = """The knowledge base has no information about the query below.
Politely tell the user that you cannot answer it from the knowledge base.

Query: {query}

Answer:"""


@runtime_checkable
class QueryAugmenter(Protocol):
    """Rewrites the query with the documents retrieved for it."""

    def augment(self, query: Query, documents: Sequence[Document]) -> Query: ...


def _join_texts(documents: Sequence[Document]) -> str:
    return "\n\n".join(d.text for d in documents)


class ContextualQueryAugmenter:
    """Puts the retrieved documents and the original question into a prompt template.

    The context template must contain ``{query}`` and ``{context}`` (a template without
    ``{query}`` would replace the user's question, a Spring pitfall). With no documents, the
    empty-context template is rendered with the same variables (``query``, ``context`` = "",
    and ``variables``), where Spring renders it with none; with ``allow_empty_context=True``
    the query passes through unchanged instead. ``variables`` adds fixed values for custom
    placeholders; ``document_formatter`` turns the documents into the context text.
    """

    def __init__(
        self,
        *,
        prompt_template: str = DEFAULT_PROMPT_TEMPLATE,
        empty_context_template: str = DEFAULT_EMPTY_CONTEXT_TEMPLATE,
        allow_empty_context: bool = False,
        variables: Mapping[str, str] | None = None,
        document_formatter: Callable[[Sequence[Document]], str] = _join_texts,
    ) -> None:
        self._template = PromptTemplate(prompt_template)
        missing = {"query", "context"} - self._template.variables
        if missing:
            raise ValueError(
                "prompt_template must contain the placeholders {query} and {context}; "
                f"missing: {', '.join('{' + m + '}' for m in sorted(missing))}"
            )
        self._empty_template = PromptTemplate(empty_context_template)
        self._variables = dict(variables or {})
        reserved = {"query", "context"} & self._variables.keys()
        if reserved:
            raise ValueError(f"variables may not redefine {sorted(reserved)}: they are filled in")
        for template in (self._template, self._empty_template):
            unknown = template.variables - {"query", "context"} - self._variables.keys()
            if unknown:
                raise ValueError(
                    f"template placeholders without a value: {sorted(unknown)}; "
                    "pass them in variables="
                )
        self._allow_empty_context = allow_empty_context
        self._format = document_formatter

    def augment(self, query: Query, documents: Sequence[Document]) -> Query:
        if not documents:
            if self._allow_empty_context:
                return query
            values = {**self._variables, "query": query.text, "context": ""}
            return query.replace(text=self._empty_template.render(values))
        values = {**self._variables, "query": query.text, "context": self._format(documents)}
        return query.replace(text=self._template.render(values))
