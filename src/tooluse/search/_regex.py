"""``RegexToolIndex``: Spring AI's keyword-to-regex index, with identifiers split and CJK."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tooluse.search._cousage import ToolCoUsage
from tooluse.search._sessions import DEFAULT_MAX_RESULTS, SessionToolIndex, top_positions
from tooluse.search._text import CjkMode, check_cjk_mode, contains_cjk, split_identifier, words
from tooluse.search._types import ToolReference

__all__ = ["MAX_PATTERN_LENGTH", "STOP_WORDS", "RegexToolIndex", "query_to_pattern"]

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

_SEPARATOR_CLASS = r"\s,;:.!?()\[\]{}\"'"  # Spring's query separators
_SEPARATORS = re.compile(f"[{_SEPARATOR_CLASS}]+")
_IDENTIFIER_JOINS = re.compile(r"[_\-]|[a-z][A-Z]")  # get_weather, get-weather, getWeather
_METACHARACTERS = re.compile(r"([\\.*+?^${}\[\]|()])")
# Text between separators: query tokens hold none, so each token match lies inside one chunk.
_CHUNK = re.compile(f"[^{_SEPARATOR_CLASS}]+")
_SORTED_PREFIX = 16


def _case_classes() -> dict[int, str]:
    """Characters that ``(?i)`` equates although their lower cases differ (σ and ς, θ and ϑ,
    s and ſ, ...), each mapped to one of its class: applied after ``lower()`` to texts and
    tokens alike, the fast matching equates them too. One character for one: offsets hold."""
    try:  # what the re module itself uses (3.11+); private, so looked up with care
        extra_cases: dict[int, tuple[int, ...]] = importlib.import_module(
            "re._casefix"
        )._EXTRA_CASES
    except (ImportError, AttributeError):  # pragma: no cover - lower-casing alone
        return {}
    members: dict[int, set[int]] = {}
    for character, others in extra_cases.items():
        joined = {character, *others}
        for member in list(joined):
            joined |= members.get(member, set())
        for member in joined:
            members[member] = joined
    return {c: chr(min(group)) for c, group in members.items() if c != min(group)}


_FOLD = _case_classes()


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
    length = len(_alternation([]))  # "(?i)()", then each token escaped and a "|" between
    for count, token in enumerate(tokens):
        length += len(_escape(token)) + (count > 0)
        if length > MAX_PATTERN_LENGTH and count > 0:
            return tokens[:count]
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
    """Some tools' lower-cased texts joined by newlines (a token never spans two tools),
    indexed by their chunks: the runs of text between the query separators.

    A query token holds no separator, so each of its occurrences lies inside one chunk. A
    token is looked up in a suffix array of the distinct chunks (a catalogue's vocabulary, far
    shorter than its text), and each hit is expanded to every place its chunk occurs, all
    with array operations: no Python loop runs per occurrence.
    """

    __slots__ = (
        "_chunk_starts",
        "_occurrence_starts",
        "_postings",
        "_sorted_prefixes",
        "_starts",
        "_suffixes",
        "_vocabulary",
        "ascii",
        "tools",
    )

    def __init__(self, tools: list[int], lowered: list[str]) -> None:
        self.tools = np.array(tools, dtype=np.int64)
        self._starts = np.cumsum([0] + [len(text) + 1 for text in lowered])
        text = "\n".join(lowered)
        self.ascii = text.isascii()
        chunk_ids: dict[str, int] = {}
        occurrence_chunks: list[int] = []
        occurrence_positions: list[int] = []
        for match in _CHUNK.finditer(text):
            occurrence_chunks.append(chunk_ids.setdefault(match.group(), len(chunk_ids)))
            occurrence_positions.append(match.start())
        chunks = np.array(occurrence_chunks, dtype=np.int64)
        order = np.argsort(chunks, kind="stable")
        self._postings = np.array(occurrence_positions, dtype=np.int64)[order]
        self._occurrence_starts = np.searchsorted(chunks[order], np.arange(len(chunk_ids) + 1))
        self._vocabulary = vocabulary = "\n".join(chunk_ids)
        self._chunk_starts = np.cumsum([0] + [len(chunk) + 1 for chunk in chunk_ids])
        # A suffix array of the vocabulary: its suffixes' first _SORTED_PREFIX characters,
        # sorted (fixed-width numpy strings: C-speed sort and binary search), and where each
        # starts. The suffixes that begin with a token are one run of it.
        starts = [i for i, character in enumerate(vocabulary) if character != "\n"]
        prefixes = np.array(
            [vocabulary[i : i + _SORTED_PREFIX] for i in starts],
            dtype=f"S{_SORTED_PREFIX}" if self.ascii else f"U{_SORTED_PREFIX}",
        )
        order = np.argsort(prefixes, kind="stable")
        self._sorted_prefixes = prefixes[order]
        self._suffixes = np.array(starts, dtype=np.int64)[order]

    def matches(self, tokens: Sequence[str]) -> _Matches:
        """(tools, number of matches, offset of the first match), for the tools that match.
        Tokens hold no separator (:func:`query_tokens` splits on them)."""
        found = [(order, self._hits(token)) for order, token in enumerate(tokens)]
        hits = np.concatenate([h for _, h in found]) if found else np.empty(0, dtype=np.int64)
        sizes = [h.size for _, h in found]
        positions, orders, lengths = self._expand(
            hits,
            np.repeat([order for order, _ in found], sizes).astype(np.int64),
            np.repeat([len(tokens[order]) for order, _ in found], sizes).astype(np.int64),
        )
        local, counts, firsts = self._resolve(positions, orders, lengths)
        return self.tools[local], counts, firsts

    def _hits(self, token: str) -> npt.NDArray[np.int64]:
        """Where ``token`` occurs in the vocabulary (overlapping occurrences too: the
        resolution needs them)."""
        if self.ascii and not token.isascii():
            return np.empty(0, dtype=np.int64)
        key = token[:_SORTED_PREFIX]
        # The run: from the key up to the key followed by a character above all others.
        bounds: list[str] | list[bytes] = [key, key + "\U0010ffff"]
        if self.ascii:
            bounds = [key.encode("ascii"), key.encode("ascii") + b"\xff"]
        low, high = np.searchsorted(self._sorted_prefixes, bounds).tolist()
        run = self._suffixes[low:high]
        if len(token) > _SORTED_PREFIX:  # the run shares the key; keep those with the rest too
            vocabulary = self._vocabulary
            run = run[[vocabulary.startswith(token, i) for i in run.tolist()]]
        return run

    def _expand(
        self,
        hits: npt.NDArray[np.int64],
        orders: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Occurrences in the vocabulary -> (positions in the text, token order, length)."""
        chunks = np.searchsorted(self._chunk_starts, hits, side="right") - 1
        offsets = hits - self._chunk_starts[chunks]
        first = self._occurrence_starts[chunks]
        repeats = self._occurrence_starts[chunks + 1] - first
        # For hit i: postings[first[i] : first[i] + repeats[i]] + offsets[i], all at once.
        within = np.arange(int(repeats.sum())) - np.repeat(np.cumsum(repeats) - repeats, repeats)
        positions = self._postings[np.repeat(first, repeats) + within] + np.repeat(offsets, repeats)
        return positions, np.repeat(orders, repeats), np.repeat(lengths, repeats)

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
        # An occurrence that starts after every earlier one has ended begins a cluster, and
        # is a match; one that starts earlier overlaps and joins the cluster. Inside a cluster
        # the regex's leftmost-first walk decides (it never crosses clusters), so the
        # sequential walk only visits clusters of two or more (tools are joined by a newline,
        # so they never share a cluster).
        overlapping = np.zeros(positions.size, dtype=bool)
        overlapping[1:] = positions[1:] < np.maximum.accumulate(ends[:-1])
        taken = ~overlapping
        in_cluster = overlapping.copy()
        in_cluster[:-1] |= overlapping[1:]
        walked = np.flatnonzero(in_cluster)
        cursor = 0
        for index, start, end, inside in zip(
            walked.tolist(),
            positions[walked].tolist(),
            ends[walked].tolist(),
            overlapping[walked].tolist(),
            strict=True,
        ):
            if not inside or start >= cursor:
                taken[index] = True
                cursor = end
        unique_tools, first_index = np.unique(tools, return_index=True)
        counts = np.bincount(tools[taken], minlength=int(unique_tools.max()) + 1)[unique_tools]
        firsts = positions[first_index] - self._starts[unique_tools]
        return unique_tools, counts, firsts


