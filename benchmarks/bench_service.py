"""``tooluse serve`` under concurrent streaming chats, with a fixed-latency fake model.

    .venv/bin/python benchmarks/bench_service.py                      # 1, 8, 32 clients
    .venv/bin/python benchmarks/bench_service.py --clients 64 --requests 10 --latency 0.1
    .venv/bin/python benchmarks/bench_service.py --clients 1 200 --endpoint api v1 --question tools
    .venv/bin/python benchmarks/bench_service.py --clients 8 --profile /tmp/serve.prof  # cProfile
    .venv/bin/python benchmarks/bench_service.py --auth users   # per-user keys, tool rules
    .venv/bin/python benchmarks/bench_service.py --tool-search --question tools  # search first
    .venv/bin/python benchmarks/bench_service.py --compare /work/main/src --rounds 5  # side by side
    .venv/bin/python benchmarks/bench_service.py --workers 1 2 4 --clients 16 64  # scale-out
    .venv/bin/python benchmarks/bench_service.py --workers 1 2 --durable-runs     # DBOS runs
    .venv/bin/python benchmarks/bench_service.py --workers 1 --durable-runs --idle 20  # at rest
    .venv/bin/python benchmarks/bench_service.py --server granian uvicorn --loop asyncio  # HTTP
    .venv/bin/python benchmarks/bench_service.py --loop uvloop asyncio  # the event loops
    .venv/bin/python benchmarks/bench_service.py --workers 2 --clients 200 --collector  # gc

``--compare SRC`` starts a second server on another source tree (``SRC`` first on its
``PYTHONPATH``) and drives both in one run, alternately (the order turns each round), and
prints each cell's median over ``--rounds`` with the ratio of this tree to the other: on a
machine whose load changes, only figures taken side by side compare. ``--server granian
uvicorn`` does the same for two HTTP servers under the same app (granian: ``pip install
granian``), each on ``--loop`` (default: uvloop when it is installed, as both pick), and
``--loop uvloop asyncio`` for two event loops under one server.

``--workers 1 2 4`` runs the same clients against ``tooluse serve --workers N`` for each N
(uvicorn's processes sharing the port, the same fake model in each), their state in
PostgreSQL and Redis, as several workers need (``--database-url`` and ``--redis-url``;
without them, throwaway servers: the tests' embedded PostgreSQL with pgvector and Debian's
``redis-server``, a database and a Redis database per tree with ``--compare``), and ends
with each N's throughput as a ratio to the first. ``--durable-runs`` runs every turn as a
DBOS workflow. The server's CPU and RSS are those of all its processes (and all their
threads: granian's Rust ones too); a run in which the server restarted a worker says so.

Both endpoints stream: ``/api/chat`` (the page's SSE, read to its ``done`` event) and ``/v1``
(``/v1/chat/completions`` with ``stream: true``, read to ``[DONE]``). Per run it reports the
latency the service adds (median and p99), requests/s, and the server's own CPU per request
(user + system of all its processes from ``/proc``, robust to other jobs on the machine,
unlike the wall figures) and its resident memory after the run, then where the machine's
CPU per request went: the server, the PostgreSQL and Redis it used when they run on this
machine (the processes listening on their ports, with their children: PostgreSQL's
backends and autovacuum), this client, and their sum (side by side, its ratio too: what
limits requests/s when all of them share the cores). ``--profile`` runs the
server under cProfile (one process: ``--workers 1`` at most) and writes the stats when it
stops (``python -m pstats FILE``). ``--collector`` logs every garbage collection of the
server's processes (``gc.callbacks``) and reports, per cell over its rounds, the collections
per 1,000 requests of each generation, the collector's CPU per request, the longest pause
(the collecting thread's CPU, and wall time: a pause holds up every stream in flight on its
worker) and the objects found unreachable per request (reference cycles).

The server runs in its own process (uvicorn, the app of ``tooluse serve`` with the sample tools
and knowledge base, the bundled embedding model) with a model that waits ``--latency`` seconds
per call and then answers (the router asks for ``get_weather`` on weather questions). Clients
post to ``/api/chat`` over real HTTP and read the SSE stream to its ``done`` event. Each client
alternates a tool question (2 model calls) and a knowledge question (2 model calls, one
retrieval); the overhead of a request is its latency minus the model's waits. ``--auth
key`` sends the one shared API key; ``--auth users`` gives each client a key of its own (a
user of a tenant, who owns the client's conversation) and the service a tool-access rule,
so that a request pays for its authentication, the owner check and the tool cut.
``--tool-search``: the service's router sees only the search tool, and the model searches
for the weather first, then calls what it found (3 model calls a tool question).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import gc
import importlib.util
import itertools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from fastapi import FastAPI

    from tooluse.service import ServiceConfig

QUESTIONS = {
    "tools": ("What's the weather in Paris?", 2),  # the router's call and the answer
    "knowledge": ("How long do I have to return an item?", 2),
}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The server's settings, for its process and, with `--workers N`, each worker uvicorn starts.
_SERVER_SETTINGS = "TOOLUSE_BENCH_SERVER"


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
        last = prompt.messages[-1]
        searching = prompt.options.tool_callbacks[0].definition.name == SEARCH
        if isinstance(last, ToolResponseMessage):
            if not searching or last.responses[0].name != SEARCH:
                return self._empty
        else:
            question = next(m.text for m in reversed(prompt.messages) if isinstance(m, UserMessage))
            if "weather" not in question:
                return self._empty
            if searching:  # with --tool-search: find the tool first
                call = ToolCall(id=f"call_{next(self._calls)}", name=SEARCH, arguments=QUERY)
                return chat_response(tool_calls=[call])
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
SEARCH = "toolSearchTool"
QUERY = '{"query": "current weather of a city", "max_results": 3}'


def _key(client: int) -> str:
    return f"bench-key-{client}"


def _config(settings: dict[str, Any]) -> ServiceConfig:
    from tooluse.calling import Caller, ToolAccess, ToolAccessPolicy
    from tooluse.service import ApiKeys, ServiceConfig

    model = _FixedLatencyModel(settings["latency"])
    config = ServiceConfig(db=settings["db"], model=model, **settings["shared"])
    if settings["auth"] == "key":
        config = dataclasses.replace(config, api_key=_key(0))
    elif settings["auth"] == "users":
        keys = {
            _key(n): Caller(f"user-{n}", "bench", frozenset({"customer"}))
            for n in range(settings["users"])
        }
        rules = ToolAccessPolicy(tools={"cancel_order": ToolAccess(allow_roles=["support"])})
        config = dataclasses.replace(config, authenticators=[ApiKeys(keys)], tool_visibility=rules)
    return config


def worker_app() -> FastAPI:
    """The app of one worker process (uvicorn's factory, ``bench_service:worker_app``)."""
    from tooluse.service import create_app

    settings = json.loads(os.environ[_SERVER_SETTINGS])
    app = create_app(_config(settings))
    # The collector set as `tooluse serve` sets it once its app is built; a tree from before
    # it did serves as its own `tooluse serve` did.
    startup = importlib.import_module("tooluse.service._startup")
    tune = getattr(startup, "tune_garbage_collector", None)
    if tune is not None:
        tune()
    if settings["collections"] is not None:
        _log_collections(Path(settings["collections"]))
    return app


def _log_collections(directory: Path) -> None:
    """Append each of this process's collections to ``directory/PID``, a line each: when it
    ended (``time.time()``), its generation, the pause's CPU (the collecting thread's) and
    wall seconds, the objects it collected."""
    log = directory / str(os.getpid())
    started = [0.0, 0.0]  # one collection at a time: the collector does not nest

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[:] = time.perf_counter(), time.thread_time()
            return
        wall, cpu = time.perf_counter() - started[0], time.thread_time() - started[1]
        with log.open("a") as file:
            file.write(f"{time.time()} {info['generation']} {cpu} {wall} {info['collected']}\n")

    gc.callbacks.append(record)


@dataclasses.dataclass(frozen=True)
class _Collection:
    generation: int
    cpu: float  # seconds
    wall: float
    collected: int


def _collections(directory: Path, start: float, end: float) -> list[_Collection]:
    """The collections that the processes logging to ``directory`` ended between ``start``
    and ``end``."""
    found = []
    for log in directory.iterdir():
        for line in log.read_text().splitlines():
            ended, generation, cpu, wall, collected = line.split()
            if start <= float(ended) <= end:
                found.append(_Collection(int(generation), float(cpu), float(wall), int(collected)))
    return found


def _serve() -> None:
    """The server (in its own process: ``bench_service.py --serve``, the settings in the
    environment)."""
    settings = json.loads(os.environ[_SERVER_SETTINGS])
    if settings["server"] == "granian":
        _serve_granian(settings)
    else:
        _serve_uvicorn(settings)


def _serve_uvicorn(settings: dict[str, Any]) -> None:
    import uvicorn

    host, port, profile = "127.0.0.1", settings["port"], settings["profile"]
    if settings["workers"] > 1:  # uvicorn's processes, each building its app from the settings
        from uvicorn.supervisors import Multiprocess

        config = uvicorn.Config(
            "bench_service:worker_app",
            factory=True,
            host=host,
            port=port,
            workers=settings["workers"],
            loop=settings["loop"],
            log_level="warning",
            # A worker that answers no health check for this long is killed and started
            # again: on a loaded machine, starting (the embedding model) takes longer than 5 s.
            timeout_worker_healthcheck=120,
        )
        # The port as `tooluse serve --workers N` binds it (on Linux a socket per worker);
        # a tree from before it did serves on uvicorn's one shared socket, as it did.
        serve = importlib.import_module("tooluse.cli.serve")
        bind = getattr(serve, "bind_port", None)
        if bind is None:
            listener = config.bind_socket()
        else:
            listener = bind(host, port, socket_per_worker=serve.SPREADS_CONNECTIONS)
        Multiprocess(config, sockets=[listener]).run()
        return
    app = worker_app()
    if profile is None:
        uvicorn.run(app, host=host, port=port, loop=settings["loop"], log_level="warning")
        return
    profiler = cProfile.Profile()
    profiler.enable()
    try:  # until SIGINT, which uvicorn raises again as KeyboardInterrupt once it has stopped
        uvicorn.run(app, host=host, port=port, loop=settings["loop"], log_level="warning")
    except KeyboardInterrupt:
        pass
    finally:
        profiler.disable()
        profiler.dump_stats(profile)


def _serve_granian(settings: dict[str, Any]) -> None:
    """granian's supervisor and its worker processes (even for one: the supervisor forks
    them), each building its app from the settings."""
    from granian.constants import Interfaces, Loops  # type: ignore[import-not-found]
    from granian.log import LogLevels  # type: ignore[import-not-found]
    from granian.server import Server  # type: ignore[import-not-found]

    Server(
        "bench_service:worker_app",
        address="127.0.0.1",
        port=settings["port"],
        interface=Interfaces.ASGI,
        workers=settings["workers"],
        loop=Loops(settings["loop"]),
        factory=True,
        log_level=LogLevels.warning,
    ).serve()


def _processes(pid: int) -> list[int]:
    """``pid`` and its descendants (a supervisor's workers), from ``/proc``."""
    found = [pid]
    for thread in Path(f"/proc/{pid}/task").iterdir():  # a child is its forking thread's
        try:
            children = (thread / "children").read_text().split()
        except FileNotFoundError:  # the thread ended since the listing (a pool's, idle)
            continue
        for child in children:
            found += _processes(int(child))
    return found


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` and its descendants (Linux ``/proc``), with that
    of the children they reaped (PostgreSQL's autovacuum workers come and go)."""
    total = 0
    for process in _processes(pid):
        fields = Path(f"/proc/{process}/stat").read_text().rpartition(")")[2].split()
        total += sum(int(field) for field in fields[11:15])  # utime, stime, cutime, cstime
    return total / CLOCK_TICKS


def _rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` and its descendants."""
    total = 0
    for process in _processes(pid):
        lines = Path(f"/proc/{process}/status").read_text().splitlines()
        rss = next((line for line in lines if line.startswith("VmRSS:")), None)
        if rss is None:
            raise RuntimeError(f"no VmRSS for process {process}")
        total += int(rss.split()[1])
    return total / 1024


def _connections_per_worker(server: int, port: int) -> list[int]:
    """The established connections to ``port`` each worker of ``server`` holds (its
    descendants listening on ``port``; not the supervisor, nor multiprocessing's resource
    tracker), from ``/proc``: the sockets' inodes in ``/proc/net/tcp``, the processes'
    descriptors naming them."""
    states: dict[str, str] = {}  # a socket's descriptor link: its state
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()  # local address, remote, state, ..., inode
            if int(fields[1].rpartition(":")[2], 16) == port:
                states[f"socket:[{fields[9]}]"] = fields[3]
    counts = []
    for process in _processes(server)[1:]:
        held = []
        for descriptor in Path(f"/proc/{process}/fd").iterdir():
            try:
                held.append(states.get(os.readlink(descriptor)))
            except FileNotFoundError:  # closed since it was listed: not held
                continue
        if "0A" in held:  # listening: a worker
            counts.append(held.count("01"))  # established
    return counts


def _listening_process(port: int) -> int | None:
    """The process listening on local TCP ``port`` (a PostgreSQL's postmaster, whose backends
    are its children; a redis-server), from ``/proc``; None when no process here does (a
    server on another machine) or it is out of this user's reach."""
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()  # local address, remote, state, ..., inode
            if int(fields[1].rpartition(":")[2], 16) == port and fields[3] == "0A":
                listening.add(f"socket:[{fields[9]}]")
    holders = []
    for process in Path("/proc").iterdir():
        if not process.name.isdigit():
            continue
        try:
            descriptors = [os.readlink(descriptor) for descriptor in (process / "fd").iterdir()]
        except (FileNotFoundError, PermissionError):  # ended since the listing, or not ours
            continue
        if listening.intersection(descriptors):
            holders.append(int(process.name))
    return min(holders, default=None)  # a forking server's first process, the others its children


def _backing_processes(state: dict[str, Any]) -> dict[str, int]:
    """The local processes of a tree's PostgreSQL and Redis (``ServiceConfig``'s URLs), by
    name, for their CPU per request; those that run elsewhere are left out."""
    found = {}
    for name, url in (("postgres", state["database_url"]), ("redis", state["redis_url"])):
        address = urllib.parse.urlsplit(url)
        if address.hostname in ("127.0.0.1", "localhost", "::1"):
            pid = _listening_process(address.port or {"postgres": 5432, "redis": 6379}[name])
            if pid is not None:
                found[name] = pid
    return found


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


class _Connection:
    """A client's one keep-alive HTTP/1.1 connection: the benchmark's own minimal client
    (a request written whole, the response's chunks read to the last one). With httpx the
    client needed about 1 ms of CPU per streamed request, and at 64 streams it was the
    client's one CPU, not the server, that set the throughput and the tail latency."""

    def __init__(self, base: str) -> None:
        host, _, port = base.removeprefix("http://").partition(":")
        self._address = (host, int(port))
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, path: str, body: bytes, key: str) -> tuple[int, bytes]:
        """The status and the (de-chunked) body of ``POST path``."""
        if self._streams is None:
            self._streams = await asyncio.open_connection(*self._address)
        reader, writer = self._streams
        host = f"{self._address[0]}:{self._address[1]}"
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
            status = int(head.split(" ", 2)[1])
            if "transfer-encoding: chunked" in head:
                chunks = []
                while size := int((await reader.readline()).split(b";")[0], 16):
                    chunks.append((await reader.readexactly(size + 2))[:-2])
                await reader.readuntil(b"\r\n")  # the end of the (empty) trailer
                content = b"".join(chunks)
            else:
                length = int(head.partition("content-length:")[2].split("\r\n")[0] or 0)
                content = await reader.readexactly(length)
            if "connection: close" in head:
                self.close()
        except BaseException:
            self.close()
            raise
        return status, content

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


