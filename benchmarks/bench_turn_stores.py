"""What a turn of ``/api/chat`` asks of its stores, beyond what ``/v1`` does: each store
call of a tool question's turn alone, its CPU per turn (all threads), on SQLite and on
PostgreSQL with Redis.

    .venv/bin/python benchmarks/bench_turn_stores.py                       # both engines
    .venv/bin/python benchmarks/bench_turn_stores.py --compare /work/main/src --rounds 3

The calls are the service's own (a ``QaService`` on a SQLite file, or on a throwaway
PostgreSQL and Redis, the tests' servers), in the order a turn makes them, on a
conversation whose window is full (20 messages): the turn's lock (on Redis: a ``SET NX``
and the release script), its start (the approvals a new question withdraws, the memory
read: one hop to a thread), its end (the memory write of the question and the answer and
the turn's display record: one hop, or two where the tree makes two), the start and the end
in one turn (the end's write after the start's read, as a question makes them), the audit
record of the tool call (``/v1`` makes it too), the 4 events published to the conversation's
watchers (Redis only), the lock and the 4 events together (Redis: the release may go with
the last event), a bare hop to a thread for scale, and the thread pool's side alone: the
start's read, the audit record, the memory write and the display record called in one
thread without a hop, its CPU by ``time.thread_time``. ``--compare SRC`` runs the
same in a process on another source tree, alternately, and prints this tree's ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

QUESTION = "What's the weather in Paris?"
ANSWER = "An answer of about a hundred characters, streamed in small pieces to the client."


async def _measure(turns: int, call: Callable[[], Awaitable[None]]) -> float:
    """CPU µs per call (the process's: the threads' too), after a warm-up."""
    for _ in range(30):
        await call()
    started = time.process_time()
    for _ in range(turns):
        await call()
    return (time.process_time() - started) / turns * 1e6


def _measure_in_thread(turns: int, call: Callable[[], None]) -> float:
    """This thread's CPU µs per call, after a warm-up: a call that runs no hop."""
    for _ in range(30):
        call()
    started = time.thread_time()
    for _ in range(turns):
        call()
    return (time.thread_time() - started) / turns * 1e6


async def _child(settings: dict[str, Any]) -> dict[str, float]:
    sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1] / "tests")]
    from bench_service import _FixedLatencyModel

    from _rag_helpers import HashingEmbeddingModel  # type: ignore[import-not-found]
    from tooluse.calling import AuditRecord
    from tooluse.messages import AssistantMessage, UserMessage
    from tooluse.qa import DoneEvent, RouteEvent, ToolCallEvent, ToolResultEvent
    from tooluse.service import ServiceConfig
    from tooluse.service._service import QaService
    from tooluse.service._turn_displays import TurnDisplay

    # Each tree's own way to store a turn's display record (a record object since session
    # 23, a function before).
    sse = importlib.import_module("tooluse.service._sse")
    display_record = getattr(sse, "_DisplayRecord", None)

    directory = tempfile.mkdtemp(prefix="bench-turn-")
    config = ServiceConfig(
        db=Path(directory) / "s.db",
        model=_FixedLatencyModel(0),
        embedding_model=HashingEmbeddingModel(),
        sample_knowledge=False,
        **settings["shared"],
    )
    service = QaService(config)
    conversation = "c1"

    def turn_messages() -> list[Any]:
        return [UserMessage(text=QUESTION), AssistantMessage(text=ANSWER)]

    for _ in range(12):  # a full window
        await service.turn_memory.aadd(conversation, turn_messages())
    display = TurnDisplay()
    display.add(ToolCallEvent("call_1", "get_weather", '{"city": "Paris"}'))
    display.add(ToolResultEvent("call_1", "get_weather", '{"sky": "sunny"}', False))
    display.add(RouteEvent("tools", 1))
    display.add(DoneEvent(ANSWER, "tools", (), None))
    record = AuditRecord(
        at=time.time(), tool="get_weather", call_id="call_1", arguments='{"city": "Paris"}',
        outcome="ran", result='{"sky": "sunny"}', is_error=False, latency_ms=0.1,
        approval="not needed", approved_by=None, user=None, tenant=None,
        conversation=conversation,
    )  # fmt: skip
    memory = service.turn_memory
    holds = hasattr(memory, "store_held")  # this session's TurnMemory: one hop at the end

    def memory_turn(**options: Any) -> Any:
        return memory.turn(conversation, **options)

    async def in_turn(body: Callable[[], Awaitable[None]], **options: Any) -> None:
        held = memory_turn(**options)
        if hasattr(held, "__aenter__"):
            async with held:
                await body()
        else:
            with held:
                await body()

    async def bare_hop() -> None:
        await asyncio.to_thread(lambda: None)

    async def turn_lock() -> None:
        async with service.turns.turn(conversation):
            pass

    async def turn_start() -> None:
        await in_turn(lambda: service.start_turn(conversation))

    # A tree whose TurnMemory holds a turn's writes for its end: held, as the service does.
    holding = {"holds_writes": True} if holds else {}

    async def written() -> None:
        await memory.aadd(conversation, turn_messages())
        then: Any = (
            functools.partial(service.turn_displays.save, conversation, QUESTION, None, display)
            if display_record is None
            else display_record(service, conversation, QUESTION, display)
        )
        if holds:
            await memory.store_held(conversation, then=then)
        else:
            store_display = sse._store_display
            await asyncio.to_thread(store_display, service, conversation, QUESTION, None, display)

    async def turn_end() -> None:
        await in_turn(written, **holding)

    async def whole_turn() -> None:
        # Start, then end, in one turn: the end's write comes after the start's read.
        async def start_and_end() -> None:
            await service.start_turn(conversation)
            await written()

        await in_turn(start_and_end, **holding)

    async def audit() -> None:
        await service.audit.record([record])

    async def publish() -> None:
        for kind in ("tool_call", "tool_result", "route", "done"):
            await service.events.publish(conversation, kind, {"id": "call_1"})
        sender = service.events._sender
        if sender is not None:
            await sender

    async def lock_and_events() -> None:
        async with service.turns.turn(conversation):
            for kind in ("tool_call", "tool_result", "route", "done"):
                await service.events.publish(conversation, kind, {"id": "call_1"})
        sender = service.events._sender
        if sender is not None:
            await sender

    calls = {
        "turn lock": turn_lock,
        "turn start (approvals, memory read)": turn_start,
        "turn end (memory write, display record)": turn_end,
        "turn start and end in one turn": whole_turn,
        "audit record": audit,
        "4 events published": publish,
        "turn lock with its 4 events": lock_and_events,
        "bare hop to a thread": bare_hop,
    }
    if "redis_url" not in settings["shared"]:  # delivered on the loop, to no watcher
        del calls["4 events published"], calls["turn lock with its 4 events"]

    def stores_in_one_thread() -> None:
        # What the pool's threads run for a tool question, without the hops: the start's
        # read, the audit record, the memory write, the display record.
        service._start_turn(conversation)
        service.audit._insert_rounds([[record]])
        memory.memory.add(conversation, turn_messages())
        service.turn_displays.save(conversation, QUESTION, None, display)

    figures = {name: await _measure(settings["turns"], call) for name, call in calls.items()}
    figures["a turn's store calls in one thread (its CPU, no hop)"] = _measure_in_thread(
        settings["turns"], stores_in_one_thread
    )
    await service.aclose()
    return figures


