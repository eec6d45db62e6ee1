"""``TwoSourceAugmenter``: the answer stage's prompt from one of two sources of information."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence

from tooluse.qa._ledger import FetchLedger, FetchRecord
from tooluse.rag import Document, PromptTemplate, Query

__all__ = [
    "DATA_TEMPLATE",
    "DOCUMENTS_TEMPLATE",
    "EMPTY_TEMPLATE",
    "TwoSourceAugmenter",
    "format_documents",
    "format_records",
]

# The information block comes first and the rules after it: in one template the later text
# weighs more, and rules placed before a long block of data end up in the middle.
DATA_TEMPLATE = """Data fetched for this question just now (本轮已取得的数据):
---------------------
{context}
---------------------

Rules for this answer:
1. Answer from the data above.
2. If the data does not answer the question, say what is missing; never invent entries.
3. Do not mention tools, functions or internal identifiers.
4. Answer in the language of the question.

Question: {query}"""

DOCUMENTS_TEMPLATE = """Documents retrieved from the knowledge base (本轮检索到的资料):
---------------------
{context}
---------------------

Rules for this answer:
1. Answer from the documents above; ignore the ones that are not about the question.
2. If they do not contain the answer, say that you do not know; never invent entries.
3. No live data was fetched: never claim to have queried, looked up or verified anything.
4. Answer in the language of the question.

Question: {query}"""

EMPTY_TEMPLATE = """No data was fetched for this question and the knowledge base has nothing
about it (本轮没有取得数据，也没有检索到资料).

Rules for this answer:
1. If the question asks for facts, say that you do not have them; never invent any.
2. Never claim to have queried, looked up or verified anything.
3. Answer in the language of the question.

Question: {query}"""


def format_records(records: Sequence[FetchRecord]) -> str:
    """The results of the fetches, one paragraph each. Tool names and arguments are left
    out: they are internal identifiers the answer must not repeat.

    A JSON result written with ``\\u`` escapes (Python's ``json.dumps`` by default, many
    MCP servers) has them replaced by the characters they stand for, so the model reads
    ``"状态": "已发货"`` and not ``"\\u72b6\\u6001"`` (several tokens per character, and
    small models misread them). The JSON means the same; other text is left as it is."""
    return "\n\n".join(_unescaped(record.result) for record in records)


# A JSON escape: an escaped backslash (matched so that the text after it is never taken
# for an escape, and kept), a surrogate pair of \uXXXX escapes, or one.
_JSON_ESCAPE = re.compile(
    r"\\\\|\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})|\\u([0-9a-f]{4})", re.IGNORECASE
)


def _unescaped(result: str) -> str:
    if "\\u" not in result:
        return result
    try:
        json.loads(result)
    except (ValueError, RecursionError):  # not JSON: its backslashes mean something else
        return result

    def character(match: re.Match[str]) -> str:
        high, low, single = match.groups()
        if high is not None:
            code = 0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00)
        elif single is not None:
            code = int(single, 16)
        else:
            return match.group()
        text = chr(code)
        # Only printable non-ASCII characters: quotes, backslashes, controls, line and
        # paragraph separators and lone surrogates keep their escapes.
        if code < 0x80 or 0xD800 <= code < 0xE000 or not text.isprintable():
            return match.group()
        return text

    return _JSON_ESCAPE.sub(character, result)


def format_documents(documents: Sequence[Document]) -> str:
    """The documents numbered ``[1]``, ``[2]``... (each chunk starts with its title path)."""
    return "\n\n".join(f"[{n}] {document.text}" for n, document in enumerate(documents, 1))


class TwoSourceAugmenter:
    """Renders the answer stage's user message from exactly one source of information.

    The two sources exclude each other: the data the tools fetched in this turn (the
    :class:`FetchLedger` in the query's context, rendered with ``data_template``) or, when
    nothing was fetched, the retrieved documents (``documents_template``); with neither,
    ``empty_template``. Every template gets the same variables: ``{query}`` (the question as
    asked, which every template must contain), ``{context}`` (the information block, ``""``
    for the empty template) and ``variables``.

    The data is rendered into the question, never added as a message of its own: memory
    stores the question as asked, so fetched data never comes back in later turns.
    """

    def __init__(
        self,
        *,
        data_template: str = DATA_TEMPLATE,
        documents_template: str = DOCUMENTS_TEMPLATE,
        empty_template: str = EMPTY_TEMPLATE,
        variables: Mapping[str, str] | None = None,
        data_formatter: Callable[[Sequence[FetchRecord]], str] = format_records,
        document_formatter: Callable[[Sequence[Document]], str] = format_documents,
    ) -> None:
        self._variables = dict(variables or {})
        reserved = {"query", "context"} & self._variables.keys()
        if reserved:
            raise ValueError(f"variables may not redefine {sorted(reserved)}: they are filled in")
        templates = {
            "data_template": data_template,
            "documents_template": documents_template,
            "empty_template": empty_template,
        }
        parsed: dict[str, PromptTemplate] = {}
        for name, text in templates.items():
            template = PromptTemplate(text)
            needed = {"query"} if name == "empty_template" else {"query", "context"}
            missing = needed - template.variables
            if missing:
                raise ValueError(
                    f"{name} must contain the placeholders "
                    f"{', '.join('{' + m + '}' for m in sorted(needed))}; missing: "
                    f"{', '.join('{' + m + '}' for m in sorted(missing))}"
                )
            unknown = template.variables - {"query", "context"} - self._variables.keys()
            if unknown:
                raise ValueError(
                    f"{name} has placeholders without a value: {sorted(unknown)}; pass them "
                    "in variables="
                )
            parsed[name] = template
        self._data = parsed["data_template"]
        self._documents = parsed["documents_template"]
        self._empty = parsed["empty_template"]
        self._format_records = data_formatter
        self._format_documents = document_formatter

    def augment(self, query: Query, documents: Sequence[Document]) -> Query:
        ledger = FetchLedger.of(query.context)
        if ledger:
            template, context = self._data, self._format_records(ledger.records)
        elif documents:
            template, context = self._documents, self._format_documents(documents)
        else:
            template, context = self._empty, ""
        values = {**self._variables, "query": query.text, "context": context}
        return query.replace(text=template.render(values))
