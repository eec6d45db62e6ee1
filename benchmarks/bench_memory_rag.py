"""Memory and RAG figures: SQLite chat-memory latency, vector search latency, reload time,
and ingestion throughput with the bundled model.

    .venv/bin/python benchmarks/bench_memory_rag.py            # everything
    .venv/bin/python benchmarks/bench_memory_rag.py --quick    # smaller sizes

The search figures use random unit vectors and an embedding model that returns a fixed query
vector, so they measure the store (numpy scan, filter, top-k), not the model.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from tooluse.history import repair_tool_pairs
from tooluse.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
from tooluse.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.rag import Document, InMemoryVectorStore, SqliteVectorStore, ingest_directory

DIMENSIONS = 384


class RandomVectors:
    """Unit vectors from a seeded generator; the query vector is fixed."""

    model_id = "random-384"
    dimensions = DIMENSIONS

    def __init__(self) -> None:
        self._rng = np.random.default_rng(7)
        self._query: np.ndarray = self._unit(1)[0]

    def _unit(self, n: int) -> np.ndarray:
        vectors = self._rng.standard_normal((n, DIMENSIONS)).astype(np.float32)
        unit_vectors: np.ndarray = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        return unit_vectors

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._unit(len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self._query


def percentiles(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"p50 {statistics.median(ms):.3f} ms, p99 {p99:.3f} ms"


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def bench_memory(directory: Path, turns: int) -> None:
    with SqliteChatMemoryRepository(directory / "memory.db") as repository:
        memory = MessageWindowChatMemory(max_messages=20, repository=repository)
        counter = iter(range(10**9))

        def add_turn() -> None:
            n = next(counter)
            memory.add("c", [UserMessage(text=f"question {n}"), AssistantMessage(text=f"a {n}")])

        print(f"sqlite memory add (one turn, window 20): {percentiles(timed(add_turn, turns))}")
        reads = timed(lambda: memory.get("c"), turns)
        print(f"sqlite memory get (20 messages):         {percentiles(reads)}")


def bench_repair(calls: int) -> None:
    history: list[Message] = [SystemMessage(text="rules")]
    for n in range(5):  # five turns of question, tool call, result, answer: 21 messages
        call = ToolCall(id=f"c{n}", name="lookup", arguments="{}")
        history += [
            UserMessage(text=f"q{n}"),
            AssistantMessage(tool_calls=(call,)),
            ToolResponseMessage(responses=(ToolResponse(id=call.id, name="lookup", data="x"),)),
            AssistantMessage(text=f"a{n}"),
        ]
    samples = timed(lambda: repair_tool_pairs(history), calls)
    print(f"repair_tool_pairs, well-formed 21-message history: {percentiles(samples)}")


def documents(count: int) -> list[Document]:
    return [
        Document(id=f"d{n}", text=f"document {n}", metadata={"lang": "zh" if n % 4 else "en"})
        for n in range(count)
    ]


def bench_search(directory: Path, sizes: Sequence[int], queries: int) -> None:
    for size in sizes:
        store = InMemoryVectorStore(RandomVectors())
        start = time.perf_counter()
        store.add(documents(size))
        added = time.perf_counter() - start
        search = store.similarity_search
        plain = timed(lambda: search("q", top_k=4), queries)  # noqa: B023 (called right here)
        filtered = timed(lambda: search("q", top_k=4, filter={"lang": "en"}), queries)  # noqa: B023
        print(
            f"search {size:>7} docs: {percentiles(plain)}; with a filter {percentiles(filtered)}"
            f" (add {added:.2f} s)"
        )
    size = sizes[-1]
    path = directory / "vectors.db"
    with SqliteVectorStore(path, RandomVectors()) as on_disk:
        start = time.perf_counter()
        on_disk.add(documents(size))
        print(f"sqlite vector store add {size} docs: {time.perf_counter() - start:.2f} s")
    start = time.perf_counter()
    with SqliteVectorStore(path, RandomVectors()) as reopened:
        count = len(reopened)
    print(f"sqlite vector store reopen + load {count} docs: {time.perf_counter() - start:.3f} s")


def bench_ingest(directory: Path) -> None:
    from tooluse.embedding import E5EmbeddingModel

    corpus = Path(__file__).parents[1] / "tests" / "data" / "rag" / "corpus"
    model = E5EmbeddingModel(threads=1)
    model.embed_query("warm up")
    with SqliteVectorStore(directory / "kb.db", model) as store:
        start = time.perf_counter()
        report = ingest_directory(corpus, store)
        elapsed = time.perf_counter() - start
    print(
        f"ingest tests/data/rag/corpus (bundled E5, 1 thread): {report.chunks_written} chunks "
        f"in {elapsed:.2f} s ({report.chunks_written / elapsed:.1f} chunks/s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        bench_repair(2000 if args.quick else 20000)
        bench_memory(directory, 200 if args.quick else 1000)
        bench_search(directory, [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000], 200)
        bench_ingest(directory)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
