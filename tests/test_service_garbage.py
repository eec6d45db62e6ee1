"""A turn through the service leaves nothing for the garbage collector: what a request builds
is freed by reference counting. A reference cycle per request made every collection at 200
streams walk thousands of them, and each pause held up every stream in flight on its worker
(docs/benchmarks.md, issue #26)."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from _service_helpers import config, fake_llm, post_scope
from tooluse.service import create_app

QUESTION = "What's the weather in Paris?"  # the router calls get_weather, then the answer


async def _post(app: FastAPI, path: str, payload: dict[str, Any]) -> bytes:
    """The body of ``POST path`` through the app's ASGI interface, the client staying until
    the response's end (an HTTP client's own objects, httpx's responses and streams, are
    cyclic garbage of their own)."""
    incoming = [{"type": "http.request", "body": json.dumps(payload).encode(), "more_body": False}]
    ended = asyncio.Event()
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop()
        await ended.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200, message
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                ended.set()

    scope = post_scope(path)
    await app(scope, receive, send)
    return b"".join(chunks)


async def _turns(app: FastAPI, endpoint: str, count: int, conversations: int) -> None:
    """``count`` tool questions at once, over ``conversations`` conversations (so that turns
    of one conversation wait for each other's lock), each read to its end."""

    async def turn(number: int) -> None:
        payload: dict[str, Any]
        if endpoint == "api":
            payload = {"message": QUESTION, "conversation_id": f"c{number % conversations}"}
            body = await _post(app, "/api/chat", payload)
            assert b"event: done" in body and b"get_weather" in body, body[-300:]
        else:
            messages = [{"role": "user", "content": QUESTION}]
            payload = {"model": "tooluse-qa", "messages": messages, "stream": True}
            body = await _post(app, "/v1/chat/completions", payload)
            assert body.endswith(b"data: [DONE]\n\n"), body[-300:]

    await asyncio.gather(*(turn(number) for number in range(count)))


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The automatic collections off (one during the turns would free their garbage before
    it is counted); the tests' own ``gc.collect()`` count it."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


TURNS = 40


async def _cyclic_garbage_of_turns(app: FastAPI, endpoint: str) -> int:
    async with app.router.lifespan_context(app):
        await asyncio.to_thread(app.state.service.knowledge.wait)
        # Warm: the first use's imports and caches, the stores' pooled connections (redis-py
        # leaves a cycle per connection it opens on a server without CLIENT SETINFO or
        # maintenance notifications: its handshake's errors), at twice the concurrency
        # measured.
        await _turns(app, endpoint, 2 * TURNS, conversations=TURNS // 4)
        gc.collect()
        await _turns(app, endpoint, TURNS, conversations=TURNS // 4)
        return gc.collect()


@pytest.mark.parametrize("endpoint", ["api", "v1"])
async def test_turns_leave_no_cyclic_garbage(
    tmp_path: Path, endpoint: str, collector_off: None
) -> None:
    app = create_app(config(tmp_path / "s.db", model=fake_llm()))
    # A cycle per turn would be TURNS objects at least (an exception kept with its
    # traceback: 3 a turn); the margin is for a cache that happens to be filled late.
    assert await _cyclic_garbage_of_turns(app, endpoint) <= TURNS // 10


async def test_turns_on_redis_leave_no_cyclic_garbage(
    tmp_path: Path, redis_url: str, collector_off: None
) -> None:
    # The turns' locks (set NX, renewed, released by a script) and the events published
    # through Redis, shared by the workers.
    app = create_app(config(tmp_path / "s.db", model=fake_llm(), redis_url=redis_url))
    assert await _cyclic_garbage_of_turns(app, "api") <= TURNS // 10
