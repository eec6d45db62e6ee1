"""The tools nearest a query vector: cosines with an int8 prefilter and exact float32 rescoring.

At 20,000 tools, ``np.vecdot`` over the float32 matrix (20,000 x 384, 30 MB: out of the cache
after each query's embedding) took 1.3 ms at the median, most of a search's time after the
embedding. The same product with the matrix in int8 (one scale per row) on ONNX Runtime's
``MatMulInteger`` reads a quarter of the bytes and takes about 0.2 ms. Its cosines are off by
up to a few thousandths, so it only chooses which rows to rescore: every row whose int8
cosine, widened by a bound on its error, could reach the ``count``-th best is rescored with
the float32 rows, and the result is the exact top ``count`` that ``np.vecdot`` over the whole
matrix gives, with the same scores (``tests/test_search_nearest.py`` checks both).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import numpy.typing as npt

from tooluse.search._sessions import top_positions

__all__ = ["Int8Rows", "Nearest", "nearest"]

Floats = npt.NDArray[np.float32]
Positions = npt.NDArray[np.int64]

# Below this many tools the float32 product is as fast as the int8 one and its bookkeeping
# (at 1,000 tools: 0.07 ms).
MIN_INT8_ROWS = 2048
# Besides the bound on the rounding, the float32 products' own error (384 terms of |x| <= 1:
# below 1e-5): a margin that keeps the choice of rows on the safe side.
_FLOAT_MARGIN = 1e-4


@dataclasses.dataclass(frozen=True, slots=True)
class Nearest:
    """The best rows, best first (ties in row order), and their float32 cosines."""

    positions: Positions
    scores: Floats

    def ranked(self) -> list[tuple[int, float]]:
        return list(zip(self.positions.tolist(), self.scores.tolist(), strict=True))


class Int8Rows:
    """The matrix rounded to int8 with one scale per row, and an ONNX Runtime session that
    multiplies it by a query rounded to uint8 (``MatMulInteger``: exact integer products, one
    thread, the rows packed once when the session is made).

    Error bound per row ``r`` (``m`` its float32 row, ``m'`` the rounded one, ``q`` the query,
    ``q'`` the rounded query): ``m.q - m'.q' = (m - m').q + m'.(q - q')``, so by Cauchy-Schwarz
    ``|m.q - m'.q'| <= |m - m'| |q| + |m'| |q - q'|``. ``|m - m'|`` and ``|m'|`` are known per
    row once the matrix is rounded, ``|q|`` and ``|q - q'|`` per query: the bound follows from
    the arithmetic, it is not a measured margin."""

    __slots__ = ("_errors", "_norms", "_scales", "_session", "_weights")

    def __init__(self, matrix: Floats) -> None:
        scales = np.maximum(np.abs(matrix).max(axis=1), 1e-12).astype(np.float64) / 127
        rounded = np.round(matrix / scales[:, None]).astype(np.int8)
        restored = rounded * scales[:, None]
        self._scales = scales
        self._errors = np.linalg.norm(matrix - restored, axis=1)  # |m - m'| per row
        self._norms = np.linalg.norm(restored, axis=1)  # |m'| per row
        # [dimensions, rows]: the query [1, dimensions] times this is every row's product.
        self._session, self._weights = _int8_session(np.ascontiguousarray(rounded.T))

    @classmethod
    def of(cls, matrix: Floats) -> Int8Rows | None:
        """The int8 rows of ``matrix``, or None where they would not pay (a small catalogue)
        or cannot run: no onnxruntime or onnx (the search extra), or an int8 kernel that is
        not exact on this CPU (one that adds two products in 16 bits, as AVX2's
        ``vpmaddubsw`` does, saturates, which would break the bound)."""
        if len(matrix) < MIN_INT8_ROWS or not _exact_int8_kernel():
            return None
        return cls(matrix)

    def cosines(self, vector: Floats) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Every row's approximate cosine with ``vector``, and a bound on its error."""
        low, high = min(0.0, float(vector.min())), max(0.0, float(vector.max()))
        step = (high - low) / 255 or 1.0  # a zero vector: every product is 0, exactly
        zero = round(-low / step)
        rounded = np.clip(np.round(vector / step) + zero, 0, 255).astype(np.uint8)
        products = _products(self._session, rounded, zero)
        approximate = products * (step * self._scales)
        error = float(np.linalg.norm(vector - step * (rounded.astype(np.float64) - zero)))
        bound = self._errors * float(np.linalg.norm(vector)) + self._norms * error
        return approximate, bound + _FLOAT_MARGIN


