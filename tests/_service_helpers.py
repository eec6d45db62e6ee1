"""Running the service app in-process for the service tests, and the output of its commands
run as processes."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from unittest.mock import patch

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from _rag_helpers import HashingEmbeddingModel
from tooluse.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
from tooluse.messages import (
    AssistantMessage,
    ImagePart,
    Prompt,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.service import ServiceConfig, create_app
from tooluse.service._conversation_events import ConversationEvents
from tooluse.testing import FunctionModel, ResponseLike, tool_call
from tooluse.tools import Image, tool


def config(db: Path, **changes: Any) -> ServiceConfig:
    """A service on ``db`` with the hashing embedding model (fast, no model load).

    Query compression is off unless ``changes`` turn it on: the fake models here answer the
    two stages (tools offered: the router; none: the answer), and a follow-up's rewriting
    would be a third kind of call (tests/test_qa_query_compression.py tests it)."""
    changes.setdefault("query_compression", False)
    return ServiceConfig(db=db, embedding_model=HashingEmbeddingModel(), **changes)


@contextlib.asynccontextmanager
async def running(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The app started (lifespan) with an HTTP client that calls it in-process."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client


@contextlib.asynccontextmanager
async def service(db: Path, **changes: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with running(create_app(config(db, **changes))) as client:
        yield client


def serve_without_listening(
    monkeypatch: pytest.MonkeyPatch, serving: Callable[[uvicorn.Config], object]
) -> None:
    """``tooluse serve`` runs up to serving its app, then calls ``serving(config)`` (the app
    is ``config.app``, its service started) instead of listening, and closes the service as
    the app's lifespan would. Its port is not bound (any ``--host`` and ``--port`` do)."""

    async def serve(server: uvicorn.Server, sockets: object = None) -> None:
        serving(server.config)
        server.started = True
        await server.config.app.state.service.aclose()

    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    monkeypatch.setattr("tooluse.cli.serve.bind_port", lambda host, port, **_: socket.socket())


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """``(event name, data)`` per event of a text/event-stream body."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            joined = "\n".join(data)
            events.append((name, joined if joined == "[DONE]" else json.loads(joined)))
    return events


def names(events: list[tuple[str, Any]]) -> list[str]:
    """Event names, consecutive deltas as one."""
    result: list[str] = []
    for name, _ in events:
        if not (name == "delta" and result and result[-1] == "delta"):
            result.append(name)
    return result


def _question(prompt: Prompt) -> str:
    return next(m.text for m in reversed(prompt.messages) if isinstance(m, UserMessage))


def respond(prompt: Prompt) -> ResponseLike:
    """A fake LLM for both stages. Router (tools offered): weather questions call
    get_weather(Paris), cancel questions cancel_order(A1001), others no tool. Answer stage:
    says which information block it was given."""
    if prompt.options.tool_callbacks:
        if isinstance(prompt.messages[-1], ToolResponseMessage):
            return ""
        question = _question(prompt).lower()
        if "weather" in question:
            return tool_call("get_weather", {"city": "Paris"})
        if "cancel" in question:
            return tool_call("cancel_order", {"order_id": "A1001"}, id="cancel-1")
        return ""
    text = _question(prompt)
    if text.startswith("Data fetched"):
        return "From live data."
    if text.startswith("Documents retrieved"):
        return "From the knowledge base."
    return "I do not know."


def fake_llm() -> FunctionModel:
    return FunctionModel(respond)


BIG_ACCOUNT = 9007199254740993
"""2**53 + 1: JavaScript's JSON.parse reads it as 9007199254740992."""


@tool(requires_approval=True)
def transfer(account: int, amount: int) -> dict[str, int]:
    """Transfer an amount to an account (a test tool: it says what it was given)."""
    return {"account": account, "amount": amount}


