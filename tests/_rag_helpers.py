"""Stand-ins for the RAG tests that are not about quality: a deterministic embedding model and
a retriever that returns fixed documents."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from tooluse.embedding import Vectors
from tooluse.rag import Document, Query

_TOKEN = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")


class HashingEmbeddingModel:
    """Bag of words hashed into ``dimensions`` buckets, L2-normalised: texts sharing words
    are similar, texts sharing none are orthogonal. Counts what it embeds."""

    def __init__(self, dimensions: int = 64, model_id: str = "hashing-64") -> None:
        self._dimensions = dimensions
        self.model_id = model_id
        self.embedded: list[str] = []

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def _vector(self, text: str) -> Vectors:
        vector = np.zeros(self._dimensions, dtype=np.float32)
        for token in _TOKEN.findall(text.lower()):
            bucket = int.from_bytes(hashlib.sha256(token.encode()).digest()[:4], "big")
            vector[bucket % self._dimensions] += 1.0
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.embedded.extend(texts)
        return (
            np.stack([self._vector(t) for t in texts])
            if texts
            else np.empty((0, self._dimensions), np.float32)
        )

    def embed_query(self, text: str) -> Vectors:
        return self._vector(text)


class FixedRetriever:
    def __init__(self, documents: Sequence[Document]) -> None:
        self.documents = list(documents)
        self.queries: list[Query] = []

    def retrieve(self, query: str | Query) -> list[Document]:
        assert isinstance(query, Query)
        self.queries.append(query)
        return self.documents

    async def aretrieve(self, query: str | Query) -> list[Document]:
        return self.retrieve(query)
