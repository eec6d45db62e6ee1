"""The tools nearest a query vector: cosines with an int8 prefilter and exact float32 rescoring.

At 20,000 tools, ``np.vecdot`` over the float32 matrix (20,000 x 384, 30 MB: out of the cache
after each query's embedding) took 1.3 ms at the median, most of a search's time after the
embedding. The same products with the matrix in int8 on ONNX Runtime's ``MatMulInteger`` read
half the bytes or less. Their cosines are approximate, so they only choose which rows to
rescore: every row whose approximate cosine, widened by a bound on its error, could reach the
``count``-th best is rescored with the float32 rows, and the result is the exact top ``count``
that ``np.vecdot`` over the whole matrix gives, with the same scores
(``tests/test_search_nearest.py`` checks both).
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
_BLOCK = 4096  # rows rounded at a time
# Besides the bound on the rounding, float32's own: the products' (384 terms of |x| <= 1:
# below 1e-5) and the approximate cosines' (a few 1e-7): a margin on the safe side.
_FLOAT_MARGIN = 1e-4
_ZERO = 128  # uint8 zero point of the query's layers: they are rounded symmetrically


@dataclasses.dataclass(frozen=True, slots=True)
class Nearest:
    """The best rows, best first (ties in row order), and their float32 cosines."""

    positions: Positions
    scores: Floats

    def ranked(self) -> list[tuple[int, float]]:
        return list(zip(self.positions.tolist(), self.scores.tolist(), strict=True))


class Int8Rows:
    """The matrix rounded to int8 with one scale per row, and an ONNX Runtime session that
    multiplies it by the query in two uint8 layers (its rounding, then the rounding of what
    that left over) and sums the scaled products into approximate cosines
    (``MatMulInteger``: exact integer products; one thread; the rows packed once).

    The products are bound by memory, not arithmetic: over 20,000 rows not in the cache, one
    int8 layer (7.7 MB) took 0.6 ms where float32's 30 MB took 1.4 ms, and a second int8
    layer for the rows (a bound 30 times smaller) cost as much as float32. The query's second
    layer is free (the same pass over the rows) and halves the bound.

    Rows ``m = sM + e`` (``M`` int8, ``s`` the row's scale, ``e`` what is left), query
    ``q = aQ + bD + d`` (``Q``, ``D`` uint8 less 128, ``d`` what is left). With ``m' = sM``:
    ``m.q = sa M.Q + sb M.D + m'.d + e.q``; the session computes the first two, and by
    Cauchy-Schwarz the rest is at most ``|m'| |d| + |e| |q|`` (the rows' norms at their
    largest): the bound follows from the arithmetic, it is not a measured margin."""

    __slots__ = ("_norms", "_session", "_weights")

    def __init__(self, matrix: Floats) -> None:
        count, dimensions = matrix.shape
        # [dimensions, rows]: a query [k, dimensions] times this is every row's product.
        layer = np.empty((dimensions, count), dtype=np.int8)
        scales = np.empty(count, dtype=np.float32)
        norms = np.zeros(2)  # the largest |m'| and |e|
        # In blocks of rows: the float64 work arrays stay small (a few MB, not 60 at 20,000).
        for start in range(0, count, _BLOCK):
            block = slice(start, start + _BLOCK)
            wide = matrix[block].astype(np.float64)
            rounded, row_scales = _rounded(wide)
            scales[block] = row_scales  # as the session scales, in float32
            restored = rounded * row_scales[:, None]
            layer[:, block] = rounded.T
            norms = np.maximum(
                norms,
                [
                    np.linalg.norm(restored, axis=1).max(),
                    np.linalg.norm(wide - restored, axis=1).max(),
                ],
            )
        self._norms = norms
        self._session, values = _int8_session(layer, scales)
        self._weights = (layer, scales, values)  # the session reads these arrays

    @classmethod
    def of(cls, matrix: Floats) -> Int8Rows | None:
        """The int8 rows of ``matrix``, or None where they would not pay (a small catalogue)
        or cannot run: no onnxruntime or onnx (the search extra), or an int8 kernel that is
        not exact on this CPU (one that adds two products in 16 bits, as AVX2's
        ``vpmaddubsw`` does, saturates, which would break the bound)."""
        if len(matrix) < MIN_INT8_ROWS or not _exact_int8_kernel():
            return None
        return cls(matrix)

    def cosines(self, vector: Floats) -> tuple[Floats, float]:
        """Every row's approximate cosine with ``vector``, and a bound on their errors."""
        query = vector.astype(np.float64)
        high, high_step = _uint8(query)
        rest = query - high_step * (high.astype(np.float64) - _ZERO)
        low, low_step = _uint8(rest)
        left = rest - low_step * (low.astype(np.float64) - _ZERO)
        (approximate,) = self._session.run(
            None,
            {
                "queries": np.stack([high, low]),
                "steps": np.array([[high_step], [low_step]], dtype=np.float32),
            },
        )
        restored, residual = self._norms
        bound = restored * float(np.linalg.norm(left)) + residual * float(np.linalg.norm(query))
        cosines: Floats = approximate[0]
        return cosines, bound + _FLOAT_MARGIN


