"""A scriptable local HTTP server that answers in a provider's wire format.

Tests run the official ``openai`` and ``anthropic`` SDKs against it, so request encoding,
SSE decoding, retries and timeouts are the SDKs' real code paths. Each test scripts the replies
in order (:meth:`ProviderServer.expect`) and afterwards reads the requests the server received
(:attr:`ProviderServer.requests`) to assert the exact wire payload.

The server runs uvicorn on 127.0.0.1 (random port) in a background thread with its own event
loop, so it also answers the SDKs' blocking clients used by ``ChatModel.call``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import uvicorn

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclasses.dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # the parsed JSON body, or None when there was none
    received_at: float  # time.monotonic() when the request arrived


@dataclasses.dataclass(frozen=True, slots=True)
class SSEEvent:
    data: str
    event: str | None = None

    def encode(self) -> bytes:
        head = f"event: {self.event}\n" if self.event is not None else ""
        return f"{head}data: {self.data}\n\n".encode()


@dataclasses.dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer. Build with :meth:`json`, :meth:`sse` or the provider helpers."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    events: tuple[SSEEvent, ...] | None = None
    drop_after: int | None = None  # close the connection after this many SSE events
    stall_after: tuple[int, float] | None = None  # (events, seconds): go quiet mid-stream
    delay: float = 0.0  # seconds to wait before answering (for timeouts)

    @classmethod
    def json(
        cls,
        body: Any,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        return cls(
            status=status,
            headers=(("content-type", "application/json"), *(headers or {}).items()),
            body=json.dumps(body).encode(),
            delay=delay,
        )

    @classmethod
    def dropped(cls) -> Reply:
        """The status line and headers, then the connection closes before any body."""
        return cls(events=(SSEEvent(""),), drop_after=0)

    @classmethod
    def sse(
        cls,
        events: Iterable[SSEEvent],
        *,
        drop_after: int | None = None,
        stall_after: tuple[int, float] | None = None,
        delay: float = 0.0,
    ) -> Reply:
        return cls(
            headers=(("content-type", "text/event-stream"), ("cache-control", "no-cache")),
            events=tuple(events),
            drop_after=drop_after,
            stall_after=stall_after,
            delay=delay,
        )


Responder = Callable[[RecordedRequest], Reply]


def openai_sse(chunks: Iterable[Mapping[str, Any]], **options: Any) -> Reply:
    """An OpenAI chat-completions stream: one ``data:`` line per chunk, then ``[DONE]``.
    ``options`` are those of :meth:`Reply.sse`."""
    events = [SSEEvent(json.dumps(chunk)) for chunk in chunks]
    return Reply.sse([*events, SSEEvent("[DONE]")], **options)


def openai_responses_sse(events: Iterable[Mapping[str, Any]], **options: Any) -> Reply:
    """An OpenAI Responses stream: each event named after its ``type`` and numbered
    (``sequence_number``) in order, without a ``[DONE]``."""
    return Reply.sse(
        [
            SSEEvent(json.dumps({**event, "sequence_number": number}), event=str(event["type"]))
            for number, event in enumerate(events)
        ],
        **options,
    )


def anthropic_sse(events: Iterable[Mapping[str, Any]], **options: Any) -> Reply:
    """An Anthropic Messages stream: each event named after its ``type``."""
    return Reply.sse(
        [SSEEvent(json.dumps(event), event=str(event["type"])) for event in events], **options
    )


class _DroppedConnection(Exception):
    """Raised inside the ASGI app so uvicorn aborts the connection mid-body."""


class ProviderServer:
    """Start once with :meth:`start`; call :meth:`reset` between tests."""

    def __init__(self) -> None:
        self._replies: deque[Reply | Responder] = deque()
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        config = uvicorn.Config(
            self._app, log_level="critical", lifespan="off", interface="asgi3", access_log=False
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ProviderServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("provider test server did not start within 10 s")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)

    def reset(self) -> None:
        with self._lock:
            self._replies.clear()
            self.requests = []

    def expect(self, *replies: Reply | Responder) -> None:
        """Queue replies; each request takes the next one in order (a responder makes its
        reply from the request)."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        """Replies scripted but not yet served."""
        with self._lock:
            return len(self._replies)

    async def _app(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        recorded = RecordedRequest(
            method=scope["method"],
            path=scope["path"],
            headers=headers,
            body=json.loads(raw) if raw else None,
            received_at=time.monotonic(),
        )
        with self._lock:
            self.requests.append(recorded)
            reply = self._replies.popleft() if self._replies else None
        if callable(reply):
            reply = reply(recorded)
        if reply is None:
            reply = Reply.json(
                {"error": {"message": "provider_server: no scripted reply", "type": "test"}},
                status=500,
                headers={"x-should-retry": "false"},
            )
        await _send_reply(reply, send)


async def _send_reply(reply: Reply, send: Send) -> None:
    if reply.delay:
        await asyncio.sleep(reply.delay)
    await send(
        {
            "type": "http.response.start",
            "status": reply.status,
            "headers": [(k.encode(), v.encode()) for k, v in reply.headers],
        }
    )
    if reply.events is None:
        await send({"type": "http.response.body", "body": reply.body})
        return
    for number, event in enumerate(reply.events):
        if reply.drop_after is not None and number >= reply.drop_after:
            raise _DroppedConnection
        if reply.stall_after is not None and number == reply.stall_after[0]:
            await asyncio.sleep(reply.stall_after[1])
        await send({"type": "http.response.body", "body": event.encode(), "more_body": True})
    await send({"type": "http.response.body", "body": b""})


_shared: ProviderServer | None = None


def shared_server() -> ProviderServer:
    """The process-wide server, started on first use (a daemon thread; exits with pytest)."""
    global _shared
    if _shared is None:
        _shared = ProviderServer().start()
    _shared.reset()
    return _shared
