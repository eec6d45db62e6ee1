"""The ``EmbeddingModel`` protocol shared by tool search and RAG."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["EmbeddingModel", "QueryBatchEmbeddingModel", "QuerySpanEmbeddingModel", "Vectors"]

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class EmbeddingModel(Protocol):
    """Turns texts into L2-normalised float32 vectors (rows), so a dot product is a cosine.

    Queries and documents are embedded separately because asymmetric models (E5 and most
    retrieval models) prefix them differently.
    """

    @property
    def dimensions(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors: ...

    def embed_query(self, text: str) -> Vectors: ...


@runtime_checkable
class QueryBatchEmbeddingModel(EmbeddingModel, Protocol):
    """An :class:`EmbeddingModel` that also embeds several queries in one call, faster than one
    call each (the bundled E5 runs them on one worker per core, an endpoint takes them in one
    request). :class:`~tooluse.embedding.CachedEmbeddingModel` uses it when the model has it,
    else it embeds the queries one by one."""

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """One row per text, as :meth:`embed_query` of each would give."""
        ...


@runtime_checkable
class QuerySpanEmbeddingModel(EmbeddingModel, Protocol):
    """An :class:`EmbeddingModel` that also embeds parts of a query from one pass of the
    encoder over the whole query ("late chunking", Günther et al. 2024): each part's vector
    is the mean of the last hidden states over its tokens, so the parts cost nothing beyond
    the query's own embedding. The bundled E5 (ONNX engine) has it."""

    def embed_query_spans(self, text: str, spans: Sequence[tuple[int, int]]) -> Vectors | None:
        """``[1 + len(spans), dimensions]``: ``text``'s vector (as :meth:`embed_query` gives
        it), then one per character span ``(start, end)`` of ``text``; None when the model
        cannot read ``text`` in one pass (longer than one window, an engine that gives no
        token states): embed the parts on their own then."""
        ...
