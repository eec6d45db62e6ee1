"""The task, the timing and the report that every framework script in this folder shares.

Standard library only: the scripts run under two interpreters (ours in ``/work/main/.venv``,
the peers in their own venv), and each imports this module from its own folder.

The task: a tool ``add(a: int, b: int) -> int`` and a scripted model with zero latency that, in
scenario A, asks for one call and then answers; in scenario B, asks for three parallel calls in
each of five rounds and then answers. The model decides from the conversation it is sent (how
many of its own tool-call turns are already in the history), so each framework must really carry
the history through its loop. The arguments are JSON text, as a provider sends them; frameworks
whose model interface takes parsed arguments get them parsed by the scripted model, as their
provider adapters do.

``--tool async`` declares ``add`` as ``async def`` instead of a plain ``def`` (which most
frameworks, ours included, run in a worker thread): that separates the loop's own cost from the
cost of the thread hop.

A third scenario, ``probe``, is not timed: the model sends ``{"a": "x", "b": 1}`` once and then
answers, and the script reports whether the tool function ever received the string, i.e.
whether the framework validates arguments against the tool's signature.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import gc
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

FINAL_ANSWER = "done"
TOOL_NAME = "add"
PROBE_ARGUMENTS = '{"a": "x", "b": 1}'


@dataclasses.dataclass(frozen=True)
class ToolRequest:
    """One tool call the scripted model emits: provider-style id and JSON argument text."""

    call_id: str
    arguments: str

    def parsed_arguments(self) -> dict[str, object]:
        parsed: dict[str, object] = json.loads(self.arguments)
        return parsed


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    rounds: int
    calls_per_round: int
    timed: bool = True

    @property
    def total_calls(self) -> int:
        return self.rounds * self.calls_per_round

    def script(self) -> tuple[tuple[ToolRequest, ...], ...]:
        """The tool calls of each round, built once so the model itself costs (almost) nothing."""
        if not self.timed:
            return ((ToolRequest("call_probe", PROBE_ARGUMENTS),),)
        return tuple(
            tuple(
                ToolRequest(f"call_{r}_{c}", json.dumps({"a": r, "b": c}))
                for c in range(self.calls_per_round)
            )
            for r in range(self.rounds)
        )


SCENARIOS: dict[str, Scenario] = {
    "A": Scenario("A", rounds=1, calls_per_round=1),
    "B": Scenario("B", rounds=5, calls_per_round=3),
}
PROBE = Scenario("probe", rounds=1, calls_per_round=1, timed=False)


class ScriptedTurns:
    """What the model says next, given how many tool-call turns it has already made.

    ``next_turn(k)`` is the k-th round's calls, or ``None`` when it is time for the final answer.
    """

    def __init__(self, scenario: Scenario) -> None:
        self._rounds = _script(scenario)
        self.calls_per_turn = scenario.calls_per_round

    def next_turn(self, turns_so_far: int) -> tuple[ToolRequest, ...] | None:
        if turns_so_far < len(self._rounds):
            return self._rounds[turns_so_far]
        return None


@functools.cache
def _script(scenario: Scenario) -> tuple[tuple[ToolRequest, ...], ...]:
    return scenario.script()


class ToolLog:
    """Counts executions of the ``add`` tool and notes whether any argument was not an int."""

    def __init__(self) -> None:
        self.calls = 0
        self.unvalidated = False

    def record(self, a: object, b: object) -> None:
        self.calls += 1
        if type(a) is not int or type(b) is not int:
            self.unvalidated = True

    def reset(self) -> None:
        self.calls = 0
        self.unvalidated = False


TOOL_LOG = ToolLog()


def add(a: int, b: int) -> int:
    """Add two integers."""
    TOOL_LOG.record(a, b)
    return a + b  # type: ignore[operator, no-any-return]  # the probe may hand us a str


async def add_async(a: int, b: int) -> int:
    """Add two integers."""
    TOOL_LOG.record(a, b)
    return a + b  # type: ignore[operator, no-any-return]  # the probe may hand us a str


# Frameworks name a tool after its function; both forms must be the tool ``add``.
add_async.__name__ = add_async.__qualname__ = TOOL_NAME

ToolFunction = Callable[..., Any]
TOOL_FUNCTIONS: dict[str, ToolFunction] = {"sync": add, "async": add_async}


@dataclasses.dataclass
class Options:
    scenarios: list[Scenario]
    warmup: int
    iterations: int
    tool: str  # "sync" (a plain def, which frameworks run in a worker thread) or "async"


def parse_options(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description="Time one framework's tool loop.")
    parser.add_argument(
        "--scenario", action="append", choices=sorted(SCENARIOS), help="repeatable; default all"
    )
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument(
        "--tool",
        choices=sorted(TOOL_FUNCTIONS),
        default="sync",
        help="declare add as a plain def (default) or as async def",
    )
    args = parser.parse_args(argv)
    if args.warmup < 0 or args.iterations < 1:
        parser.error("--warmup must be >= 0 and --iterations >= 1")
    names = args.scenario or sorted(SCENARIOS)
    return Options([SCENARIOS[n] for n in names], args.warmup, args.iterations, args.tool)


def _check(framework: str, scenario: Scenario, answer: str) -> None:
    """Fail loudly if a run did not do the whole task (a fast wrong loop must not count)."""
    if answer != FINAL_ANSWER:
        raise SystemExit(
            f"{framework} {scenario.name}: final answer {answer!r}, not {FINAL_ANSWER!r}"
        )
    if TOOL_LOG.calls != scenario.total_calls:
        raise SystemExit(
            f"{framework} {scenario.name}: tool ran {TOOL_LOG.calls} times, "
            f"expected {scenario.total_calls}"
        )


def _emit(row: dict[str, Any]) -> None:
    print(json.dumps(row), flush=True)


def _clock() -> tuple[int, int]:
    """Wall time and this process's CPU time (all its threads), in nanoseconds."""
    return time.perf_counter_ns(), time.process_time_ns()


