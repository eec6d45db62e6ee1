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
    """The matrix in two int8 layers per row (its rounding, then the rounding of what that
    left over, each with its own scale) and an ONNX Runtime session multiplying them by a
    query in two uint8 layers alike (``MatMulInteger``: exact integer products, one thread,
    the rows packed once when the session is made). Two layers are about 14 bits: the bound
    below is then about 0.0003, where one layer's was 0.02 and left thousands of rows to
    rescore at 20,000 tools (E5's cosines crowd in a narrow band).

    Rows ``m = sM + tE + e`` (``M``, ``E`` int8, ``s``, ``t`` the row's scales, ``e`` what is
    left, known), query ``q = a(Q - z) + b(D - y) + d`` (``Q``, ``D`` uint8 with zero points
    ``z``, ``y``; ``d`` known). With ``m' = sM + tE`` and ``q' = q - d``:
    ``m.q = sa M.(Q-z) + sb M.(D-y) + ta E.(Q-z) + tb E.(D-y) + m'.d + e.q``; the first three
    are computed exactly, and by Cauchy-Schwarz the rest is at most
    ``|tE| |b(D-y)| + |m'| |d| + |e| |q|``, every norm known: the bound follows from the
    arithmetic, it is not a measured margin."""

    __slots__ = ("_bounds", "_scales", "_session", "_sums", "_weights")

    def __init__(self, matrix: Floats) -> None:
        wide = matrix.astype(np.float64)
        first, first_scales = _rounded(wide)
        rest = wide - first * first_scales[:, None]
        second, second_scales = _rounded(rest)
        restored = first * first_scales[:, None] + second * second_scales[:, None]
        self._scales = (first_scales, second_scales)
        self._sums = (first.sum(axis=1, dtype=np.int64), second.sum(axis=1, dtype=np.int64))
        # Per row: |tE|, |m'|, |e|.
        self._bounds = (
            np.linalg.norm(second * second_scales[:, None], axis=1),
            np.linalg.norm(restored, axis=1),
            np.linalg.norm(wide - restored, axis=1),
        )
        # [dimensions, rows] each: a query [k, dimensions] times these is every row's product.
        self._session, self._weights = _int8_session(
            np.ascontiguousarray(first.T), np.ascontiguousarray(second.T)
        )

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
        query = vector.astype(np.float64)
        high, high_step, high_zero = _uint8(query)
        rest = query - high_step * (high.astype(np.float64) - high_zero)
        low, low_step, low_zero = _uint8(rest)
        left = rest - low_step * (low.astype(np.float64) - low_zero)
        both, first_high = _products(self._session, np.stack([high, low]), high)
        first_sums, second_sums = self._sums
        first_scales, second_scales = self._scales
        approximate = first_scales * (
            high_step * (both[0] - high_zero * first_sums)
            + low_step * (both[1] - low_zero * first_sums)
        ) + second_scales * (high_step * (first_high - high_zero * second_sums))
        second_norms, restored_norms, left_norms = self._bounds
        low_norm = float(np.linalg.norm(low_step * (low.astype(np.float64) - low_zero)))
        bound = (
            second_norms * low_norm
            + restored_norms * float(np.linalg.norm(left))
            + left_norms * float(np.linalg.norm(query))
        )
        return approximate, bound + _FLOAT_MARGIN


def _rounded(rows: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float64]]:
    """Each row rounded to int8 with its own scale (its largest value to 127)."""
    scales = np.maximum(np.abs(rows).max(axis=1), 1e-30) / 127
    return np.round(rows / scales[:, None]).astype(np.int8), scales


def _uint8(vector: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.uint8], float, int]:
    """``vector`` as ``step x (values - zero)``, values in uint8 (ONNX's
    ``DynamicQuantizeLinear``, done here to know the rounding exactly)."""
    low, high = min(0.0, float(vector.min())), max(0.0, float(vector.max()))
    step = (high - low) / 255 or 1.0  # a zero vector: every value 0, exactly
    zero = round(-low / step)
    return np.clip(np.round(vector / step) + zero, 0, 255).astype(np.uint8), step, zero


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


def _int8_session(
    first: npt.NDArray[np.int8], second: npt.NDArray[np.int8]
) -> tuple[Any, list[Any]]:
    """A one-thread session computing, in integers, ``queries [2, d] x first [d, n]`` and
    ``query [1, d] x second [d, n]``; and the weights' ``OrtValue``s (the session reads their
    arrays: they must outlive it)."""
    import onnxruntime
    from onnx import TensorProto, helper

    dimensions, count = first.shape
    initialisers = []
    for name, columns in (("first", first), ("second", second)):
        weights = TensorProto(name=name, data_type=TensorProto.INT8, dims=columns.shape)
        weights.data_location = TensorProto.EXTERNAL
        location = weights.external_data.add()
        location.key, location.value = "location", "supplied-by-the-session"
        initialisers.append(weights)
    graph = helper.make_graph(
        [
            helper.make_node("MatMulInteger", ["queries", "first"], ["both"]),
            helper.make_node("MatMulInteger", ["query", "second"], ["second_products"]),
        ],
        "int8-cosines",
        [
            helper.make_tensor_value_info("queries", TensorProto.UINT8, [2, dimensions]),
            helper.make_tensor_value_info("query", TensorProto.UINT8, [1, dimensions]),
        ],
        [
            helper.make_tensor_value_info("both", TensorProto.INT32, [2, count]),
            helper.make_tensor_value_info("second_products", TensorProto.INT32, [1, count]),
        ],
        initializer=initialisers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()
    # One thread, never spinning: the products are short, and the cores belong to the next
    # query's embedding.
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    values = [onnxruntime.OrtValue.ortvalue_from_numpy(c) for c in (first, second)]
    options.add_external_initializers(["first", "second"], values)
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session, values


def _products(
    session: Any, queries: npt.NDArray[np.uint8], query: npt.NDArray[np.uint8]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``queries x first`` (two rows) and ``query x second``, without zero points."""
    both, second = session.run(None, {"queries": queries, "query": query[None]})
    return both.astype(np.int64), second[0].astype(np.int64)


@functools.cache
def _exact_int8_kernel() -> bool:
    """Whether this process can use int8 rows: onnxruntime and onnx are installed, and
    ``MatMulInteger`` is exact for the extreme inputs (uint8 255 against int8 127 and -128),
    where a kernel adding two products in 16 bits saturates."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    dimensions = 384
    columns = np.empty((dimensions, 3), dtype=np.int8)
    columns[:, 0], columns[:, 1] = 127, -128
    columns[:, 2] = np.resize(np.array([127, -128], dtype=np.int8), dimensions)
    session, _values = _int8_session(columns, columns)
    queries = np.array([[255] * dimensions, [0] * dimensions], dtype=np.uint8)
    both, second = _products(session, queries, queries[0])
    expected = queries.astype(np.int64) @ columns.astype(np.int64)
    return np.array_equal(both, expected) and np.array_equal(second, expected[0])
