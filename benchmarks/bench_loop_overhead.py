"""Loop overhead of tooluse's ChatClient + ToolCallingAdvisor with a zero-latency model (SPEC 12).

Scenario A: one tool round + answer (2 model calls, 1 tool call).
Scenario B: five rounds of three parallel calls + answer (6 model calls, 15 tool calls).

Everything is on: argument validation (pydantic, against ``add``'s signature), call limits,
the OpenTelemetry hooks (API installed, no SDK configured), the auto-registered tool advisor.
The model is a ``FunctionModel`` whose responses are built once, so the figure is the cost of
the framework. The tool is ``add(a, b)``, plain (run in the thread pool), plain declared
``@tool(inline=True)`` (run on the loop's thread) or ``async``.

    .venv/bin/python benchmarks/bench_loop_overhead.py                # both scenarios, both tools
    .venv/bin/python benchmarks/bench_loop_overhead.py --profile B    # where the time goes

Prints a Markdown table: per run, this process's CPU milliseconds (robust to other jobs on the
machine) and wall milliseconds (what a caller waits), median and deciles.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

from tooluse import AssistantMessage, ChatClient, Prompt, ToolCall, Usage, tool
from tooluse.messages import ChatResponse
from tooluse.testing import FunctionModel, chat_response

SCENARIOS = {"A": (1, 1), "B": (5, 3)}
USAGE = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def add_inline(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def add_async(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def scripted_model(rounds: int, calls: int) -> FunctionModel:
    """Answers from how many assistant turns the conversation already has."""
    script = [
        chat_response(
            tool_calls=[
                ToolCall(id=f"call_{r}_{c}", name="add", arguments=f'{{"a": {r}, "b": {c}}}')
                for c in range(calls)
            ],
            usage=USAGE,
        )
        for r in range(rounds)
    ]
    answer = chat_response("done", usage=USAGE)

    def respond(prompt: Prompt) -> ChatResponse:
        done = sum(1 for m in prompt.messages if isinstance(m, AssistantMessage))
        return script[done] if done < rounds else answer

    return FunctionModel(respond)


def make_run(
    scenario: str, function: Callable[..., Any], *, inline: bool = False
) -> Callable[[], Any]:
    rounds, calls = SCENARIOS[scenario]
    model = scripted_model(rounds, calls)
    client = ChatClient(model, tools=[tool(name="add", inline=inline)(function)])

    async def run() -> None:
        response = await client.prompt("go").acall()
        if response.content() != "done":
            raise SystemExit(f"scenario {scenario}: unexpected answer {response.content()!r}")
        model.requests.clear()  # the double records requests; a real model keeps nothing
        model.responses.clear()

    return run


async def measure(
    run: Callable[[], Any], warmup: int, iterations: int
) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds per run. CPU time is this process's (all its threads), so it
    holds up when other jobs load the machine; wall time does not."""
    for _ in range(warmup):
        await run()
    gc.collect()
    wall, cpu = [], []
    for _ in range(iterations):
        start, start_cpu = time.perf_counter_ns(), time.process_time_ns()
        await run()
        cpu.append((time.process_time_ns() - start_cpu) / 1e6)
        wall.append((time.perf_counter_ns() - start) / 1e6)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--profile", choices=sorted(SCENARIOS), help="profile one scenario")
    args = parser.parse_args()
    if args.profile:
        run = make_run(args.profile, add_async)
        profiler = cProfile.Profile()
        profiler.enable()
        asyncio.run(measure(run, 0, args.iterations))
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return
    print("| scenario | tool | CPU ms median | CPU p10 | wall ms median | wall p10 | wall p90 |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for scenario in SCENARIOS:
        for kind, function in (("async", add_async), ("sync", add), ("sync inline", add_inline)):
            wall, cpu = asyncio.run(
                measure(
                    make_run(scenario, function, inline=kind == "sync inline"),
                    args.warmup,
                    args.iterations,
                )
            )
            wall_deciles = statistics.quantiles(wall, n=10)
            cpu_deciles = statistics.quantiles(cpu, n=10)
            print(
                f"| {scenario} | {kind} | {statistics.median(cpu):.3f} | {cpu_deciles[0]:.3f} "
                f"| {statistics.median(wall):.3f} | {wall_deciles[0]:.3f} "
                f"| {wall_deciles[-1]:.3f} |"
            )


if __name__ == "__main__":
    main()