def _run_child(source: str | None, settings: dict[str, Any]) -> dict[str, float]:
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    output = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(settings)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    figures: dict[str, float] = json.loads(output.splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", nargs="+", choices=["sqlite", "postgres"])
    parser.add_argument("--turns", type=int, default=400, help="calls of each kind per round")
    parser.add_argument("--compare", metavar="SRC", help="a source tree to run side by side")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(asyncio.run(_child(json.loads(args.child)))))
        return
    trees = {"this": None} | ({} if args.compare is None else {"other": args.compare})
    with ExitStack() as stack:
        for engine in args.engine or ["sqlite", "postgres"]:
            shared: dict[str, dict[str, str]] = {tree: {} for tree in trees}
            if engine == "postgres":
                sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
                from _servers import (  # type: ignore[import-not-found, unused-ignore]
                    PostgresServer,
                    RedisServer,
                )

                postgres, redis_server = PostgresServer(), RedisServer()
                stack.callback(postgres.stop)
                stack.callback(redis_server.stop)
                base = redis_server.url.rpartition("/")[0]
                for number, tree in enumerate(trees):
                    shared[tree] = {
                        "database_url": postgres.new_database(),
                        "redis_url": f"{base}/{number}",
                    }
            runs: dict[str, list[dict[str, float]]] = {tree: [] for tree in trees}
            for round_ in range(args.rounds):
                order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
                for tree in order:
                    settings = {"shared": shared[tree], "turns": args.turns}
                    runs[tree].append(_run_child(trees[tree], settings))
            _report(engine, runs, args)


def _report(engine: str, runs: dict[str, list[dict[str, float]]], args: Any) -> None:
    print(f"\n{engine}: CPU µs per call, medians of {args.rounds} round(s) of {args.turns}")
    names = list(runs["this"][0])
    if "other" not in runs:
        print("| call | this |\n|---|---:|")
        for name in names:
            print(f"| {name} | {statistics.median(r[name] for r in runs['this']):.0f} |")
        return
    print("| call | other | this | ratio (per round) |\n|---|---:|---:|---|")
    for name in names:
        this = [r[name] for r in runs["this"]]
        other = [r[name] for r in runs["other"]]
        ratios = [a / b for a, b in zip(this, other, strict=True)]
        print(
            f"| {name} | {statistics.median(other):.0f} | {statistics.median(this):.0f} | "
            f"{statistics.median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)}) |"
        )


if __name__ == "__main__":
    main()
