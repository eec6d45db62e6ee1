"""``RequestGuard``: what every request passes before a route sees it.

- The ``Host`` header names an IP address, ``localhost`` or an allowed name, else 400: a page
  of another site whose name was made to resolve to this machine (DNS rebinding) sends its own
  name there, and must not reach an unauthenticated service on 127.0.0.1. An IP address or
  ``localhost`` in the header is what a browser sends only for a page of that address.
- A body over the size limit is refused with 413 before it is read whole (a declared
  ``Content-Length`` at once), so that one request cannot hold the service's memory or its
  embedding model for long.
- A JSON body holding ``NaN``/``Infinity`` (JSON has no such numbers; Python's parser takes
  them), or nested deeper than :data:`MAX_JSON_DEPTH`, is refused with 400 before pydantic,
  the routes and the stores meet it (they failed with 500, a ``RecursionError`` among them).
- Every response says ``X-Content-Type-Options: nosniff`` and may not be framed
  (``X-Frame-Options: DENY``, CSP ``frame-ancestors 'none'``): the page's approve button is
  not clickable through another site's frame. The page sets its full policy itself.

Refusals never echo what was sent; ``/v1`` gets them in OpenAI's error format.
"""

from __future__ import annotations

import functools
import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tooluse.service._openai_api import is_openai_path, openai_error
from tooluse.service._sse import JsonTextResponse

__all__ = ["MAX_JSON_DEPTH", "DirectAnswer", "RequestGuard"]

MAX_JSON_DEPTH = 64  # arrays and objects inside each other; tool arguments need a few

DirectAnswer = Callable[[Scope, bytes, Receive, Send], Awaitable[bool]]
"""Answers a request from its scope and whole body (``receive`` past the body, ``send``),
and says whether it did; ``False``: the app answers it."""

_FRAMING_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)
_NO_FRAMES = (b"content-security-policy", b"frame-ancestors 'none'")


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class RequestGuard:
    """The checks of the module docstring, around ``app``. ``allowed_hosts``: host names
    taken besides IP addresses and ``localhost`` (``"*"``: any)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Iterable[str],
        max_body_bytes: int,
        answer_directly: DirectAnswer | None = None,
    ) -> None:
        self.app = app
        self._hosts = frozenset(host.lower().rstrip(".") for host in allowed_hosts)
        self._max_body_bytes = max_body_bytes
        self._answer_directly = answer_directly

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            self._check_host(scope)
            body, replay = await self._checked_body(scope, receive)
        except _Refused as refused:
            await _refusal(scope, refused)(scope, receive, _with_headers(send))
            return
        send = _with_headers(send)
        # The body is read whole here: a route that can be answered from it (and ``receive``,
        # past the body now) is answered without the app's routing and parsing.
        if (
            body is not None
            and self._answer_directly is not None
            and await self._answer_directly(scope, body, receive, send)
        ):
            return
        await self.app(scope, replay, send)

    def _check_host(self, scope: Scope) -> None:
        if "*" in self._hosts:
            return
        host = _header(scope, b"host")
        if host is None:  # HTTP/1.0 clients may leave it out: nothing to rebind
            return
        if not _host_allowed(host, self._hosts):
            raise _Refused(
                400,
                "This service does not answer for the host named in the request's Host header: "
                "it answers for its IP addresses, localhost and the names it is given "
                "(tooluse serve --allowed-host NAME, ServiceConfig.allowed_hosts)",
            )

    async def _checked_body(self, scope: Scope, receive: Receive) -> tuple[bytes | None, Receive]:
        """The body (``None``: the client left before it was whole) and ``receive``
        replaying it, once it passed; refusals as :class:`_Refused`."""
        limit = self._max_body_bytes
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: let the route see it
                return None, _replaying([], message, receive)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and _is_json(_header(scope, b"content-type")):
            _check_json(body)
        return body, _replaying([body], None, receive)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            text: str = value.decode("latin-1")
            return text
    return None


@functools.lru_cache(maxsize=256)  # a client sends the same Host header each request
def _host_allowed(host: str, allowed: frozenset[str]) -> bool:
    name = host.strip().lower()
    if name.startswith("["):  # [IPv6]:port
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    name = name.rstrip(".")
    if name == "localhost" or name in allowed:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _too_large(limit: int) -> _Refused:
    return _Refused(
        413,
        f"The request body is over this service's limit of {limit:,} bytes "
        "(ServiceConfig.max_request_bytes, tooluse serve --max-request-bytes)",
    )


def _is_json(content_type: str | None) -> bool:
    # FastAPI reads a body without a Content-Type as JSON too
    if content_type is None:
        return True
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _refuse_constant(constant: str) -> object:
    raise _Refused(
        400,
        f"The JSON body holds {constant}, which JSON has no number for: send a finite number, "
        "or null",
    )


def _check_json(body: bytes) -> None:
    # Parsed only when it could hold what is refused: UTF-8 JSON text without these letters
    # holds no such constant, and with no more brackets than the depth allowed nests no
    # deeper (the route parses the body again: most bodies are parsed once). json.loads
    # also reads UTF-16 and UTF-32, whose letters these bytes would not find.
    if (
        json.detect_encoding(body) == "utf-8"
        and b"NaN" not in body
        and b"Infinity" not in body
        and body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH
    ):
        return
    try:
        value = json.loads(body, parse_constant=_refuse_constant)
    except RecursionError:
        raise _too_deep() from None
    except ValueError:  # not JSON: the route says what is wrong with it
        return
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            if depth > MAX_JSON_DEPTH:
                raise _too_deep()
            stack.extend((child, depth + 1) for child in item)


def _too_deep() -> _Refused:
    return _Refused(
        400, f"The JSON body is nested more than {MAX_JSON_DEPTH} arrays or objects deep"
    )


def _replaying(chunks: list[bytes], final: Message | None, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read so far (or ``final``), then ``receive``'s."""
    pending: list[Message] = [
        {"type": "http.request", "body": b"".join(chunks), "more_body": False}
    ]
    if final is not None:
        pending = [final]

    async def replay() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replay


def _refusal(scope: Scope, refused: _Refused) -> JsonTextResponse:
    if is_openai_path(Request(scope)):
        return openai_error(str(refused), refused.status)
    return JsonTextResponse({"detail": str(refused)}, status_code=refused.status)


def _with_headers(send: Send) -> Send:
    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            present = {key.lower() for key, _ in headers}
            headers.extend(header for header in _FRAMING_HEADERS if header[0] not in present)
            if _NO_FRAMES[0] not in present:
                headers.append(_NO_FRAMES)
            message = {**message, "headers": headers}
        await send(message)

    return send_with_headers
