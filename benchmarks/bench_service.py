"""``tooluse serve`` under concurrent streaming chats, with a fixed-latency fake model.

    .venv/bin/python benchmarks/bench_service.py                      # 1, 8, 32 clients
    .venv/bin/python benchmarks/bench_service.py --clients 64 --requests 10 --latency 0.1
    .venv/bin/python benchmarks/bench_service.py --clients 1 200 --endpoint api v1 --question tools
    .venv/bin/python benchmarks/bench_service.py --clients 8 --profile /tmp/serve.prof  # cProfile
    .venv/bin/python benchmarks/bench_service.py --auth users   # per-user keys, tool rules
    .venv/bin/python benchmarks/bench_service.py --compare /work/main/src --rounds 5  # side by side

``--compare SRC`` starts a second server on another source tree (``SRC`` first on its
``PYTHONPATH``) and drives both in one run, alternately (the order turns each round), and
prints each cell's median over ``--rounds`` with the ratio of this tree to the other: on a
machine whose load changes, only figures taken side by side compare.

Both endpoints stream: ``/api/chat`` (the page's SSE, read to its ``done`` event) and ``/v1``
(``/v1/chat/completions`` with ``stream: true``, read to ``[DONE]``). Per run it reports the
latency the service adds (median and p99), requests/s, and the server process's own CPU per
request (user + system from ``/proc``, robust to other jobs on the machine, unlike the wall
figures) and its resident memory after the run. ``--profile`` runs the server under cProfile
and writes the stats when it stops (``python -m pstats FILE``).

The server runs in its own process (uvicorn, the app of ``tooluse serve`` with the sample tools
and knowledge base, the bundled embedding model) with a model that waits ``--latency`` seconds
per call and then answers (the router asks for ``get_weather`` on weather questions). Clients
post to ``/api/chat`` over real HTTP and read the SSE stream to its ``done`` event. Each client
alternates a tool question (3 model calls) and a knowledge question (2 model calls, one
retrieval); the overhead of a request is its latency minus the model's waits. ``--auth
key`` sends the one shared API key; ``--auth users`` gives each client a key of its own (a
user of a tenant, who owns the client's conversation) and the service a tool-access rule,
so that a request pays for its authentication, the owner check and the tool cut.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import itertools
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from tooluse.messages import (
    AssistantMessage,
    ChatResponse,
    Generation,
    Prompt,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.models import BaseChatModel
from tooluse.testing import chat_response

QUESTIONS = {
    "tools": ("What's the weather in Paris?", 2),  # the router's call and the answer
    "knowledge": ("How long do I have to return an item?", 2),
}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class _FixedLatencyModel(BaseChatModel):
    """Waits ``latency`` seconds per call, then answers: the router asks for ``get_weather``
    on weather questions, the answer stage streams a fixed text in 8-character chunks. The
    responses are built once (a test double's recording and building would be counted as
    the service's CPU)."""

    def __init__(self, latency: float) -> None:
        self._latency = latency
        self._empty = chat_response("")
        self._answer = chat_response(ANSWER)
        pieces = [ANSWER[start : start + 8] for start in range(0, len(ANSWER), 8)]
        self._chunks = (  # as a provider streams: the finish reason on the last chunk
            *(_text_chunk(piece) for piece in pieces[:-1]),
            chat_response(pieces[-1]),
        )
        self._calls = itertools.count()

    async def acall(self, prompt: Prompt) -> ChatResponse:
        await asyncio.sleep(self._latency)
        if not prompt.options.tool_callbacks:
            return self._answer
        if isinstance(prompt.messages[-1], ToolResponseMessage):
            return self._empty
        question = next(m.text for m in reversed(prompt.messages) if isinstance(m, UserMessage))
        if "weather" not in question:
            return self._empty
        call = ToolCall(id=f"call_{next(self._calls)}", name="get_weather", arguments=CITY)
        return chat_response(tool_calls=[call])

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        if prompt.options.tool_callbacks:
            yield await self.acall(prompt)
            return
        await asyncio.sleep(self._latency)
        for chunk in self._chunks:
            yield chunk


def _text_chunk(text: str) -> ChatResponse:
    return ChatResponse(generations=(Generation(message=AssistantMessage(text=text)),))


ANSWER = "An answer of about a hundred characters, streamed in small pieces to the client."
CITY = '{"city": "Paris"}'


def _key(client: int) -> str:
    return f"bench-key-{client}"


def _serve(db: str, port: int, latency: float, profile: str | None, auth: str, users: int) -> None:
    """The server (in its own process: ``bench_service.py --serve ...``)."""
    import uvicorn

    from tooluse.calling import Caller, ToolAccess, ToolAccessPolicy
    from tooluse.service import ApiKeys, ServiceConfig, create_app

    config = ServiceConfig(db=db, model=_FixedLatencyModel(latency))
    if auth == "key":
        config = dataclasses.replace(config, api_key=_key(0))
    elif auth == "users":
        keys = {
            _key(n): Caller(f"user-{n}", "bench", frozenset({"customer"})) for n in range(users)
        }
        rules = ToolAccessPolicy(tools={"cancel_order": ToolAccess(allow_roles=["support"])})
        config = dataclasses.replace(config, authenticators=[ApiKeys(keys)], tool_visibility=rules)
    app = create_app(config)
    if profile is None:
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
        return
    profiler = cProfile.Profile()
    profiler.enable()
    try:  # until SIGINT, which uvicorn raises again as KeyboardInterrupt once it has stopped
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
    except KeyboardInterrupt:
        pass
    finally:
        profiler.disable()
        profiler.dump_stats(profile)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _ready(base: str) -> None:
    async with httpx.AsyncClient() as client:
        while True:
            try:
                health = (await client.get(base + "/healthz")).json()
                if health["knowledge"] == "ready":
                    return
                if health["knowledge"] == "failed":
                    raise RuntimeError(health["knowledge_error"])
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)