async def _chat(
    connection: _Connection, endpoint: str, question: str, conversation: str, key: str
) -> tuple[float, str | None]:
    """Seconds to the end of one streamed answer, and how it failed (``None``: it ended
    well)."""
    body: dict[str, object]
    if endpoint == "api":
        path, body = "/api/chat", {"message": question, "conversation_id": conversation}
        end = "event: done"
    else:
        path = "/v1/chat/completions"
        body = {
            "model": "tooluse-qa",
            "messages": [{"role": "user", "content": question}],
            "stream": True,
        }
        end = "data: [DONE]"
    started = time.perf_counter()
    try:
        status, content = await connection.post(path, json.dumps(body).encode(), key)
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:  # refused or dropped
        return time.perf_counter() - started, f"{type(exc).__name__}: {exc}"
    elapsed = time.perf_counter() - started
    if status != 200:
        return elapsed, f"HTTP {status}"
    lines = content.decode().splitlines()
    failed = next(
        (line for line in lines if line == "event: error" or line.startswith('data: {"error"')),
        None,
    )
    if failed is not None:
        return elapsed, failed[:200]
    return elapsed, None if end in lines else "the stream ended before its end"


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
    backing: dict[str, int],
) -> dict[str, float]:
    """``clients`` streams at once, each sending ``requests`` questions (``kinds`` in turn):
    the added latency per kind (median, p99), errors, requests/s, server CPU ms per request
    (of all the server's processes) and RSS; the CPU per request of the ``backing`` servers'
    processes (name: pid) and of this client."""
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    errors: Counter[str] = Counter()
    answered_first = 0
    split: list[int] = []  # connections per worker, once every client had its first answer

    async def one_client(number: int) -> None:
        nonlocal answered_first
        connection = _Connection(base)
        for index in range(requests):
            kind = kinds[index % len(kinds)]
            question, calls = QUESTIONS[kind]
            conversation = f"bench-{workers}-{endpoint}-{clients}-{number}"
            key = _key(number if auth == "users" else 0)
            elapsed, failure = await _chat(connection, endpoint, question, conversation, key)
            if failure is None:
                samples[kind].append((elapsed - calls * latency) * 1000)
            else:
                errors[failure] += 1
            if index == 0:
                answered_first += 1
                if answered_first == clients:  # each holds its connection for the run
                    split.extend(_connections_per_worker(server, int(base.rpartition(":")[2])))
        connection.close()

    processes = _processes(server)
    cpu_before = _cpu_seconds(server)
    backing_before = {name: _cpu_seconds(pid) for name, pid in backing.items()}
    client_cpu_before = time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(one_client(n) for n in range(clients)))
    wall = time.perf_counter() - started
    cpu = _cpu_seconds(server) - cpu_before
    client_cpu = time.process_time() - client_cpu_before
    backing_cpu = {name: _cpu_seconds(pid) - backing_before[name] for name, pid in backing.items()}
    if _processes(server) != processes:  # the server restarted a worker that did not answer
        print(f"(workers restarted during the run: CPU not comparable; were {processes})")
    total = clients * requests
    for failure, count in errors.most_common():  # what the errors column counts
        print(f"({count} x {failure})")
    figures = {
        "errors": errors.total(),
        "req/s": total / wall,
        "cpu ms/req": cpu / total * 1000,
        "client cpu %": client_cpu / wall * 100,
        "client cpu ms/req": client_cpu / total * 1000,
        **{f"{name} cpu ms/req": seconds / total * 1000 for name, seconds in backing_cpu.items()},
        "machine cpu ms/req": (cpu + client_cpu + sum(backing_cpu.values())) / total * 1000,
        "rss MiB": _rss_mib(server),
        # of the connections the workers held, the share of the busiest (50%: even on two)
        "busiest worker %": max(split) / sum(split) * 100 if sum(split) else float("nan"),
    }
    if len(split) > 1:
        print(f"(connections per worker: {'/'.join(map(str, split))})")
    for kind, values in samples.items():
        values.sort()
        figures[f"{kind} p50"] = statistics.median(values) if values else float("nan")
        figures[f"{kind} p99"] = (
            values[min(len(values) - 1, int(len(values) * 0.99))] if values else float("nan")
        )
    return figures


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
def _shared_state(args: argparse.Namespace, trees: int) -> Iterator[list[dict[str, Any]]]:
    """Per tree, the PostgreSQL database and Redis its workers share (``ServiceConfig``
    fields): the ones given, else throwaway servers (the tests' embedded PostgreSQL with
    pgvector, and redis-server), a database and a Redis database of each per tree. Emptied
    of what earlier benchmarks left; the first run ingests the knowledge base, the others
    use it."""
    with ExitStack() as stack:
        databases, redis_urls = [args.database_url], [args.redis_url]
        if args.database_url is None or args.redis_url is None:
            sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
            from _servers import (  # type: ignore[import-not-found, unused-ignore]
                PostgresServer,
                RedisServer,
            )

        if args.database_url is None:
            postgres = PostgresServer()
            stack.callback(postgres.stop)
            databases = [postgres.new_database() for _ in range(trees)]
        if args.redis_url is None:
            redis_server = RedisServer()
            stack.callback(redis_server.stop)
            base = redis_server.url.rpartition("/")[0]
            redis_urls = [f"{base}/{number}" for number in range(trees)]
        shared = []
        for database_url, redis_url in zip(databases, redis_urls, strict=True):
            _empty(database_url, redis_url)
            shared.append({"database_url": database_url, "redis_url": redis_url})
            if args.durable_runs:
                shared[-1]["durable_runs"] = True
        yield shared


