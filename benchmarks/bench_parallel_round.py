"""One round of tool calls through ``ToolCallingManager`` (SPEC 12).

1. Parallel round: 8 calls to tools that each wait 100 ms, async (``asyncio.sleep``) and sync
   (``time.sleep`` in the tools' thread pool), declared with ``@tool`` (so arguments are
   validated). Reports the round's wall time and its ratio to running them one after another
   (800 ms): 0.125 would be perfect overlap.
2. Manager overhead: rounds of 1, 3 and 8 calls to no-op callbacks, in CPU µs (this process
   only, robust to other load on the machine) per round and per call, plus wall µs, next to
   the bare ``asyncio`` cost of the same concurrency (awaiting one coroutine, or
   ``asyncio.gather`` of n) so the manager's own share is visible. Spans are on: first
   with no tracer provider (OpenTelemetry API only), then with an SDK provider recording
   every span (``--sdk``).

Scenarios are interleaved over ``--repeats`` rounds and the median is reported, so machine
drift hits every scenario alike.

    .venv/bin/python benchmarks/bench_parallel_round.py --repeats 7 --iterations 2000 --sdk
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence

from tooluse import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    Generation,
    Prompt,
    ToolCall,
    ToolCallback,
    ToolCallingManager,
    ToolContext,
    ToolDefinition,
    ToolMetadata,
    ToolResponseMessage,
    UserMessage,
    tool,
    tool_callbacks,
)

WAIT_SECONDS = 0.1
PARALLEL_CALLS = 8
OVERHEAD_SIZES = (1, 3, 8)


@tool
async def wait_async(index: int) -> str:
    """Wait 100 ms on the event loop."""
    await asyncio.sleep(WAIT_SECONDS)
    return f"done {index}"


@tool
def wait_sync(index: int) -> str:
    """Wait 100 ms in a worker thread."""
    time.sleep(WAIT_SECONDS)
    return f"done {index}"


class NoopTool:
    """A callback that does nothing, so only the manager's work is timed."""

    def __init__(self, name: str) -> None:
        self._definition = ToolDefinition(name=name, description="no-op", input_schema={})
        self._metadata = ToolMetadata()

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def metadata(self) -> ToolMetadata:
        return self._metadata

    def call(self, arguments: str, context: ToolContext | None = None) -> str:
        return "ok"

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str:
        return "ok"


def round_of(name: str, count: int) -> ChatResponse:
    calls = tuple(
        ToolCall(id=f"call_{i}", name=name, arguments=f'{{"index": {i}}}') for i in range(count)
    )
    return ChatResponse(generations=(Generation(message=AssistantMessage(tool_calls=calls)),))


def prompt_for(*tools: ToolCallback) -> Prompt:
    options = ChatOptions(tool_callbacks=tools, tool_context={"user": "bench"})
    return Prompt([UserMessage(text="run the tools")], options)


async def parallel_round_ms(manager: ToolCallingManager, prompt: Prompt, name: str) -> float:
    response = round_of(name, PARALLEL_CALLS)
    start = time.perf_counter()
    result = await manager.aexecute_tool_calls(prompt, response)
    elapsed = time.perf_counter() - start
    last = result.conversation_history[-1]
    assert isinstance(last, ToolResponseMessage), last
    errors = [r.data for r in last.responses if r.is_error]
    assert len(last.responses) == PARALLEL_CALLS and not errors, errors
    return elapsed * 1000


async def per_round_us(
    run: Callable[[], Awaitable[object]], iterations: int
) -> tuple[float, float]:
    """CPU µs and wall µs per round. CPU time (this process only) is what the manager costs
    even when other processes load the machine; wall time is what a caller waits."""
    for _ in range(min(200, iterations)):  # warm-up
        await run()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(iterations):
        await run()
    return (
        (time.process_time() - cpu) / iterations * 1e6,
        (time.perf_counter() - wall) / iterations * 1e6,
    )


async def noop() -> str:
    return "ok"