async def _chat(
    client: httpx.AsyncClient, endpoint: str, question: str, conversation: str, key: str
) -> tuple[float, bool]:
    """Seconds to the end of one streamed answer, and whether it ended well."""
    if endpoint == "api":
        path, body = "/api/chat", {"message": question, "conversation_id": conversation}
        end, failure = "event: done", "event: error"
    else:
        path = "/v1/chat/completions"
        body = {
            "model": "tooluse-qa",
            "messages": [{"role": "user", "content": question}],
            "stream": True,
        }
        end, failure = "data: [DONE]", "event: error"
    started = time.perf_counter()
    done = False
    try:
        headers = {"Authorization": f"Bearer {key}"}
        async with client.stream("POST", path, json=body, headers=headers) as response:
            async for line in response.aiter_lines():
                if line == end:
                    done = True
                elif line == failure or line.startswith('data: {"error"'):
                    return time.perf_counter() - started, False
    except httpx.TransportError:  # counted as an error (a refused or dropped connection)
        return time.perf_counter() - started, False
    return time.perf_counter() - started, done and response.status_code == 200


async def _run(
    base: str,
    server: int,
    endpoint: str,
    kinds: list[str],
    clients: int,
    requests: int,
    latency: float,
    auth: str,
) -> dict[str, float]:
    """``clients`` streams at once, each sending ``requests`` questions (``kinds`` in turn):
    the added latency per kind (median, p99), errors, requests/s, server CPU ms per request
    and RSS."""
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    errors = 0
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=base, timeout=300, limits=limits) as client:

        async def one_client(number: int) -> None:
            nonlocal errors
            for index in range(requests):
                kind = kinds[index % len(kinds)]
                question, calls = QUESTIONS[kind]
                conversation = f"bench-{endpoint}-{clients}-{number}"
                key = _key(number if auth == "users" else 0)
                elapsed, ok = await _chat(client, endpoint, question, conversation, key)
                if ok:
                    samples[kind].append((elapsed - calls * latency) * 1000)
                else:
                    errors += 1

        cpu_before = _cpu_seconds(server)
        started = time.perf_counter()
        await asyncio.gather(*(one_client(n) for n in range(clients)))
        wall = time.perf_counter() - started
        cpu = _cpu_seconds(server) - cpu_before
    total = clients * requests
    figures = {
        "errors": errors,
        "req/s": total / wall,
        "cpu ms/req": cpu / total * 1000,
        "rss MiB": _rss_mib(server),
    }
    for kind, values in samples.items():
        values.sort()
        figures[f"{kind} p50"] = statistics.median(values) if values else float("nan")
        figures[f"{kind} p99"] = (
            values[min(len(values) - 1, int(len(values) * 0.99))] if values else float("nan")
        )
    return figures