def _empty(database_url: str, redis_url: str) -> None:
    """Drop what earlier benchmarks left (conversations, runs, the knowledge base)."""
    import psycopg
    import redis

    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute("DROP SCHEMA IF EXISTS dbos CASCADE")
        connection.execute("DROP SCHEMA public CASCADE")
        connection.execute("CREATE SCHEMA public")
    with redis.Redis.from_url(redis_url) as client:
        client.flushdb()


def _start_server(source: str | None, settings: dict[str, Any]) -> subprocess.Popen[bytes]:
    """The server process, on ``source`` (a ``src`` directory) when given, else on the
    ``tooluse`` this interpreter imports; this directory on the path for uvicorn's workers."""
    env = dict(os.environ)
    path = [source, str(Path(__file__).parent), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, path))
    env[_SERVER_SETTINGS] = json.dumps(settings)
    return subprocess.Popen([sys.executable, __file__, "--serve"], env=env)


def _stop_server(process: subprocess.Popen[bytes]) -> None:
    # uvicorn stops (a supervisor its workers first); a profiled server writes its stats
    process.send_signal(signal.SIGINT)
    try:
        process.wait(120)
    except subprocess.TimeoutExpired:
        for pid in reversed(_processes(process.pid)):
            os.kill(pid, signal.SIGKILL)
        process.wait(10)