class _Field:
    """One field of every tool, lower-cased and indexed (:class:`_Blob`), so a query is a few
    binary searches instead of a regular expression run per tool. ASCII texts are kept apart
    from the others: their suffixes sort as bytes, 4 times smaller than Unicode strings.

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
            lowered.append(low.replace("\n", " ").translate(_FOLD))
        self._blobs = [_Blob(*group) for group in groups.values() if group[0]]

    def matches(self, tokens: Sequence[str]) -> _Matches:
        """(tools, number of matches, offset of the first match), for the tools that match."""
        folded = [token.translate(_FOLD) for token in tokens]
        parts = [blob.matches(folded) for blob in self._blobs]
        matched: list[tuple[int, int, int]] = []
        if self._irregular:
            pattern = _compiled(_alternation(list(tokens)))
            found = [(t, *_regex_matches(pattern, self.texts[t])) for t in self._irregular]
            matched = [item for item in found if item[1]]
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
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)  # never fails: the tokens are escaped


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
        self,
        *,
        cjk: CjkMode = "jieba",
        default_max_results: int = DEFAULT_MAX_RESULTS,
        co_usage: ToolCoUsage | None = None,
    ) -> None:
        super().__init__(default_max_results=default_max_results, co_usage=co_usage)
        check_cjk_mode(cjk)
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
        size = len(snapshot.names.texts)
        scores = np.zeros(size, dtype=np.float64)
        for field, (per_match, bonus) in (
            (snapshot.names, (2.0, 1.0)),
            (snapshot.descriptions, (1.0, 0.5)),
        ):
            if tokens:
                tools, counts, firsts = field.matches(tokens)
            else:  # ".*": every text matches; rare enough for the regex itself
                found = [_regex_matches(_compiled(MATCH_ALL), text) for text in field.texts]
                tools = np.arange(size, dtype=np.int64)
                counts = np.array([count for count, _ in found], dtype=np.int64)
                firsts = np.array([first for _, first in found], dtype=np.int64)
            scores[tools] += per_match * counts + bonus / (1.0 + 0.1 * firsts)
        ranked = top_positions(scores, limit, allowed)
        return [(position, score) for position, score in ranked if score > 0]