def nearest(
    matrix: Floats,
    rows: Int8Rows | None,
    vector: Floats,
    count: int,
    allowed: set[int] | None = None,
) -> Nearest:
    """The ``count`` rows of ``matrix`` (among ``allowed``) with the highest cosine with
    ``vector``, as ``top_positions`` over ``np.vecdot(matrix, vector)`` ranks them, with those
    cosines; with ``rows``, only the rows the int8 product cannot rule out are multiplied in
    float32."""
    if allowed is not None:
        candidates = np.fromiter(sorted(allowed), dtype=np.int64, count=len(allowed))
    else:
        candidates = np.arange(len(matrix), dtype=np.int64)
    if count <= 0 or candidates.size == 0:
        return Nearest(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32))
    selected = matrix if allowed is None else None  # None: rows to gather
    if rows is not None and candidates.size > count:
        approximate, bound = rows.cosines(vector)
        if allowed is not None:
            approximate, bound = approximate[candidates], bound[candidates]
        # The count-th best cosine is at least the count-th best lower bound; a row whose
        # upper bound is below that cannot be among the best.
        lowest = approximate - bound
        floor = np.partition(lowest, lowest.size - count)[lowest.size - count]
        candidates = candidates[approximate + bound >= floor]
        selected = None
    # The same float32 products row by row as over the whole matrix.
    scores: Floats = np.vecdot(matrix[candidates] if selected is None else selected, vector)
    # Candidates are in row order, so ties stay in row order.
    picked = np.array([p for p, _ in top_positions(scores, count)], dtype=np.int64)
    return Nearest(candidates[picked], scores[picked])


def _int8_session(columns: npt.NDArray[np.int8]) -> tuple[Any, Any]:
    """A one-thread session computing ``query [1, d] x columns [d, n]`` in integers, and the
    weights' ``OrtValue`` (the session reads the array: it must outlive the session)."""
    import onnxruntime
    from onnx import TensorProto, helper

    dimensions, count = columns.shape
    weights = TensorProto(name="rows", data_type=TensorProto.INT8, dims=columns.shape)
    weights.data_location = TensorProto.EXTERNAL
    location = weights.external_data.add()
    location.key, location.value = "location", "supplied-by-the-session"
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["query", "rows", "zero"], ["products"])],
        "int8-cosines",
        [
            helper.make_tensor_value_info("query", TensorProto.UINT8, [1, dimensions]),
            helper.make_tensor_value_info("zero", TensorProto.UINT8, []),
        ],
        [helper.make_tensor_value_info("products", TensorProto.INT32, [1, count])],
        initializer=[weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()
    # One thread, never spinning: the product is short, and the cores belong to the next
    # query's embedding.
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    value = onnxruntime.OrtValue.ortvalue_from_numpy(columns)
    options.add_external_initializers(["rows"], [value])
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session, value


def _products(session: Any, query: npt.NDArray[np.uint8], zero: int) -> npt.NDArray[np.int32]:
    (products,) = session.run(None, {"query": query[None], "zero": np.array(zero, np.uint8)})
    row: npt.NDArray[np.int32] = products[0]
    return row


@functools.cache
def _exact_int8_kernel() -> bool:
    """Whether this process can use int8 rows: onnxruntime and onnx are installed, and
    ``MatMulInteger`` is exact for the extreme inputs (uint8 255 and 0 against int8 127 and
    -128, at every zero point), where a kernel adding two products in 16 bits saturates."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    dimensions = 384
    columns = np.empty((dimensions, 3), dtype=np.int8)
    columns[:, 0], columns[:, 1] = 127, -128
    columns[:, 2] = np.resize(np.array([127, -128], dtype=np.int8), dimensions)
    session, _weights = _int8_session(columns)
    wide = columns.astype(np.int64)
    return all(
        np.array_equal(
            _products(session, np.full(dimensions, value, np.uint8), zero),
            (np.full(dimensions, value - zero, np.int64) @ wide),
        )
        for value in (0, 255)
        for zero in (0, 128, 255)
    )