Cell = tuple[str, int, str, int]  # tree, workers, endpoint, clients
Cells = dict[Cell, list[dict[str, float]]]  # the runs of each cell


def _report_idle(
    servers: dict[str, tuple[subprocess.Popen[bytes], str]], workers: int, seconds: float
) -> None:
    """Each server's CPU at rest (its background threads: DBOS's pollers with durable runs),
    the servers measured at once over the same ``seconds``."""
    before = {label: _cpu_seconds(process.pid) for label, (process, _) in servers.items()}
    time.sleep(seconds)
    for label, (process, _) in servers.items():
        rate = (_cpu_seconds(process.pid) - before[label]) / seconds * 1000
        print(f"at rest, {label}, {workers} worker(s): {rate:.1f} ms of CPU per second")


def _measure(
    args: argparse.Namespace,
    workers: int,
    servers: dict[str, tuple[subprocess.Popen[bytes], str]],
    backing: dict[str, dict[str, int]],
    cells: Cells,
    collections: Path | None,
) -> None:
    """Every cell ``args.rounds`` times, the trees in turns (who goes first rotates); with
    ``collections`` (where the servers log them, a directory per port), each run's
    collections; ``backing``: each tree's PostgreSQL and Redis processes (name: pid)."""
    trees = list(servers)
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
                        workers,
                        backing[label],
                    )
                    cell = (label, workers, endpoint, clients)
                    started = time.time()
                    figures = asyncio.run(run)
                    if collections is not None:
                        log = collections / base.rpartition(":")[2]
                        figures.update(_collector_figures(_collections(log, started, time.time())))
                    cells.setdefault(cell, []).append(figures)