def transferring(prompt: Prompt) -> ResponseLike:
    """A fake LLM whose router calls transfer(BIG_ACCOUNT, 5), as JSON text with the number
    as written; the answer stage answers."""
    if not prompt.options.tool_callbacks:
        return "Transferred."
    if isinstance(prompt.messages[-1], ToolResponseMessage):
        return ""
    return tool_call("transfer", f'{{"account": {BIG_ACCOUNT}, "amount": 5}}', id="t1")


def default_sigint() -> None:
    """``preexec_fn`` of a child that a test interrupts with SIGINT: a pytest started in the
    background (``cmd &``) passes SIGINT on ignored, and Python then never installs its
    KeyboardInterrupt handler; restored to the default, the child starts as at a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def read_until(process: subprocess.Popen[bytes], text: str, seconds: float = 30.0) -> str:
    """What ``process`` writes to its stdout (a pipe) up to and including ``text``; fails
    when it exits or ``seconds`` pass first."""
    assert process.stdout is not None
    deadline = time.monotonic() + seconds
    received = b""
    while text.encode() not in received:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {text!r} within {seconds} s; got {received!r}"
        readable, _, _ = select.select([process.stdout], [], [], remaining)
        if readable:
            chunk = os.read(process.stdout.fileno(), 4096)
            assert chunk, f"the process exited ({process.wait()}) before {text!r}: {received!r}"
            received += chunk
    return received.decode()


def png(width: int, height: int) -> bytes:
    """A real PNG of ``width`` x ``height`` red pixels (browsers decode it)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    pixels = chunk(b"IDAT", zlib.compress(rows))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + pixels + chunk(b"IEND", b"")


SCREEN = png(3, 2)
SCREEN_URL = "data:image/png;base64," + base64.b64encode(SCREEN).decode()


@tool(read_only=True)
def screenshot() -> dict[str, Any]:
    """The screen as it looks now (a test tool: a captioned 3x2 PNG)."""
    return {"caption": "the screen", "shot": Image(SCREEN, "image/png")}


def screenshotting(prompt: Prompt) -> ResponseLike:
    """A fake LLM whose router calls screenshot once; the answer stage answers."""
    if not prompt.options.tool_callbacks:
        return "A red screen."
    if isinstance(prompt.messages[-1], ToolResponseMessage):
        return ""
    return tool_call("screenshot", {}, id="s1")


def store_screenshot_turn(db: Path, conversation_id: str) -> None:
    """Writes a turn with a screenshot result to the service's memory, as a memory that keeps
    tool traffic (a memory advisor inside the tool loop) would."""
    call = ToolCall(id="s1", name="screenshot", arguments="{}")
    shot = ImagePart("image/png", base64.b64encode(SCREEN).decode())
    with SqliteChatMemoryRepository(db) as repository:
        MessageWindowChatMemory(repository=repository).add(
            conversation_id,
            [
                UserMessage(text="What is on screen?"),
                AssistantMessage(text=None, tool_calls=(call,)),
                ToolResponseMessage(
                    responses=(ToolResponse("s1", "screenshot", "the screen", images=[shot]),)
                ),
                AssistantMessage(text="A red screen."),
            ],
        )


@contextlib.contextmanager
def written(bus: ConversationEvents) -> Iterator[list[list[tuple[Any, ...]]]]:
    """The commands of each write ``bus`` makes to Redis while the block runs."""
    connection = bus._connection
    assert connection is not None
    writes: list[list[tuple[Any, ...]]] = []
    pack = connection.pack_commands

    def packed(commands: Any) -> Any:
        writes.append(list(commands))
        return pack(commands)

    with patch.object(connection, "pack_commands", packed):
        yield writes


def post_scope(path: str) -> dict[str, Any]:
    """The ASGI scope of a JSON ``POST path`` from a local client, for driving an app's ASGI
    interface without an HTTP client."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"host", b"localhost")],
        "client": ("127.0.0.1", 50000),
        "server": ("localhost", 80),
    }
