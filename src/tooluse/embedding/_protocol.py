"""The ``EmbeddingModel`` protocol shared by tool search and RAG."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["EmbeddingModel", "Vectors"]

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