def _collector_figures(collections: list[_Collection]) -> dict[str, float]:
    """A run's collections per generation, their CPU, and its longest pause (CPU and wall)."""
    figures: dict[str, float] = {f"gen{n} collections": 0 for n in range(3)}
    for collection in collections:
        figures[f"gen{collection.generation} collections"] += 1
    figures["collector cpu ms"] = sum(c.cpu for c in collections) * 1000
    figures["longest pause cpu ms"] = max((c.cpu for c in collections), default=0) * 1000
    figures["longest pause wall ms"] = max((c.wall for c in collections), default=0) * 1000
    figures["collected"] = sum(c.collected for c in collections)
    return figures


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def _report(args: argparse.Namespace, cells: Cells) -> None:
    kinds = args.question
    added = " | ".join(f"{kind} added p50 ms | p99 ms" for kind in kinds)
    print(
        f"| tree | workers | endpoint | clients | {added} | errors | req/s "
        "| server CPU ms/req | server RSS MiB | client CPU % | busiest worker's connections % |"
    )
    print("|---|---:|---|---:|" + "---:|" * (2 * len(kinds) + 6))
    for (label, workers, endpoint, clients), runs in cells.items():
        latency = " | ".join(
            f"{_median(runs, f'{k} p50'):.1f} | {_median(runs, f'{k} p99'):.1f}" for k in kinds
        )
        print(
            f"| {label} | {workers} | {endpoint} | {clients} | {latency} | "
            f"{sum(run['errors'] for run in runs):.0f} | {_median(runs, 'req/s'):.1f} | "
            f"{_median(runs, 'cpu ms/req'):.2f} | {_median(runs, 'rss MiB'):.0f} | "
            f"{_median(runs, 'client cpu %'):.0f} | {_median(runs, 'busiest worker %'):.0f} |"
        )
    _report_machine(cells)
    if args.collector:
        _report_collector(args, cells)
    labels = list(dict.fromkeys(label for label, *_ in cells))
    if len(labels) == 2:
        _report_comparison(args, cells, *labels)
    if len(args.workers) > 1:
        _report_scaling(args, cells, labels)


