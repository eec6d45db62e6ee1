"""``HybridToolIndex``: BM25 and vector rankings fused by weighted reciprocal rank."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tooluse.embedding import EmbeddingModel
from tooluse.search._bm25 import BM25ToolIndex, top_positions
from tooluse.search._sessions import DEFAULT_MAX_RESULTS, SessionToolIndex
from tooluse.search._types import ToolReference
from tooluse.search._vector import VectorToolIndex

__all__ = ["HybridToolIndex"]


@dataclasses.dataclass(frozen=True, slots=True)
class _HybridSnapshot:
    lexical: Any
    semantic: Any


class HybridToolIndex(SessionToolIndex[_HybridSnapshot]):
    """The default index: a BM25 ranking and an embedding ranking, fused.

    Each ranking contributes ``weight / (rrf_k + rank)`` for the tools in its top
    ``candidates``; the fused score orders the result. Lexical search finds exact names and
    rare terms, embeddings find paraphrases and other languages. The defaults (BM25 weight 1,
    vector weight 0.6, ``rrf_k`` 5: a small k trusts the top ranks of each side) were tuned on
    the dev sets bfcl-v4 and ACEBench en/zh (see ``docs/benchmarks.md``).
    """

    def __init__(
        self,
        embedding_model: EmbeddingModel | None = None,
        *,
        bm25: BM25ToolIndex | None = None,
        vector: VectorToolIndex | None = None,
        bm25_weight: float = 1.0,
        vector_weight: float = 0.6,
        rrf_k: float = 5.0,
        candidates: int = 100,
        default_max_results: int = DEFAULT_MAX_RESULTS,
    ) -> None:
        super().__init__(default_max_results=default_max_results)
        if vector is not None and embedding_model is not None:
            raise ValueError("pass either embedding_model or vector, not both")
        if bm25_weight < 0 or vector_weight < 0 or bm25_weight + vector_weight == 0:
            raise ValueError(
                f"weights must be >= 0 and not both 0, got bm25_weight={bm25_weight}, "
                f"vector_weight={vector_weight}"
            )
        if rrf_k < 0:
            raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")
        if candidates < 1:
            raise ValueError(f"candidates must be at least 1, got {candidates}")
        self._bm25 = bm25 if bm25 is not None else BM25ToolIndex()
        self._vector = vector if vector is not None else VectorToolIndex(embedding_model)
        self._bm25_weight = bm25_weight
        self._vector_weight = vector_weight
        self._rrf_k = rrf_k
        self._candidates = candidates

    def _build(self, references: Sequence[ToolReference]) -> _HybridSnapshot:
        return _HybridSnapshot(self._bm25._build(references), self._vector._build(references))

    def _rank(
        self, snapshot: _HybridSnapshot, query: str, limit: int, allowed: set[int] | None
    ) -> list[tuple[int, float]]:
        lexical = self._bm25.scores(snapshot.lexical, query)
        semantic = self._vector.similarities(snapshot.semantic, query)
        fused = np.zeros(lexical.size, dtype=np.float32)
        depth = max(self._candidates, limit)
        self._add_ranks(fused, lexical, depth, self._bm25_weight, positive_only=True)
        self._add_ranks(fused, semantic, depth, self._vector_weight, positive_only=False)
        if allowed is not None:
            mask = np.zeros(fused.size, dtype=bool)
            mask[list(allowed)] = True
            fused[~mask] = 0.0
        return [(p, s) for p, s in top_positions(fused, limit) if s > 0.0]

    def _add_ranks(
        self,
        fused: npt.NDArray[np.float32],
        scores: npt.NDArray[np.float32],
        depth: int,
        weight: float,
        *,
        positive_only: bool,
    ) -> None:
        if weight == 0:
            return
        ranked = top_positions(scores, depth)
        if positive_only:
            ranked = [(p, s) for p, s in ranked if s > 0.0]
        for rank, (position, _) in enumerate(ranked, 1):
            fused[position] += weight / (self._rrf_k + rank)
