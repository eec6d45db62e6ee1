"""The numpy vector index against a plain-Python reference, over random operation sequences."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tooluse.rag import Document
from tooluse.rag._index import VectorIndex

DIMENSIONS = 4

_vector = st.lists(st.integers(-3, 3), min_size=DIMENSIONS, max_size=DIMENSIONS).filter(any)
_ids = st.sampled_from([f"d{n}" for n in range(8)])
_operations = st.lists(
    st.one_of(
        st.tuples(st.just("upsert"), st.lists(st.tuples(_ids, _vector, st.booleans()), max_size=4)),
        st.tuples(st.just("remove"), st.lists(_ids, max_size=3)),
    ),
    max_size=12,
)


def unit(values: list[int]) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


@settings(max_examples=200, deadline=None)
@example(  # d1 is orthogonal to the query: its score is 0 up to rounding, the threshold 0
    operations=[("upsert", [("d0", [0, 0, 0, 1], False), ("d1", [1, -2, -1, -1], False)])],
    query=[-2, 1, -1, -3],
    top_k=1,
    threshold=0.0,
    filtered=False,
)
@given(
    operations=_operations,
    query=_vector,
    top_k=st.integers(0, 10),
    threshold=st.sampled_from([0.0, 0.3, 0.9]),
    filtered=st.booleans(),
)
def test_search_matches_a_reference(
    operations: list[tuple[str, Any]],
    query: list[int],
    top_k: int,
    threshold: float,
    filtered: bool,
) -> None:
    index = VectorIndex(DIMENSIONS)
    reference: dict[str, tuple[np.ndarray, bool]] = {}
    for kind, argument in operations:
        if kind == "upsert":  # a batch may repeat an id: the last one wins
            documents = [Document(id=i, text=i, metadata={"flag": f}) for i, _, f in argument]
            vectors = [unit(values) for _, values, _ in argument]
            index.upsert(documents, np.asarray(vectors, np.float32).reshape(-1, DIMENSIONS))
            reference.update({i: (v, f) for (i, _, f), v in zip(argument, vectors, strict=True)})
        else:
            assert index.remove(argument) == len(set(argument) & reference.keys())
            for doc_id in argument:
                reference.pop(doc_id, None)
    assert len(index) == len(reference)
    q = unit(query)
    scores = {i: float(v @ q) for i, (v, flag) in reference.items() if flag or not filtered}
    predicate = (lambda metadata: bool(metadata["flag"])) if filtered else None
    found = index.search(q, top_k, threshold, predicate)
    # A score within rounding of the threshold (orthogonal vectors give 0 +- 1e-8) may fall
    # on either side of it; every other one must be decided as the reference decides.
    near = 1e-6
    expected = sorted((s for s in scores.values() if s >= threshold + near), reverse=True)[:top_k]
    boundary = [s for s in scores.values() if abs(s - threshold) < near]
    assert len(expected) <= len(found) <= min(top_k, len(expected) + len(boundary))
    assert np.allclose([d.score for d in found][: len(expected)], expected, atol=near)
    for document in found[len(expected) :]:
        assert document.score is not None and abs(document.score - threshold) < near
    for document in found:
        assert document.score is not None
        assert abs(scores[document.id] - document.score) < 1e-6


@settings(max_examples=100, deadline=None)
@given(levels=st.lists(st.integers(0, 2), min_size=1, max_size=60), top_k=st.integers(1, 60))
def test_equal_scores_rank_in_stored_order_with_or_without_a_filter(
    levels: list[int], top_k: int
) -> None:
    # Three distinct scores only, so most results tie with others: the order among equals
    # must not depend on top_k or on whether a filter is given.
    vectors = {0: [1.0, 0.0], 1: [0.6, 0.8], 2: [0.0, 1.0]}
    index = VectorIndex(2)
    index.upsert(
        [Document(id=f"d{n:02d}", text="x") for n in range(len(levels))],
        np.asarray([vectors[level] for level in levels], np.float32),
    )
    query = np.asarray([1.0, 0.0], np.float32)
    expected = [f"d{n:02d}" for n in sorted(range(len(levels)), key=lambda n: levels[n])]
    assert [d.id for d in index.search(query, top_k, 0.0, None)] == expected[:top_k]
    everything = index.search(query, top_k, 0.0, lambda metadata: True)
    assert [d.id for d in everything] == expected[:top_k]
