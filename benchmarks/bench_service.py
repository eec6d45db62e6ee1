"""``tooluse serve`` under concurrent streaming chats, with a fixed-latency fake model.

    .venv/bin/python benchmarks/bench_service.py                      # 1, 8, 32 clients
    .venv/bin/python benchmarks/bench_service.py --clients 64 --requests 10 --latency 0.1
    .venv/bin/python benchmarks/bench_service.py --clients 1 200 --endpoint api v1 --question tools
    .venv/bin/python benchmarks/bench_service.py --clients 8 --profile /tmp/serve.prof  # cProfile
    .venv/bin/python benchmarks/bench_service.py --auth users   # per-user keys, tool rules
    .venv/bin/python benchmarks/bench_service.py --workers 1 2 4 --clients 16 64  # scale-out
    .venv/bin/python benchmarks/bench_service.py --workers 1 2 --durable-runs     # DBOS runs

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

``--workers 1 2 4`` runs the same clients against ``tooluse serve --workers N`` for each N
(uvicorn's processes sharing the port, the same fake model in each), their state in one
PostgreSQL database and one Redis, as several workers need (``--database-url`` and
``--redis-url``; without them, throwaway servers: the tests' embedded PostgreSQL with
pgvector and Debian's ``redis-server``), and ends with each N's throughput as a ratio to the
first. ``--durable-runs`` runs every turn as a DBOS workflow. The server's CPU and RSS are
those of all its processes.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import json
import multiprocessing
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from tooluse.messages import Prompt, ToolResponseMessage, UserMessage
from tooluse.service import ServiceConfig, create_app
from tooluse.testing import FunctionModel, ResponseLike, tool_call

if TYPE_CHECKING:
    from fastapi import FastAPI

QUESTIONS = {
    "tools": ("What's the weather in Paris?", 3),
    "knowledge": ("How long do I have to return an item?", 2),
}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _model(latency: float) -> FunctionModel:
    async def respond(prompt: Prompt) -> ResponseLike:
        await asyncio.sleep(latency)
        if prompt.options.tool_callbacks:
            if isinstance(prompt.messages[-1], ToolResponseMessage):
                return ""
            question = next(m.text for m in reversed(prompt.messages) if isinstance(m, UserMessage))
            return tool_call("get_weather", {"city": "Paris"}) if "weather" in question else ""
        return "An answer of about a hundred characters, streamed in small pieces to the client."

    return FunctionModel(respond)


# What a worker of `--workers N` builds its app from: uvicorn starts the workers afresh.
_WORKER_SETTINGS = "TOOLUSE_BENCH_WORKER"


def _key(client: int) -> str:
    return f"bench-key-{client}"


def _config(
    db: str, latency: float, shared: dict[str, Any], auth: str, users: int
) -> ServiceConfig:
    from tooluse.calling import Caller, ToolAccess, ToolAccessPolicy
    from tooluse.service import ApiKeys

    config = ServiceConfig(db=db, model=_model(latency), **shared)
    if auth == "key":
        config = dataclasses.replace(config, api_key=_key(0))
    elif auth == "users":
        keys = {
            _key(n): Caller(f"user-{n}", "bench", frozenset({"customer"})) for n in range(users)
        }
        rules = ToolAccessPolicy(tools={"cancel_order": ToolAccess(allow_roles=["support"])})
        config = dataclasses.replace(config, authenticators=[ApiKeys(keys)], tool_visibility=rules)
    return config


def worker_app() -> FastAPI:
    """The app of one worker process (uvicorn's factory, ``bench_service:worker_app``)."""
    settings = json.loads(os.environ[_WORKER_SETTINGS])
    return create_app(
        _config(
            settings["db"],
            settings["latency"],
            settings["shared"],
            settings["auth"],
            settings["users"],
        )
    )


def _serve(
    db: str,
    port: int,
    latency: float,
    profile: str | None,
    auth: str,
    users: int,
    workers: int = 1,
    shared: dict[str, Any] | None = None,
) -> None:
    import uvicorn

    if workers > 1:  # uvicorn's processes, each building its app from the settings
        assert shared is not None
        os.environ[_WORKER_SETTINGS] = json.dumps(
            {"db": db, "latency": latency, "shared": shared, "auth": auth, "users": users}
        )
        sys.path.insert(0, str(Path(__file__).parent))
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]
        )
        uvicorn.run(
            "bench_service:worker_app",
            factory=True,
            host="127.0.0.1",
            port=port,
            workers=workers,
            log_level="warning",
            # A worker that answers no health check for this long is killed and started
            # again: on a loaded machine, starting (the embedding model) takes longer than 5 s.
            timeout_worker_healthcheck=120,
        )
        return
    app = create_app(_config(db, latency, shared or {}, auth, users))
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