async def bare_asyncio(count: int) -> object:
    """What the same concurrency costs without the manager."""
    if count == 1:
        return await noop()
    return await asyncio.gather(*[noop() for _ in range(count)])


Overhead = dict[int, tuple[float, float, float]]  # calls -> (manager CPU, wall, bare CPU) µs


async def measure_overhead(repeats: int, iterations: int) -> Overhead:
    manager = ToolCallingManager()
    prompt = prompt_for(NoopTool("noop"))
    samples: dict[int, list[tuple[float, float, float]]] = {n: [] for n in OVERHEAD_SIZES}
    for _ in range(repeats):
        for count in OVERHEAD_SIZES:
            response = round_of("noop", count)
            cpu, wall = await per_round_us(
                functools.partial(manager.aexecute_tool_calls, prompt, response), iterations
            )
            bare_cpu, _ = await per_round_us(functools.partial(bare_asyncio, count), iterations)
            samples[count].append((cpu, wall, bare_cpu))
    return {
        count: (
            statistics.median(s[0] for s in runs),
            statistics.median(s[1] for s in runs),
            statistics.median(s[2] for s in runs),
        )
        for count, runs in samples.items()
    }


def print_overhead(title: str, figures: Overhead) -> None:
    print(f"\n{title}")
    print(
        "| calls/round | CPU µs/round | CPU µs/call | wall µs/round | bare asyncio CPU µs "
        "| manager's own CPU µs/call |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for count, (cpu, wall, bare) in figures.items():
        print(
            f"| {count} | {cpu:.1f} | {cpu / count:.1f} | {wall:.1f} | {bare:.1f} | "
            f"{(cpu - bare) / count:.1f} |"
        )


def install_recording_sdk_provider() -> None:
    """A global SDK tracer provider that records every span and exports it to nowhere (the
    in-memory exporter would keep them all)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class DiscardingExporter(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(DiscardingExporter()))
    trace.set_tracer_provider(provider)


async def parallel_rounds(manager: ToolCallingManager, repeats: int) -> dict[str, list[float]]:
    """Wall ms of each round kind, interleaved over ``repeats``."""
    kinds = {
        "async": (prompt_for(*tool_callbacks(wait_async)), "wait_async"),
        "sync (threads)": (prompt_for(*tool_callbacks(wait_sync)), "wait_sync"),
    }
    walls: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(repeats):
        for kind, (prompt, name) in kinds.items():
            walls[kind].append(await parallel_round_ms(manager, prompt, name))
    return walls


async def main(args: argparse.Namespace) -> None:
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    manager = ToolCallingManager()
    walls = await parallel_rounds(manager, args.repeats)
    sequential_ms = PARALLEL_CALLS * WAIT_SECONDS * 1000
    print(f"\n{PARALLEL_CALLS} calls x {WAIT_SECONDS * 1000:.0f} ms, median of {args.repeats}")
    print("| tools | wall ms (median) | min | max | ratio to sequential 800 ms |")
    print("|---|---:|---:|---:|---:|")
    for kind, samples in walls.items():
        median = statistics.median(samples)
        print(
            f"| {kind} | {median:.1f} | {min(samples):.1f} | {max(samples):.1f} | "
            f"{median / sequential_ms:.3f} |"
        )

    print_overhead(
        "Manager overhead, no-op tools, no tracer provider",
        await measure_overhead(args.repeats, args.iterations),
    )
    if args.sdk:
        install_recording_sdk_provider()
        print_overhead(
            "Manager overhead, no-op tools, SDK provider recording every span",
            await measure_overhead(args.repeats, args.iterations),
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="interleaved repeats (default 7)")
    parser.add_argument(
        "--iterations", type=int, default=2000, help="rounds per overhead sample (default 2000)"
    )
    parser.add_argument(
        "--sdk", action="store_true", help="also measure with an SDK provider recording spans"
    )
    asyncio.run(main(parser.parse_args()))