def _report_machine(cells: Cells) -> None:
    """Where the machine's CPU per request went (medians): the server, the PostgreSQL and
    Redis it used when they run here, and this client; "all" is their sum (not the other
    jobs on the machine)."""
    measured = next(iter(cells.values()))[0]
    backing = [name for name in ("postgres", "redis") if f"{name} cpu ms/req" in measured]
    columns = "".join(f" {name} |" for name in backing)
    print(f"\n| tree | workers | endpoint | clients | CPU ms/req: server |{columns} client | all |")
    print("|---|---:|---|---:|" + "---:|" * (len(backing) + 3))
    for (label, workers, endpoint, clients), runs in cells.items():
        parts = ["cpu ms/req", *(f"{name} cpu ms/req" for name in backing), "client cpu ms/req"]
        shares = " | ".join(f"{_median(runs, part):.2f}" for part in parts)
        print(
            f"| {label} | {workers} | {endpoint} | {clients} | {shares} | "
            f"{_median(runs, 'machine cpu ms/req'):.2f} |"
        )


def _report_collector(args: argparse.Namespace, cells: Cells) -> None:
    """Each cell's collections over all its rounds: per 1,000 requests per generation, the
    collector's CPU per request, the longest pause, the objects found unreachable."""
    print(
        "\n| tree | workers | endpoint | clients | collections per 1,000 requests, gen 0 / 1 / 2 "
        "| collector CPU µs/req | longest pause ms, CPU (wall) | objects collected per request |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for (label, workers, endpoint, clients), runs in cells.items():
        requests = clients * args.requests * len(runs)
        per_generation = " / ".join(
            f"{sum(run[f'gen{n} collections'] for run in runs) / requests * 1000:.2f}"
            for n in range(3)
        )
        cpu = sum(run["collector cpu ms"] for run in runs) / requests * 1000
        longest = max(runs, key=lambda run: run["longest pause cpu ms"])
        print(
            f"| {label} | {workers} | {endpoint} | {clients} | {per_generation} | {cpu:.1f} | "
            f"{longest['longest pause cpu ms']:.1f} ({longest['longest pause wall ms']:.1f}) | "
            f"{sum(run['collected'] for run in runs) / requests:.2f} |"
        )


def _report_comparison(args: argparse.Namespace, cells: Cells, first: str, second: str) -> None:
    """The first server's CPU and throughput as ratios to the second's, round by round."""
    print(
        f"\n| workers | endpoint | clients | CPU ms/req, {first} / {second} "
        f"| req/s, {first} / {second} | per round | machine CPU (all), per round "
        f"| busiest worker's connections %, per round, {first} / {second} "
        f"| {args.question[0]} p99 ms, per round |"
    )
    print("|---:|---|---:|---:|---:|---|---|---|---|")
    for workers in args.workers:
        for endpoint in args.endpoint:
            for clients in args.clients:
                pairs = list(
                    zip(
                        cells[(first, workers, endpoint, clients)],
                        cells[(second, workers, endpoint, clients)],
                        strict=True,
                    )
                )
                cpu = [ours["cpu ms/req"] / theirs["cpu ms/req"] for ours, theirs in pairs]
                machine = [
                    ours["machine cpu ms/req"] / theirs["machine cpu ms/req"]
                    for ours, theirs in pairs
                ]
                rate = [ours["req/s"] / theirs["req/s"] for ours, theirs in pairs]
                busiest = ", ".join(
                    f"{ours['busiest worker %']:.0f}/{theirs['busiest worker %']:.0f}"
                    for ours, theirs in pairs
                )
                p99 = f"{args.question[0]} p99"
                tails = ", ".join(f"{ours[p99]:.0f}/{theirs[p99]:.0f}" for ours, theirs in pairs)
                print(
                    f"| {workers} | {endpoint} | {clients} | {statistics.median(cpu):.2f} | "
                    f"{statistics.median(rate):.2f} | {', '.join(f'{r:.2f}' for r in cpu)} | "
                    f"{statistics.median(machine):.2f} ({', '.join(f'{r:.2f}' for r in machine)}) "
                    f"| {busiest} | {tails} |"
                )


def _report_scaling(args: argparse.Namespace, cells: Cells, labels: list[str]) -> None:
    """Each number of workers' throughput (median req/s) and its ratio to the first's."""
    first = args.workers[0]
    columns = " | ".join(f"{n} workers req/s (x{first})" for n in args.workers)
    print(f"\n| tree | endpoint | clients | {columns} |")
    print("|---|---|---:|" + "---:|" * len(args.workers))
    for label in labels:
        for endpoint in args.endpoint:
            for clients in args.clients:
                rates = {
                    n: _median(cells[(label, n, endpoint, clients)], "req/s") for n in args.workers
                }
                row = " | ".join(
                    f"{rates[n]:.1f} ({rates[n] / rates[first]:.2f})" for n in args.workers
                )
                print(f"| {label} | {endpoint} | {clients} | {row} |")


def main() -> None:
    if sys.argv[1:] == ["--serve"]:
        _serve()
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
    parser.add_argument(
        "--tool-search",
        action="store_true",
        help="the service's router searches for its tools (the model searches, then calls)",
    )
    parser.add_argument("--profile", help="run the server under cProfile, stats to this file")
    parser.add_argument(
        "--auth",
        choices=["none", "key", "users"],
        default="none",
        help="none; the one shared API key; a key per client with a tool-access rule",
    )
    parser.add_argument("--compare", metavar="SRC", help="a source tree to run side by side")
    parser.add_argument(
        "--server",
        nargs="+",
        choices=["uvicorn", "granian"],
        default=["uvicorn"],
        help="the HTTP server the app runs on; two: both side by side, the first's CPU and "
        "throughput as ratios to the second's (default: uvicorn)",
    )
    parser.add_argument(
        "--loop",
        nargs="+",
        choices=["auto", "asyncio", "uvloop"],
        default=["auto"],
        help="the servers' event loop; two: both side by side, the first's CPU and throughput "
        "as ratios to the second's (default: auto, uvloop when it is installed)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="runs of every cell; medians")
    parser.add_argument(
        "--collector",
        action="store_true",
        help="log the servers' garbage collections (gc.callbacks) and report them per cell",
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
    parser.add_argument(
        "--idle",
        type=float,
        default=0,
        metavar="SECONDS",
        help="first measure each server's CPU at rest over this long (ms of CPU per second)",
    )
    args = parser.parse_args()
    if args.tool_search:  # a tool question's calls: the search, the tool, the answer
        QUESTIONS["tools"] = (QUESTIONS["tools"][0], 3)
    if args.durable_runs and not args.workers:
        parser.error("--durable-runs needs --workers (it runs on PostgreSQL)")
    if args.profile and args.workers and args.workers != [1]:
        parser.error("--profile profiles one process: --workers 1 at most")
    comparisons = [bool(args.compare), len(args.server) > 1, len(args.loop) > 1]
    if any(comparisons) and (args.database_url or args.redis_url):
        parser.error("side by side, each server has its own state: no --database-url, --redis-url")
    if sum(comparisons) > 1:
        parser.error("one comparison at a time: --compare, two --server or two --loop")
    if args.profile and args.server != ["uvicorn"]:
        parser.error("--profile profiles uvicorn's one process (granian's are its workers)")
    if "granian" in args.server and importlib.util.find_spec("granian") is None:
        parser.error("--server granian needs granian: pip install granian")
    if "uvloop" in args.loop and importlib.util.find_spec("uvloop") is None:
        parser.error("--loop uvloop needs uvloop: pip install uvloop")
    on_postgres = args.workers is not None
    args.workers = args.workers or [1]
    # (label, source tree, server, event loop) of each server run side by side
    trees: list[tuple[str, str | None, str, str]] = [("this", None, args.server[0], args.loop[0])]
    if args.compare:
        trees.append((args.compare, args.compare, args.server[0], args.loop[0]))
    elif len(args.server) > 1:
        trees = [(server, None, server, args.loop[0]) for server in args.server]
    elif len(args.loop) > 1:
        trees = [(loop, None, args.server[0], loop) for loop in args.loop]
    print(
        f"model latency {args.latency * 1000:.0f} ms per call; {os.cpu_count()} CPUs; "
        f"auth: {args.auth}; durable runs: {'on' if args.durable_runs else 'off'}; "
        f"load {os.getloadavg()[0]:.1f}; medians of {args.rounds} round(s)"
    )
    cells: Cells = {}
    with tempfile.TemporaryDirectory() as directory, ExitStack() as stack:
        shared = (
            stack.enter_context(_shared_state(args, len(trees)))
            if on_postgres
            else [{} for _ in trees]
        )
        if args.tool_search:
            shared = [{**state, "tool_search": True} for state in shared]
        for workers in args.workers:
            servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
            try:
                for number, (label, source, server, loop) in enumerate(trees):
                    port = _free_port()
                    settings = {
                        "db": str(Path(directory) / f"bench{number}.db"),
                        "port": port,
                        "latency": args.latency,
                        "auth": args.auth,
                        "users": max(args.clients),  # a key per client up to the most clients
                        "workers": workers,
                        "server": server,
                        "loop": loop,
                        "shared": shared[number],
                        "collections": None,
                        "profile": (
                            f"{args.profile}.{number}" if args.profile and number else args.profile
                        ),
                    }
                    if args.collector:
                        log = Path(directory) / "collections" / str(port)
                        log.mkdir(parents=True)
                        settings["collections"] = str(log)
                    process = _start_server(source, settings)
                    servers[label] = (process, f"http://127.0.0.1:{port}")
                for process, base in servers.values():
                    asyncio.run(_ready(base))
                    _settle(process.pid)  # every worker started, not only the one that answered
                pids = ", ".join(f"{label} {p.pid}" for label, (p, _) in servers.items())
                print(f"{workers} worker(s), server pids: {pids}")  # for py-spy -p
                if args.idle:
                    _report_idle(servers, workers, args.idle)
                collections = Path(directory) / "collections" if args.collector else None
                backing = {
                    label: _backing_processes(state) if on_postgres else {}
                    for (label, *_), state in zip(trees, shared, strict=True)
                }
                _measure(args, workers, servers, backing, cells, collections)
            finally:
                for process, _ in servers.values():
                    _stop_server(process)
    print(f"load {os.getloadavg()[0]:.1f} at the end")
    _report(args, cells)


if __name__ == "__main__":
    main()
