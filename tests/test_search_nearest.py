"""The int8 first pass of the vector side: the same top tools and cosines as float32 alone."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from tooluse.search._nearest import MIN_INT8_ROWS, Int8Rows, _exact_int8_kernel, nearest
from tooluse.search._sessions import top_positions

pytestmark = pytest.mark.skipif(
    not _exact_int8_kernel(), reason="needs onnxruntime with an exact int8 kernel"
)

DIMENSIONS = 384


def _unit(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    rows = rows / np.linalg.norm(rows, axis=-1, keepdims=True)
    return rows.astype(np.float32)


def _catalogue(rng: np.random.Generator, size: int) -> npt.NDArray[np.float32]:
    """Rows like a text model's: a shared direction (cosines crowd in a narrow band), a few
    topics, and near-duplicates closer than the int8 layers can tell apart."""
    common = rng.standard_normal(DIMENSIONS)
    topics = rng.standard_normal((20, DIMENSIONS))
    rows = (
        3 * common
        + topics[rng.integers(0, 20, size)]
        + 0.8 * rng.standard_normal((size, DIMENSIONS))
    )
    twins = rng.integers(0, size, size // 10)
    rows[-twins.size :] = rows[twins] + 1e-4 * rng.standard_normal((twins.size, DIMENSIONS))
    rows[-twins.size - 5 : -twins.size] = rows[0]  # exact ties
    return _unit(rows)


@pytest.fixture(scope="module")
def catalogue() -> npt.NDArray[np.float32]:
    return _catalogue(np.random.default_rng(25), 6000)


@pytest.fixture(scope="module")
def rows(catalogue: npt.NDArray[np.float32]) -> Int8Rows:
    found = Int8Rows.of(catalogue)
    assert found is not None
    return found


def _queries(catalogue: npt.NDArray[np.float32], count: int) -> list[npt.NDArray[np.float32]]:
    rng = np.random.default_rng(7)
    picked = catalogue[rng.integers(0, len(catalogue), count)].astype(np.float64)
    return list(_unit(picked + 0.05 * rng.standard_normal(picked.shape)))


def test_the_int8_bound_holds_for_every_row_and_is_small(
    catalogue: npt.NDArray[np.float32], rows: Int8Rows
) -> None:
    for query in _queries(catalogue, 20):
        approximate, bound = rows.cosines(query)
        exact = np.vecdot(catalogue.astype(np.float64), query.astype(np.float64))
        assert np.all(np.abs(approximate - exact) <= bound)
        assert bound < 0.03  # tight enough to rule out most rows


@pytest.mark.parametrize("count", [1, 10, 100, 400])
def test_nearest_is_the_float32_top_with_its_scores(
    catalogue: npt.NDArray[np.float32], rows: Int8Rows, count: int
) -> None:
    reordered = 0
    for query in _queries(catalogue, 30):
        exact = np.vecdot(catalogue, query)
        expected = top_positions(exact, count)
        found = nearest(catalogue, rows, query, count)
        assert found.ranked() == expected
        approximate, _ = rows.cosines(query)
        reordered += [p for p, _ in top_positions(approximate, count)] != [p for p, _ in expected]
    # The int8 cosines alone rank some of these differently: the rescoring is what fixes it.
    assert reordered > 0


def test_nearest_within_allowed_positions(
    catalogue: npt.NDArray[np.float32], rows: Int8Rows
) -> None:
    rng = np.random.default_rng(3)
    for query, share in zip(_queries(catalogue, 12), [0.01, 0.3, 0.9] * 4, strict=True):
        allowed = set(
            rng.choice(len(catalogue), int(share * len(catalogue)), replace=False).tolist()
        )
        expected = top_positions(np.vecdot(catalogue, query), 50, allowed)
        assert nearest(catalogue, rows, query, 50, allowed).ranked() == expected


def test_a_small_catalogue_has_no_int8_rows_and_is_exact_all_the_same() -> None:
    small = _catalogue(np.random.default_rng(1), MIN_INT8_ROWS - 1)
    assert Int8Rows.of(small) is None
    query = small[3]
    assert nearest(small, None, query, 20).ranked() == top_positions(np.vecdot(small, query), 20)
    assert nearest(small, None, query, 0).ranked() == []
    assert nearest(small, None, query, 5, set()).ranked() == []
