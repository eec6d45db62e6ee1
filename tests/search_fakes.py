"""A tiny deterministic embedding model for search tests where the real one is not the point."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from tooluse.embedding import Vectors
from tooluse.search._text import words


class BagOfWordsModel:
    """Each word hashes to one of 256 dimensions; a text is its normalised word histogram.
    Synonyms listed in ``aliases`` share a dimension, to stand in for semantic similarity."""

    model_id = "test/bag-of-words"
    dimensions = 256

    def __init__(self, aliases: dict[str, str] | None = None) -> None:
        self.aliases = aliases or {}
        self.embedded: list[str] = []

    def _vector(self, text: str) -> Vectors:
        vector = np.zeros(self.dimensions, dtype=np.float32)
        for word in words(text):
            word = self.aliases.get(word, word)
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimensions] += 1.0
        norm = np.linalg.norm(vector)
        if norm == 0:
            vector[0] = 1.0
            return vector
        return vector / norm

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.embedded.extend(texts)
        return np.stack([self._vector(t) for t in texts]) if texts else np.empty((0, 256))

    def embed_query(self, text: str) -> Vectors:
        return self._vector(text)


class RecordingModel(BagOfWordsModel):
    """A :class:`BagOfWordsModel` that remembers the texts it is asked to embed as queries,
    one by one (``embed_query``)."""

    def __init__(self, aliases: dict[str, str] | None = None) -> None:
        super().__init__(aliases)
        self.queries: list[str] = []

    def embed_query(self, text: str) -> Vectors:
        self.queries.append(text)
        return super().embed_query(text)
