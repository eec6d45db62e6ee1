"""Cost of the tool layer (no model, no manager): one ``FunctionToolCallback`` call, building
callbacks, and repairing foreign schemas.

1. Call path: ``call`` / ``acall`` of a tool with no, three, and nested (model + list)
   parameters, next to the unvalidated baseline ``fn(**json.loads(arguments))``, in µs per
   call. ``acall`` of a sync tool includes the hop to the worker thread (``asyncio.to_thread``).
2. Declaration: building the first ``FunctionToolCallback`` of a function (signature, schema,
   pydantic validator) and ``tool_callbacks(...)`` again for the same functions (what a
   request that attaches tools costs once schemas are cached).
3. ``ensure_valid_input_schema`` over the BFCL v4 + ACEBench raw schemas (7,768), in µs per
   schema.

Medians over ``--repeats`` interleaved runs.

    .venv/bin/python benchmarks/bench_tool_call.py --repeats 7
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tooluse import FunctionToolCallback, tool_callbacks
from tooluse.schema import ensure_valid_input_schema

CORPORA = Path(__file__).resolve().parent / "data" / "schemas"


class Item(BaseModel):
    name: str
    price: float


def no_args() -> str:
    return "ok"


def three_args(city: str, days: int = 1, metric: bool = True) -> str:
    return "ok"


def nested(customer: str, items: list[Item]) -> str:
    return "ok"


async def async_three_args(city: str, days: int = 1, metric: bool = True) -> str:
    return "ok"


CASES: list[tuple[str, Callable[..., Any], str]] = [
    ("no arguments", no_args, ""),
    ("3 arguments", three_args, '{"city": "Paris", "days": 3, "metric": false}'),
    (
        "nested model list",
        nested,
        '{"customer": "c", "items": [{"name": "a", "price": 1.5}, {"name": "b", "price": 2}]}',
    ),
]


def unvalidated(fn: Callable[..., Any], arguments: str) -> object:
    return fn(**json.loads(arguments or "{}"))


Timing = tuple[float, float]  # (wall µs, CPU µs of this process, all threads)


def per_call_us(run: Callable[[], object], iterations: int) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(iterations):
        run()
    return (
        (time.perf_counter() - wall) / iterations * 1e6,
        (time.process_time() - cpu) / iterations * 1e6,
    )


async def per_acall_us(callback: FunctionToolCallback, arguments: str, iterations: int) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(iterations):
        await callback.acall(arguments)
    return (
        (time.perf_counter() - wall) / iterations * 1e6,
        (time.process_time() - cpu) / iterations * 1e6,
    )


def first_build_us() -> Timing:
    def fresh(customer: str, items: list[Item], days: int = 1) -> str:  # a new function object
        return "ok"

    return per_call_us(lambda: FunctionToolCallback(fresh), 1)


def corpus_rows() -> list[Any]:
    rows: list[Any] = []
    for name in ("bfcl-v4", "acebench"):
        with (CORPORA / name / "tools.jsonl").open(encoding="utf-8") as lines:
            rows.extend(json.loads(line).get("parameters") or {} for line in lines)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--iterations", type=int, default=5000)
    options = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, median of "
          f"{options.repeats} runs")  # fmt: skip

    results: dict[str, list[Timing]] = {}

    def record(label: str, value: Timing) -> None:
        results.setdefault(label, []).append(value)

    callbacks = {label: FunctionToolCallback(fn) for label, fn, _ in CASES}
    async_callback = FunctionToolCallback(async_three_args)
    schemas = corpus_rows() if CORPORA.exists() else []
    for _ in range(options.repeats):
        for label, fn, arguments in CASES:
            callback = callbacks[label]
            record(
                f"call, {label}",
                per_call_us(functools.partial(callback.call, arguments), options.iterations),
            )
            record(
                f"baseline fn(**json.loads), {label}",
                per_call_us(functools.partial(unvalidated, fn, arguments), options.iterations),
            )
        args3 = CASES[1][2]
        record(
            "acall, 3 arguments, sync tool (thread hop)",
            asyncio.run(per_acall_us(callbacks["3 arguments"], args3, options.iterations // 5)),
        )
        record(
            "acall, 3 arguments, async tool",
            asyncio.run(per_acall_us(async_callback, args3, options.iterations)),
        )
        builds = [first_build_us() for _ in range(50)]
        record(
            "first FunctionToolCallback of a function",
            (statistics.median(b[0] for b in builds), statistics.median(b[1] for b in builds)),
        )
        record(
            "tool_callbacks(3 functions) again (cached)",
            per_call_us(
                lambda: tool_callbacks(no_args, three_args, nested), options.iterations // 5
            ),
        )
        if schemas:
            wall, cpu = per_call_us(lambda: [ensure_valid_input_schema(s) for s in schemas], 1)
            record(
                f"ensure_valid_input_schema, per schema ({len(schemas)})",
                (wall / len(schemas), cpu / len(schemas)),
            )
    width = max(map(len, results))
    print(f"{'':<{width}}  {'wall µs':>9}  {'CPU µs':>9}")
    for label, values in results.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        print(f"{label:<{width}}  {wall:9.1f}  {cpu:9.1f}")


if __name__ == "__main__":
    main()