def _processes(pid: int) -> list[int]:
    """``pid`` and its descendants (a supervisor's workers), from ``/proc``."""
    found = [pid]
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        found += _processes(int(child))
    return found


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` and its descendants (Linux ``/proc``)."""
    total = 0
    for process in _processes(pid):
        fields = Path(f"/proc/{process}/stat").read_text().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def _rss_mib(pid: int) -> float:
    total = 0
    for process in _processes(pid):
        for line in Path(f"/proc/{process}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


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
    workers: int,
) -> float:
    """``clients`` streams at once, each sending ``requests`` questions (``kinds`` in turn)."""
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    errors = 0
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=base, timeout=300, limits=limits) as client:

        async def one_client(number: int) -> None:
            nonlocal errors
            for index in range(requests):
                kind = kinds[index % len(kinds)]
                question, calls = QUESTIONS[kind]
                conversation = f"bench-{workers}-{endpoint}-{clients}-{number}"
                key = _key(number if auth == "users" else 0)
                elapsed, ok = await _chat(client, endpoint, question, conversation, key)
                if ok:
                    samples[kind].append((elapsed - calls * latency) * 1000)
                else:
                    errors += 1

        processes = _processes(server)
        cpu_before = _cpu_seconds(server)
        started = time.perf_counter()
        await asyncio.gather(*(one_client(n) for n in range(clients)))
        wall = time.perf_counter() - started
        cpu = _cpu_seconds(server) - cpu_before
        if _processes(server) != processes:  # uvicorn restarted a worker that did not answer
            print(f"(workers restarted during the run: CPU not comparable; {processes})")
    total = clients * requests
    for kind, values in samples.items():
        values.sort()
        p50 = statistics.median(values) if values else float("nan")
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))] if values else float("nan")
        print(
            f"| {workers} | {endpoint} | {clients} | {kind} | {len(values)} | {p50:.1f} | "
            f"{p99:.1f} | {errors} | {total / wall:.1f} | {cpu / total * 1000:.2f} | "
            f"{_rss_mib(server):.0f} |"
        )
    return total / wall


def _settle(pid: int, timeout: float = 300) -> None:
    """Wait until the server's processes are idle (under 5% of a CPU for a second): each
    worker loads its embedding model when it starts, and the one that answered first may
    not be the last."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = _cpu_seconds(pid)
        time.sleep(1)
        if _cpu_seconds(pid) - before < 0.05:
            return
    raise RuntimeError(f"the server was still busy {timeout:g} s after it answered")


@contextmanager
def _shared_engines(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """The PostgreSQL database and Redis the workers share: the ones given, else throwaway
    servers (the tests' embedded PostgreSQL with pgvector, and redis-server)."""
    with ExitStack() as stack:
        database_url, redis_url = args.database_url, args.redis_url
        if database_url is None or redis_url is None:
            sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
            from _servers import PostgresServer, RedisServer

        if database_url is None:
            postgres = PostgresServer()
            stack.callback(postgres.stop)
            database_url = postgres.new_database()
        if redis_url is None:
            redis = RedisServer()
            stack.callback(redis.stop)
            redis_url = redis.url
        yield database_url, redis_url


def _empty(database_url: str, redis_url: str) -> None:
    """Drop what earlier benchmarks left (conversations, runs, the knowledge base)."""
    import psycopg
    import redis

    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute("DROP SCHEMA IF EXISTS dbos CASCADE")
        connection.execute("DROP SCHEMA public CASCADE")
        connection.execute("CREATE SCHEMA public")
    with redis.Redis.from_url(redis_url) as client:
        client.flushall()


def _serving(
    directory: str,
    args: argparse.Namespace,
    workers: int,
    shared: dict[str, Any] | None,
    port: int,
) -> multiprocessing.process.BaseProcess:
    server = multiprocessing.get_context("spawn").Process(
        target=_serve,
        args=(
            str(Path(directory) / "bench.db"),
            port,
            args.latency,
            args.profile,
            args.auth,
            max(args.clients),
        ),
        kwargs={"workers": workers, "shared": shared},
        daemon=False,  # uvicorn's supervisor starts processes of its own
    )
    server.start()
    return server


def _stop(server: multiprocessing.process.BaseProcess, profile: str | None) -> None:
    if profile and server.pid is not None:
        os.kill(server.pid, signal.SIGINT)  # lets it write the profile
        server.join(120)
    if server.pid is not None and server.is_alive():
        os.kill(server.pid, signal.SIGINT)  # uvicorn's supervisor stops its workers on it
        server.join(60)
    server.terminate()
    server.join(10)


def main() -> None:
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
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        help="serve with each of these numbers of worker processes in turn, their state in "
        "PostgreSQL and Redis (default: one process on a SQLite file)",
    )
    parser.add_argument("--database-url", help="with --workers: the PostgreSQL they share")
    parser.add_argument("--redis-url", help="with --workers: the Redis they share")
    parser.add_argument(
        "--durable-runs", action="store_true", help="with --workers: DBOS durable runs"
    )
    args = parser.parse_args()
    if args.durable_runs and not args.workers:
        parser.error("--durable-runs needs --workers (it runs on PostgreSQL)")
    if args.profile and args.workers and args.workers != [1]:
        parser.error("--profile profiles one process: --workers 1 at most")
    print(
        f"model latency {args.latency * 1000:.0f} ms per call; {os.cpu_count()} CPUs; "
        f"auth: {args.auth}"
    )
    print(
        "| workers | endpoint | clients | question | requests | added p50 ms | p99 ms | errors "
        "| req/s | server CPU ms/req | server RSS MiB |"
    )
    print("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    throughput: dict[tuple[str, int], dict[int, float]] = {}
    with tempfile.TemporaryDirectory() as directory, ExitStack() as stack:
        engines = stack.enter_context(_shared_engines(args)) if args.workers else None
        if engines is not None:  # the first run ingests the knowledge base, the others use it
            _empty(*engines)
        for workers in args.workers or [1]:
            shared: dict[str, Any] | None = None
            if engines is not None:
                shared = {"database_url": engines[0], "redis_url": engines[1]}
                if args.durable_runs:
                    shared["durable_runs"] = True
            port = _free_port()
            server = _serving(directory, args, workers, shared, port)
            base = f"http://127.0.0.1:{port}"
            try:
                asyncio.run(_ready(base))
                assert server.pid is not None
                _settle(server.pid)  # every worker started, not only the one that answered
                for endpoint in args.endpoint:
                    for clients in args.clients:
                        rate = asyncio.run(
                            _run(
                                base,
                                server.pid,
                                endpoint,
                                args.question,
                                clients,
                                args.requests,
                                args.latency,
                                args.auth,
                                workers,
                            )
                        )
                        throughput.setdefault((endpoint, clients), {})[workers] = rate
            finally:
                _stop(server, args.profile)
    if args.workers and len(args.workers) > 1:
        first = args.workers[0]
        print()
        print(
            "| endpoint | clients | "
            + " | ".join(f"{n} workers req/s (x{first})" for n in args.workers)
            + " |"
        )
        print("|---|---:|" + "---:|" * len(args.workers))
        for (endpoint, clients), rates in throughput.items():
            cells = [f"{rates[n]:.1f} ({rates[n] / rates[first]:.2f})" for n in args.workers]
            print(f"| {endpoint} | {clients} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
