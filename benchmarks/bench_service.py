"""``tooluse serve`` under concurrent streaming chats, with a fixed-latency fake model.

    .venv/bin/python benchmarks/bench_service.py                      # 1, 8, 32 clients
    .venv/bin/python benchmarks/bench_service.py --clients 64 --requests 10 --latency 0.1

The server runs in its own process (uvicorn, the app of ``tooluse serve`` with the sample tools
and knowledge base, the bundled embedding model) with a model that waits ``--latency`` seconds
per call and then answers (the router asks for ``get_weather`` on weather questions). Clients
post to ``/api/chat`` over real HTTP and read the SSE stream to its ``done`` event. Each client
alternates a tool question (3 model calls) and a knowledge question (2 model calls, one
retrieval); the overhead of a request is its latency minus the model's waits.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from tooluse.messages import Prompt, ToolResponseMessage, UserMessage
from tooluse.testing import FunctionModel, ResponseLike, tool_call

QUESTIONS = (
    ("tools", "What's the weather in Paris?", 3),
    ("knowledge", "How long do I have to return an item?", 2),
)


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


def _serve(db: str, port: int, latency: float) -> None:
    import uvicorn

    from tooluse.service import ServiceConfig, create_app

    app = create_app(ServiceConfig(db=db, model=_model(latency)))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


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


async def _chat(client: httpx.AsyncClient, question: str, conversation: str) -> tuple[float, bool]:
    started = time.perf_counter()
    done = False
    async with client.stream(
        "POST", "/api/chat", json={"message": question, "conversation_id": conversation}
    ) as response:
        async for line in response.aiter_lines():
            if line == "event: done":
                done = True
            elif line == "event: error":
                return time.perf_counter() - started, False
    return time.perf_counter() - started, done and response.status_code == 200


async def _run(base: str, clients: int, requests: int, latency: float) -> None:
    samples: dict[str, list[float]] = {kind: [] for kind, _, _ in QUESTIONS}
    errors = 0
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:

        async def one_client(number: int) -> None:
            nonlocal errors
            for index in range(requests):
                kind, question, calls = QUESTIONS[index % len(QUESTIONS)]
                elapsed, ok = await _chat(client, question, f"bench-{clients}-{number}")
                if ok:
                    samples[kind].append((elapsed - calls * latency) * 1000)
                else:
                    errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(one_client(n) for n in range(clients)))
        wall = time.perf_counter() - started
    total = clients * requests
    for kind, values in samples.items():
        values.sort()
        p50 = statistics.median(values)
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
        print(
            f"| {clients} | {kind} | {len(values)} | {p50:.1f} | {p99:.1f} | "
            f"{errors} | {total / wall:.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--requests", type=int, default=20, help="per client")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model call")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        db = str(Path(directory) / "bench.db")
        port = _free_port()
        server = multiprocessing.get_context("spawn").Process(
            target=_serve, args=(db, port, args.latency), daemon=True
        )
        server.start()
        base = f"http://127.0.0.1:{port}"
        try:
            asyncio.run(_ready(base))
            print(f"model latency {args.latency * 1000:.0f} ms per call; {os.cpu_count()} CPUs")
            print("| clients | question | requests | overhead p50 ms | p99 ms | errors | req/s |")
            print("|---:|---|---:|---:|---:|---:|---:|")
            for clients in args.clients:
                asyncio.run(_run(base, clients, args.requests, args.latency))
        finally:
            server.terminate()
            server.join(10)


if __name__ == "__main__":
    main()