def _rounded(rows: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float64]]:
    """Each row rounded to int8 with its own scale (its largest value to 127), and the scales
    as float32 will hold them."""
    scales = (np.maximum(np.abs(rows).max(axis=1), 1e-30) / 127).astype(np.float32)
    wide = scales.astype(np.float64)
    return np.clip(np.round(rows / wide[:, None]), -127, 127).astype(np.int8), wide


def _uint8(vector: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.uint8], float]:
    """``vector`` as ``step x (values - 128)``, values in uint8 from 1 to 255; the step as
    float32 holds it."""
    step = float(np.float32(max(float(np.abs(vector).max()), 1e-30) / 127))
    values = np.clip(np.round(vector / step), -127, 127) + _ZERO
    return values.astype(np.uint8), step


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
            approximate = approximate[candidates]
        # The count-th best cosine is at least the count-th best approximate one less the
        # bound; a row whose approximate cosine is below that less the bound again cannot be
        # among the best.
        floor = np.partition(approximate, approximate.size - count)[approximate.size - count]
        candidates = candidates[approximate >= floor - 2 * bound]
        selected = None
    # The same float32 products row by row as over the whole matrix.
    scores: Floats = np.vecdot(matrix[candidates] if selected is None else selected, vector)
    # Candidates are in row order, so ties stay in row order.
    picked = np.array([p for p, _ in top_positions(scores, count)], dtype=np.int64)
    return Nearest(candidates[picked], scores[picked])


def _int8_session(layer: npt.NDArray[np.int8], scales: Floats) -> tuple[Any, list[Any]]:
    """A one-thread session: ``queries`` (uint8 [2, d], zero point 128) and their ``steps``
    ([2, 1]) to ``scales x (steps[0] x queries[0].layer + steps[1] x queries[1].layer)``
    (float32 [1, n]); and the weights' ``OrtValue``s (the session reads their arrays: they
    must outlive it)."""
    import onnxruntime
    from onnx import TensorProto, helper

    dimensions, count = layer.shape
    arrays: dict[str, npt.NDArray[Any]] = {"layer": layer, "scales": scales}
    initialisers = []
    for name, array in arrays.items():
        kind = TensorProto.INT8 if array.dtype == np.int8 else TensorProto.FLOAT
        tensor = TensorProto(name=name, data_type=kind, dims=array.shape)
        tensor.data_location = TensorProto.EXTERNAL
        location = tensor.external_data.add()
        location.key, location.value = "location", "supplied-by-the-session"
        initialisers.append(tensor)
    initialisers.append(helper.make_tensor("zero", TensorProto.UINT8, [], [_ZERO]))
    initialisers.append(helper.make_tensor("first_axis", TensorProto.INT64, [1], [0]))
    nodes = [
        helper.make_node("MatMulInteger", ["queries", "layer", "zero"], ["products"]),
        helper.make_node("Cast", ["products"], ["floats"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["floats", "steps"], ["scaled"]),
        helper.make_node("ReduceSum", ["scaled", "first_axis"], ["summed"], keepdims=1),
        helper.make_node("Mul", ["summed", "scales"], ["cosines"]),
    ]
    graph = helper.make_graph(
        nodes,
        "int8-cosines",
        [
            helper.make_tensor_value_info("queries", TensorProto.UINT8, [2, dimensions]),
            helper.make_tensor_value_info("steps", TensorProto.FLOAT, [2, 1]),
        ],
        [helper.make_tensor_value_info("cosines", TensorProto.FLOAT, [1, count])],
        initializer=initialisers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()
    # One thread, never spinning: the product is short, and the cores belong to the next
    # query's embedding.
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    values = [onnxruntime.OrtValue.ortvalue_from_numpy(a) for a in arrays.values()]
    options.add_external_initializers(list(arrays), values)
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session, values


@functools.cache
def _exact_int8_kernel() -> bool:
    """Whether this process can use int8 rows: onnxruntime and onnx are installed, and the
    int8 products are exact where a kernel adding two products in 16 bits saturates (uint8
    255 and 1 against int8 127 and -127 in every pair: rows and queries of equal values)."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    dimensions = 384
    signs = np.array([1.0, -1.0])
    rows = np.stack(
        [np.full(dimensions, 1.0), np.full(dimensions, -1.0), np.resize(signs, dimensions)]
    )
    rows = (rows / np.sqrt(dimensions)).astype(np.float32)
    probe = Int8Rows(rows)
    for query in rows:
        approximate, bound = probe.cosines(query)
        if not np.all(np.abs(approximate - rows.astype(np.float64) @ query) <= bound):
            return False
    return True