@dataclasses.dataclass
class _Samples:
    wall_ns: list[int] = dataclasses.field(default_factory=list)
    cpu_ns: list[int] = dataclasses.field(default_factory=list)

    def add(self, started: tuple[int, int], ended: tuple[int, int]) -> None:
        self.wall_ns.append(ended[0] - started[0])
        self.cpu_ns.append(ended[1] - started[1])


def _timing_row(scenario: Scenario, samples: _Samples) -> dict[str, Any]:
    wall_ms = sorted(s / 1e6 for s in samples.wall_ns)
    p90 = wall_ms[min(len(wall_ms) - 1, int(0.9 * len(wall_ms)))]
    return {
        "scenario": scenario.name,
        "rounds": scenario.rounds,
        "calls_per_round": scenario.calls_per_round,
        "iterations": len(wall_ms),
        "per_run_ms_median": round(statistics.median(wall_ms), 4),
        "p90": round(p90, 4),
        "min": round(wall_ms[0], 4),
        "cpu_ms_median": round(statistics.median(samples.cpu_ns) / 1e6, 4),
    }


def _probe_row(answer_or_error: str | BaseException) -> dict[str, Any]:
    if isinstance(answer_or_error, BaseException):
        outcome = f"run raised {type(answer_or_error).__name__}: {answer_or_error}"[:200]
    else:
        outcome = f"run answered {answer_or_error!r}"
    return {
        "scenario": PROBE.name,
        "validates_arguments": not TOOL_LOG.unvalidated,
        "probe_outcome": outcome,
    }


AsyncRun = Callable[[Scenario], Awaitable[str]]
SyncRun = Callable[[Scenario], str]


def main_async(
    framework: str,
    version: str,
    setup: Callable[[ToolFunction], AsyncRun],
    notes: str = "",
    argv: list[str] | None = None,
) -> None:
    """Time ``await run(scenario)`` per scenario, then run the validation probe.

    ``setup(add)`` builds the framework's agents around the tool function once (as an
    application would) and returns ``run``.
    """
    options = parse_options(argv)
    common = {"framework": framework, "version": version, "tool": options.tool, "notes": notes}
    run = setup(TOOL_FUNCTIONS[options.tool])

    async def measure(scenario: Scenario) -> _Samples:
        samples = _Samples()
        for i in range(options.warmup + options.iterations):
            TOOL_LOG.reset()
            started = _clock()
            answer = await run(scenario)
            ended = _clock()
            _check(framework, scenario, answer)
            if i >= options.warmup:
                samples.add(started, ended)
        return samples

    async def all_scenarios() -> None:
        for scenario in options.scenarios:
            gc.collect()
            _emit(common | _timing_row(scenario, await measure(scenario)))
        TOOL_LOG.reset()
        outcome: str | BaseException
        try:
            outcome = await run(PROBE)
        except Exception as exc:  # the probe records how the framework reacts, whatever it is
            outcome = exc
        _emit(common | _probe_row(outcome))

    asyncio.run(all_scenarios())


def main_sync(
    framework: str,
    version: str,
    setup: Callable[[ToolFunction], SyncRun],
    notes: str = "",
    argv: list[str] | None = None,
) -> None:
    """Like :func:`main_async` for a framework with no async entry point (nor async tools)."""
    options = parse_options(argv)
    common = {"framework": framework, "version": version, "tool": options.tool, "notes": notes}
    if options.tool != "sync":
        _emit(common | {"skipped": f"{framework} has no async loop to await an async tool"})
        return
    run = setup(TOOL_FUNCTIONS[options.tool])

    def measure(scenario: Scenario) -> _Samples:
        samples = _Samples()
        for i in range(options.warmup + options.iterations):
            TOOL_LOG.reset()
            started = _clock()
            answer = run(scenario)
            ended = _clock()
            _check(framework, scenario, answer)
            if i >= options.warmup:
                samples.add(started, ended)
        return samples

    for scenario in options.scenarios:
        gc.collect()
        _emit(common | _timing_row(scenario, measure(scenario)))
    TOOL_LOG.reset()
    outcome: str | BaseException
    try:
        outcome = run(PROBE)
    except Exception as exc:  # the probe records how the framework reacts, whatever it is
        outcome = exc
    _emit(common | _probe_row(outcome))
