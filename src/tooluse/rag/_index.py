"""The in-process vector index both stores search: a float32 matrix scanned with numpy."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np

from tooluse.embedding import Vectors
from tooluse.rag._document import Document
from tooluse.rag._filter import MetadataPredicate

__all__ = ["VectorIndex", "validate_limits", "validate_search"]


def validate_search(query: str, top_k: int, threshold: float) -> None:
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"similarity_search needs a non-blank query text, got {query!r}")
    validate_limits(top_k, threshold)


def validate_limits(top_k: int, threshold: float) -> None:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ValueError(f"top_k must be an int >= 0, got {top_k!r}")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be between 0.0 and 1.0 (a cosine), got {threshold!r}")


class VectorIndex:
    """Documents and their vectors, with exact (brute-force) cosine search.

    Rows live in a matrix that grows by doubling, so adding a batch costs the batch, and a
    search is one matrix-vector product; that is faster than approximate indexes below a
    few hundred thousand vectors. Not thread-safe: the stores lock around it.
    """

    def __init__(self, dimensions: int) -> None:
        self._dimensions = dimensions
        self._matrix = np.empty((0, dimensions), dtype=np.float32)
        self._documents: list[Document] = []
        self._positions: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._documents)

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def upsert(self, documents: Sequence[Document], vectors: Vectors) -> None:
        if vectors.shape != (len(documents), self._dimensions):
            raise ValueError(
                f"expected {len(documents)} vectors of {self._dimensions} dimensions, "
                f"got an array of shape {vectors.shape}"
            )
        fresh: list[int] = []  # positions in the batch of ids not stored yet (last one wins)
        batch_ids: dict[str, int] = {}
        for offset, document in enumerate(documents):
            position = self._positions.get(document.id)
            if position is not None:
                self._documents[position] = document
                self._matrix[position] = vectors[offset]
            elif document.id in batch_ids:
                fresh[batch_ids[document.id]] = offset
            else:
                batch_ids[document.id] = len(fresh)
                fresh.append(offset)
        if fresh:
            start = len(self._documents)
            self._grow_to(start + len(fresh))
            self._matrix[start : start + len(fresh)] = vectors[fresh]
            for position, offset in enumerate(fresh, start):
                self._documents.append(documents[offset])
                self._positions[documents[offset].id] = position

    def remove(self, ids: Iterable[str]) -> int:
        doomed = {self._positions[i] for i in set(ids) if i in self._positions}
        if not doomed:
            return 0
        keep = [p for p in range(len(self._documents)) if p not in doomed]
        self._matrix = self._matrix[keep]
        self._documents = [self._documents[p] for p in keep]
        self._positions = {d.id: p for p, d in enumerate(self._documents)}
        return len(doomed)

    def matching(self, predicate: MetadataPredicate | None) -> list[Document]:
        if predicate is None:
            return list(self._documents)
        return [d for d in self._documents if predicate(d.metadata)]

    def search(
        self,
        vector: Vectors,
        top_k: int,
        threshold: float,
        predicate: MetadataPredicate | None,
    ) -> list[Document]:
        count = len(self._documents)
        if count == 0 or top_k == 0:
            return []
        scores = self._matrix[:count] @ vector.astype(np.float32, copy=False)
        candidates = np.flatnonzero(scores >= threshold)
        if predicate is None:
            if len(candidates) > top_k:
                # Keep every candidate as good as the k-th best (argpartition would pick some
                # of the tied ones at random), so equal scores rank in stored order, as in
                # the filtered search and whatever top_k is.
                kth = -np.partition(-scores[candidates], top_k - 1)[top_k - 1]
                candidates = candidates[scores[candidates] >= kth]
            ranked = candidates[np.argsort(-scores[candidates], kind="stable")][:top_k]
        else:
            # Best first, checking the filter only until top_k documents pass: a filter that
            # matches a fair share of the documents is evaluated a handful of times, not n.
            order = candidates[np.argsort(-scores[candidates], kind="stable")]
            ranked = np.fromiter(
                itertools.islice(
                    (p for p in order if predicate(self._documents[p].metadata)), top_k
                ),
                dtype=np.intp,
            )
        return [self._documents[p].with_score(float(scores[p])) for p in ranked]

    def _grow_to(self, size: int) -> None:
        capacity = self._matrix.shape[0]
        if size <= capacity:
            return
        grown = np.empty((max(size, 2 * capacity, 16), self._dimensions), dtype=np.float32)
        grown[: len(self._documents)] = self._matrix[: len(self._documents)]
        self._matrix = grown