def _start_server(
    source: str | None, db: str, port: int, args: argparse.Namespace, profile: str | None
) -> subprocess.Popen[bytes]:
    """The server process, on ``source`` (a ``src`` directory) when given, else on the
    ``tooluse`` this interpreter imports."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    command = [sys.executable, __file__, "--serve", db, str(port), str(args.latency)]
    command += [args.auth, str(max(args.clients))]  # a key per client up to the most clients
    if profile is not None:
        command.append(profile)
    return subprocess.Popen(command, env=env)


def _stop_server(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)  # uvicorn stops; a profiled server writes its stats
    try:
        process.wait(120)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


Cells = dict[tuple[str, str, int], list[dict[str, float]]]  # (tree, endpoint, clients) -> runs


def _measure(
    args: argparse.Namespace, servers: dict[str, tuple[subprocess.Popen[bytes], str]]
) -> Cells:
    """Every cell ``args.rounds`` times, the trees in turns (who goes first rotates)."""
    trees = list(servers)
    cells: Cells = {}
    for round_number in range(args.rounds):
        for endpoint in args.endpoint:
            for clients in args.clients:
                turn = round_number % len(trees)
                for label in trees[turn:] + trees[:turn]:
                    process, base = servers[label]
                    run = _run(
                        base,
                        process.pid,
                        endpoint,
                        args.question,
                        clients,
                        args.requests,
                        args.latency,
                        args.auth,
                    )
                    cells.setdefault((label, endpoint, clients), []).append(asyncio.run(run))
    return cells


def _report(args: argparse.Namespace, cells: Cells) -> None:
    kinds = args.question

    def median(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(run[key] for run in runs)

    added = " | ".join(f"{kind} added p50 ms | p99 ms" for kind in kinds)
    print(f"| tree | endpoint | clients | {added} | errors | req/s | server CPU ms/req | RSS MiB |")
    print("|---|---|---:|" + "---:|" * (2 * len(kinds) + 4))
    for (label, endpoint, clients), runs in cells.items():
        latency = " | ".join(
            f"{median(runs, f'{k} p50'):.1f} | {median(runs, f'{k} p99'):.1f}" for k in kinds
        )
        print(
            f"| {label} | {endpoint} | {clients} | {latency} | "
            f"{sum(run['errors'] for run in runs):.0f} | {median(runs, 'req/s'):.1f} | "
            f"{median(runs, 'cpu ms/req'):.2f} | {median(runs, 'rss MiB'):.0f} |"
        )
    if not args.compare:
        return
    print("\n| endpoint | clients | CPU ms/req, this / other | req/s, this / other | per round |")
    print("|---|---:|---:|---:|---|")
    for endpoint in args.endpoint:
        for clients in args.clients:
            pairs = list(
                zip(
                    cells[("this", endpoint, clients)],
                    cells[(args.compare, endpoint, clients)],
                    strict=True,
                )
            )
            cpu = [ours["cpu ms/req"] / theirs["cpu ms/req"] for ours, theirs in pairs]
            rate = [ours["req/s"] / theirs["req/s"] for ours, theirs in pairs]
            print(
                f"| {endpoint} | {clients} | {statistics.median(cpu):.2f} | "
                f"{statistics.median(rate):.2f} | {', '.join(f'{r:.2f}' for r in cpu)} |"
            )


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        db, port, latency, auth, users, *profile = sys.argv[2:]
        _serve(db, int(port), float(latency), profile[0] if profile else None, auth, int(users))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--requests", type=int, default=20, help="per client")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model call")
    parser.add_argument("--endpoint", nargs="+", choices=["api", "v1"], default=["api"])
    parser.add_argument(
        "--question",
        nargs="+",
        choices=sorted(QUESTIONS),
        default=["tools", "knowledge"],
        help="the kinds each client asks in turn (CPU per request is over the mix)",
    )
    parser.add_argument("--profile", help="run the server under cProfile, stats to this file")
    parser.add_argument(
        "--auth",
        choices=["none", "key", "users"],
        default="none",
        help="none; the one shared API key; a key per client with a tool-access rule",
    )
    parser.add_argument("--compare", metavar="SRC", help="a source tree to run side by side")
    parser.add_argument("--rounds", type=int, default=1, help="runs of every cell; medians")
    args = parser.parse_args()
    trees: list[tuple[str, str | None]] = [("this", None)]
    if args.compare:
        trees.append((args.compare, args.compare))
    with tempfile.TemporaryDirectory() as directory:
        servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
        try:
            for number, (label, source) in enumerate(trees):
                port = _free_port()
                profile = f"{args.profile}.{number}" if args.profile and number else args.profile
                db = str(Path(directory) / f"bench{number}.db")
                process = _start_server(source, db, port, args, profile)
                servers[label] = (process, f"http://127.0.0.1:{port}")
            for _, base in servers.values():
                asyncio.run(_ready(base))
            print(
                f"model latency {args.latency * 1000:.0f} ms per call; {os.cpu_count()} CPUs; "
                f"auth: {args.auth}; "
                f"load {os.getloadavg()[0]:.1f}; medians of {args.rounds} round(s)"
            )
            cells = _measure(args, servers)
            print(f"load {os.getloadavg()[0]:.1f} at the end")
            _report(args, cells)
        finally:
            for process, _ in servers.values():
                _stop_server(process)


if __name__ == "__main__":
    main()
