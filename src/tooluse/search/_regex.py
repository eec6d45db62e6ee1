"""``RegexToolIndex``: Spring AI's keyword-to-regex index, with identifiers split and CJK."""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

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


_Matches = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]


class _Blob:
    """Some tools' lower-cased texts joined by newlines (a token never spans two tools)."""

    __slots__ = ("_starts", "_text", "ascii", "tools")

    def __init__(self, tools: list[int], lowered: list[str]) -> None:
        self.tools = np.array(tools, dtype=np.int64)
        self._starts = np.cumsum([0] + [len(text) + 1 for text in lowered])
        self._text = "\n".join(lowered)
        self.ascii = self._text.isascii()

    def matches(self, tokens: Sequence[str]) -> _Matches:
        """(tools, number of matches, offset of the first match), for the tools that match."""
        text = self._text
        positions: list[int] = []
        orders: list[int] = []
        lengths: list[int] = []
        for order, token in enumerate(tokens):
            if self.ascii and not token.isascii():
                continue
            found = text.find(token)
            while found >= 0:  # overlapping occurrences too: the resolution needs them
                positions.append(found)
                orders.append(order)
                lengths.append(len(token))
                found = text.find(token, found + 1)
        local, counts, firsts = self._resolve(
            np.array(positions, dtype=np.int64),
            np.array(orders, dtype=np.int64),
            np.array(lengths, dtype=np.int64),
        )
        return self.tools[local], counts, firsts

    def _resolve(
        self,
        positions: npt.NDArray[np.int64],
        orders: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
    ) -> _Matches:
        empty = np.empty(0, dtype=np.int64)
        if positions.size == 0:
            return empty, empty, empty
        order = np.lexsort((orders, positions))
        positions, lengths = positions[order], lengths[order]
        tools = np.searchsorted(self._starts, positions, side="right") - 1
        ends = positions + lengths
        # An occurrence that starts before an earlier one (same tool) ends is not a match of
        # its own; only tools with such overlaps need the sequential leftmost-first walk.
        previous_end = np.maximum.accumulate(np.where(tools[:-1] == tools[1:], ends[:-1], 0))
        overlapping = np.zeros(positions.size, dtype=bool)
        overlapping[1:] = (positions[1:] < previous_end) & (tools[1:] == tools[:-1])
        taken = ~overlapping
        for tool in np.unique(tools[overlapping]):
            members = np.flatnonzero(tools == tool)
            cursor = -1
            for index in members:
                taken[index] = positions[index] >= cursor
                if taken[index]:
                    cursor = ends[index]
        unique_tools, first_index = np.unique(tools, return_index=True)
        counts = np.bincount(tools[taken], minlength=int(unique_tools.max()) + 1)[unique_tools]
        firsts = positions[first_index] - self._starts[unique_tools]
        return unique_tools, counts, firsts


class _Field:
    """One field of every tool, lower-cased and joined, so a query is a few ``str.find`` scans
    (C speed) instead of a regular expression run per tool. ASCII texts are joined apart from
    the others: one accented character would make Python store the whole join with 2 or 4
    bytes per character, and searching it is then several times slower.

    The result is the regex's: matches are found per token, then resolved like the
    alternation does (leftmost first; at one position the earlier token wins; no overlaps).
    Texts whose lower-casing changes their length (a few exotic characters) are matched with
    the regular expression itself.
    """

    __slots__ = ("_blobs", "_irregular", "texts")

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)
        self._irregular: list[int] = []
        groups: dict[bool, tuple[list[int], list[str]]] = {True: ([], []), False: ([], [])}
        for position, text in enumerate(self.texts):
            low = text.lower()
            if len(low) != len(text):
                self._irregular.append(position)
                continue
            tools, lowered = groups[low.isascii()]
            tools.append(position)
            lowered.append(low.replace("\n", " "))
        self._blobs = [_Blob(*group) for group in groups.values() if group[0]]

    def matches(self, tokens: Sequence[str], pattern: re.Pattern[str]) -> _Matches:
        """(tools, number of matches, offset of the first match), for the tools that match."""
        parts = [blob.matches(tokens) for blob in self._blobs]
        irregular = [(t, *_regex_matches(pattern, self.texts[t])) for t in self._irregular]
        matched = [item for item in irregular if item[1]]
        if matched:
            columns = np.array(matched, dtype=np.int64)  # rows of (tool, count, first)
            parts.append((columns[:, 0], columns[:, 1], columns[:, 2]))
        if not parts:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty, empty
        tools, counts, firsts = (np.concatenate(column) for column in zip(*parts, strict=True))
        return tools, counts, firsts


def _regex_matches(pattern: re.Pattern[str], text: str) -> tuple[int, int]:
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
        size = len(snapshot.names.texts)
        scores = np.zeros(size, dtype=np.float64)
        for field, (per_match, bonus) in (
            (snapshot.names, (2.0, 1.0)),
            (snapshot.descriptions, (1.0, 0.5)),
        ):
            if tokens:
                tools, counts, firsts = field.matches(tokens, pattern)
            else:  # ".*": every text matches; rare enough for the regex itself
                found = [_regex_matches(pattern, text) for text in field.texts]
                tools = np.arange(size, dtype=np.int64)
                counts = np.array([count for count, _ in found], dtype=np.int64)
                firsts = np.array([first for _, first in found], dtype=np.int64)
            scores[tools] += per_match * counts + bonus / (1.0 + 0.1 * firsts)
        if allowed is not None:
            mask = np.zeros(size, dtype=bool)
            mask[list(allowed)] = True
            scores[~mask] = 0.0
        matched = np.flatnonzero(scores > 0)
        ranked = sorted(matched.tolist(), key=lambda position: (-scores[position], position))
        return [(position, float(scores[position])) for position in ranked[:limit]]
