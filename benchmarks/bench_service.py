"""``tooluse serve`` under concurrent streaming chats, with a fixed-latency fake model.

    .venv/bin/python benchmarks/bench_service.py                      # 1, 8, 32 clients
    .venv/bin/python benchmarks/bench_service.py --clients 64 --requests 10 --latency 0.1
    .venv/bin/python benchmarks/bench_service.py --clients 1 200 --endpoint api v1 --question tools
    .venv/bin/python benchmarks/bench_service.py --clients 8 --profile /tmp/serve.prof  # cProfile
    .venv/bin/python benchmarks/bench_service.py --auth users   # per-user keys, tool rules

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
import multiprocessing
import os
import signal
import socket
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from tooluse.messages import Prompt, ToolResponseMessage, UserMessage
from tooluse.testing import FunctionModel, ResponseLike, tool_call

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


def _key(client: int) -> str:
    return f"bench-key-{client}"


def _serve(db: str, port: int, latency: float, profile: str | None, auth: str, users: int) -> None:
    import uvicorn

    from tooluse.calling import Caller, ToolAccess, ToolAccessPolicy
    from tooluse.service import ApiKeys, ServiceConfig, create_app

    config = ServiceConfig(db=db, model=_model(latency))
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
) -> None:
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
    for kind, values in samples.items():
        values.sort()
        p50 = statistics.median(values) if values else float("nan")
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))] if values else float("nan")
        print(
            f"| {endpoint} | {clients} | {kind} | {len(values)} | {p50:.1f} | {p99:.1f} | "
            f"{errors} | {total / wall:.1f} | {cpu / total * 1000:.2f} | {_rss_mib(server):.0f} |"
        )


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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        db = str(Path(directory) / "bench.db")
        port = _free_port()
        server = multiprocessing.get_context("spawn").Process(
            target=_serve,
            args=(db, port, args.latency, args.profile, args.auth, max(args.clients)),
            daemon=True,
        )
        server.start()
        base = f"http://127.0.0.1:{port}"
        try:
            asyncio.run(_ready(base))
            print(
                f"model latency {args.latency * 1000:.0f} ms per call; {os.cpu_count()} CPUs; "
                f"auth: {args.auth}"
            )
            print(
                "| endpoint | clients | question | requests | added p50 ms | p99 ms | errors "
                "| req/s | server CPU ms/req | server RSS MiB |"
            )
            print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
            assert server.pid is not None
            for endpoint in args.endpoint:
                for clients in args.clients:
                    run = _run(
                        base,
                        server.pid,
                        endpoint,
                        args.question,
                        clients,
                        args.requests,
                        args.latency,
                        args.auth,
                    )
                    asyncio.run(run)
        finally:
            if args.profile and server.pid is not None:
                os.kill(server.pid, signal.SIGINT)  # lets it write the profile
                server.join(120)
            server.terminate()
            server.join(10)


if __name__ == "__main__":
    main()
