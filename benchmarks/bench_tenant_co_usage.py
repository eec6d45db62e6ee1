"""What the service's per-tenant tool co-usage costs: learning a tenant's usage from the audit
log at its first turn on a worker (N records read, ms), counting a finished turn (observe,
µs) and choosing a search's usage (µs).

    .venv/bin/python benchmarks/bench_tenant_co_usage.py                 # 1k, 10k records
    .venv/bin/python benchmarks/bench_tenant_co_usage.py --records 1000 10000 --others 100000

The audit log is a SQLite file holding, per size N, N calls of the tenant measured (turns of
2 to 4 tools out of 200, in conversations over the last 30 days, each turn after a
``toolSearchTool`` call, which is not learned) and ``--others`` calls of other tenants.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

from tooluse.calling import AuditRecord, Caller, SqliteAuditLog
from tooluse.service._co_usage import TenantCoUsage

DAY = 24 * 3600.0


def _records(tenant: str, calls: int, now: float, rng: random.Random) -> list[AuditRecord]:
    records: list[AuditRecord] = []
    while len(records) < calls:
        at = now - rng.uniform(0, 29 * DAY)
        conversation = f"{tenant}-{rng.randrange(calls // 10 + 1)}"
        turn = ["toolSearchTool", *(f"tool_{rng.randrange(200)}" for _ in range(rng.randint(2, 4)))]
        for offset, tool in enumerate(turn):
            records.append(
                AuditRecord(
                    at=at + offset, tool=tool, call_id=f"c{len(records)}", arguments="{}",
                    outcome="ran", result="x" * 400, is_error=False, latency_ms=1.0,
                    approval="not needed", approved_by=None, user="u", tenant=tenant,
                    conversation=conversation,
                )
            )  # fmt: skip
    return records


async def _fill(log: SqliteAuditLog, records: list[AuditRecord]) -> None:
    for start in range(0, len(records), 500):
        await log.record(records[start : start + 500])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--others", type=int, default=50000, help="other tenants' calls")
    parser.add_argument("--repeats", type=int, default=7, help="first uses timed; median")
    args = parser.parse_args()
    rng = random.Random(25)
    now = time.time()
    print("| tenant's records | others' | learned turns | first use ms | min ms | CPU ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as directory:
        log = SqliteAuditLog(Path(directory) / "audit.db")
        asyncio.run(_fill(log, _records("others", args.others, now, rng)))
        for number, size in enumerate(args.records):
            tenant = f"tenant-{number}"
            asyncio.run(_fill(log, _records(tenant, size, now, rng)))
            timings, cpu, turns = [], [], 0
            for _ in range(args.repeats):
                usages = TenantCoUsage(log, max_records=size)  # a worker's first turn of it
                started, cpu_started = time.perf_counter(), time.process_time()
                usages.learn(tenant)
                timings.append((time.perf_counter() - started) * 1000)
                cpu.append((time.process_time() - cpu_started) * 1000)
                learned = usages.usage_of(Caller(tenant_id=tenant))
                assert learned is not None
                turns = learned.turns
            print(
                f"| {size:,} | {args.others:,} | {turns:,} | {statistics.median(timings):.1f} "
                f"| {min(timings):.1f} | {statistics.median(cpu):.1f} |"
            )
        usages = TenantCoUsage(log)
        usages.learn("tenant-0")
        caller = Caller(tenant_id="tenant-0")
        made = [[f"tool_{rng.randrange(200)}" for _ in range(3)] for _ in range(10000)]
        started = time.process_time()
        for turn in made:
            usages.observe("tenant-0", turn)
        observe = (time.process_time() - started) / len(made) * 1e6
        started = time.process_time()
        for _ in range(100000):
            usages.usage_of(caller)
        choose = (time.process_time() - started) / 100000 * 1e6
        log.close()
    print(
        f"\nCPU: observe (a turn of 3 tools) {observe:.1f} µs; a search's usage_of {choose:.2f} µs"
    )


if __name__ == "__main__":
    main()
