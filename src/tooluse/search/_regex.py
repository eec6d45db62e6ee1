"""``RegexToolIndex``: Spring AI's keyword-to-regex index, with identifiers split and CJK."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import logging
import re
from collections.abc import Sequence

from tooluse.search._sessions import DEFAULT_MAX_RESULTS, SessionToolIndex
from tooluse.search._text import CjkMode, contains_cjk, split_identifier, words
from tooluse.search._types import ToolReference

__all__ = ["MAX_PATTERN_LENGTH", "STOP_WORDS", "RegexToolIndex", "query_to_pattern"]

logger = logging.getLogger(__name__)

MAX_PATTERN_LENGTH = 200
MATCH_ALL = ".*"

# Spring AI's list, as the behavioural reference gives it.
# fmt: off
STOP_WORDS = frozenset((
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "being", "have", "has", "had",
    "do", "does", "did", "will", "would", "could", "should", "may", "might", "must", "shall",
    "can", "need", "dare", "ought", "used", "to", "of", "in", "for", "on", "with", "at", "by",
    "from", "as", "into", "through", "during", "before", "after", "above", "below", "between",
    "and", "or", "but", "if", "because", "until", "while", "although", "this", "that", "these",
    "those", "what", "which", "who", "whom", "whose", "i", "me", "my", "we", "our", "you", "your",
    "he", "him", "his", "she", "her", "it", "its", "they", "them", "their", "all", "any", "both",
    "each", "every", "some", "no", "not", "only", "just", "also", "very", "too", "so",
))
# fmt: on

_SEPARATORS = re.compile(r"[\s,;:.!?()\[\]{}\"']+")
_IDENTIFIER_JOINS = re.compile(r"[_\-]|[a-z][A-Z]")  # get_weather, get-weather, getWeather
_METACHARACTERS = re.compile(r"([\\.*+?^${}\[\]|()])")


def _escape(token: str) -> str:
    # Spring escapes exactly these characters; re.escape escapes more and would change the
    # pattern length that the 200-character cap counts.
    return _METACHARACTERS.sub(r"\\\1", token)


def _expanded(raw_token: str, cjk: CjkMode) -> list[str]:
    """The token itself, then its identifier parts and CJK words (our additions to Spring)."""
    expanded = [raw_token.lower()]
    if _IDENTIFIER_JOINS.search(raw_token):
        expanded.extend(split_identifier(raw_token))
    if contains_cjk(raw_token):
        expanded.extend(words(raw_token, cjk=cjk))
    return expanded


def query_tokens(query: str, *, cjk: CjkMode = "jieba") -> list[str]:
    """The lower-cased tokens of the pattern (unescaped); ``[]`` means match everything."""
    if not query or not query.strip():
        return []
    raw_tokens = [token for token in _SEPARATORS.split(query) if token]
    candidates = [token for raw in raw_tokens for token in _expanded(raw, cjk)]
    kept = [t for t in candidates if len(t) >= 2 and t not in STOP_WORDS]
    tokens = list(dict.fromkeys(kept or candidates))
    while len(tokens) > 1 and len(_alternation(tokens)) > MAX_PATTERN_LENGTH:
        tokens.pop()
    return tokens


def query_to_pattern(query: str, *, cjk: CjkMode = "jieba") -> str:
    """Spring's query-to-pattern algorithm: ``"weather tools"`` -> ``(?i)(weather|tools)``.

    Tokens are split on whitespace and ``,;:.!?()[]{}"'``, lower-cased, stop words and
    tokens under 2 characters dropped (all tokens kept if none survive), metacharacters
    escaped, duplicates dropped; tokens are dropped from the end until the pattern fits in 200
    characters (never below one). A blank query matches everything (``.*``). Added: an
    identifier token (``getWeather``, ``get_weather``) also contributes its parts, and a CJK
    token its words (``查询天气`` -> ``查询``, ``天气``).
    """
    tokens = query_tokens(query, cjk=cjk)
    return _alternation(tokens) if tokens else MATCH_ALL


def _alternation(tokens: list[str]) -> str:
    return "(?i)(" + "|".join(_escape(token) for token in tokens) + ")"


class _Field:
    """One field of every tool. ``candidates`` finds the tools whose lower-cased text contains
    a token with ``str.find`` (fast, C); only those are matched with the regular expression."""

    __slots__ = ("_lowered", "_starts", "texts")

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)
        lowered = [text.lower().replace("\n", " ") for text in texts]
        self._starts, position = [], 0
        for text in lowered:
            self._starts.append(position)
            position += len(text) + 1
        self._starts.append(position)
        self._lowered = "\n".join(lowered)

    def candidates(self, tokens: Sequence[str], into: set[int]) -> None:
        blob, starts = self._lowered, self._starts
        for token in tokens:
            position = blob.find(token)
            while position >= 0:
                tool = bisect.bisect_right(starts, position) - 1
                into.add(tool)
                position = blob.find(token, starts[tool + 1])


def _matches(pattern: re.Pattern[str], text: str) -> tuple[int, int]:
    """(number of non-overlapping matches, offset of the first) of ``pattern`` in ``text``."""
    count, first = 0, -1
    for match in pattern.finditer(text):
        if count == 0:
            first = match.start()
        count += 1
    return count, first


@dataclasses.dataclass(frozen=True, slots=True)
class _RegexSnapshot:
    names: _Field
    descriptions: _Field


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error as exc:
        logger.error("Invalid tool-search pattern %r (%s); the search finds nothing", pattern, exc)
        return None


class RegexToolIndex(SessionToolIndex[_RegexSnapshot]):
    """Keyword search by regular expression over tool names and descriptions (Spring AI's
    ``RegexToolIndex``).

    Score per tool: ``2 x name matches + 1 / (1 + 0.1 x first name match offset)`` (when the
    name matches) plus ``description matches + 0.5 / (1 + 0.1 x first offset)`` (when the
    description matches); tools scoring 0 are dropped; ties keep indexing order. Query
    ``weather``: a tool named ``weatherTool`` scores 3.0, one described ``Provides weather
    forecasts`` about 1.263. See :func:`query_to_pattern` for the query side.
    """

    def __init__(
        self, *, cjk: CjkMode = "jieba", default_max_results: int = DEFAULT_MAX_RESULTS
    ) -> None:
        super().__init__(default_max_results=default_max_results)
        self._cjk: CjkMode = cjk

    def pattern_for(self, query: str) -> str:
        """The regular expression a query becomes (see :func:`query_to_pattern`)."""
        return query_to_pattern(query, cjk=self._cjk)

    def _build(self, references: Sequence[ToolReference]) -> _RegexSnapshot:
        return _RegexSnapshot(
            _Field([reference.tool_name for reference in references]),
            _Field([reference.summary for reference in references]),
        )

    def _rank(
        self, snapshot: _RegexSnapshot, query: str, limit: int, allowed: set[int] | None
    ) -> list[tuple[int, float]]:
        tokens = query_tokens(query, cjk=self._cjk)
        pattern = _compiled(_alternation(tokens) if tokens else MATCH_ALL)
        if pattern is None:
            return []
        candidates: set[int] = set()
        if tokens:
            snapshot.names.candidates(tokens, candidates)
            snapshot.descriptions.candidates(tokens, candidates)
        else:
            candidates.update(range(len(snapshot.names.texts)))
        if allowed is not None:
            candidates &= allowed
        scored: list[tuple[int, float]] = []
        for position in candidates:
            score = 0.0
            count, first = _matches(pattern, snapshot.names.texts[position])
            if count:
                score += 2.0 * count + 1.0 / (1.0 + 0.1 * first)
            count, first = _matches(pattern, snapshot.descriptions.texts[position])
            if count:
                score += count + 0.5 / (1.0 + 0.1 * first)
            if score > 0:
                scored.append((position, score))
        scored.sort(key=lambda item: (-item[1], item[0]))
        return scored[:limit]
