"""``McpConnection``: one MCP server, one long-lived session, one task that owns it.

The owner task enters the SDK ``Client`` (transport, session, handshake), lists the tools,
keeps the list fresh, and exits the ``Client`` when asked to stop or when the server dies,
so every cancel scope the SDK opens is entered and exited in that one task.

Calls do not go through the owner task: the SDK's dispatcher keeps no per-task state for
outgoing requests (each request has its own id, its own response stream and its own
timeout scope, all inside the calling task), so any task on the owner's event loop calls
``Client.call_tool`` directly and concurrent calls share the session. A call from another
event loop (a sync ``call()`` on another thread) is handed to the owner's loop.

A server that dies (a crashed stdio process, a dropped HTTP session) ends the session; the
call that was in flight fails (it may have run: it is never sent again). The next call
reconnects first, on the owner's loop, and goes through when that works: a new session,
tools listed again. Attempts are at least ``reconnect_interval`` seconds apart; in between,
calls fail at once with the last error. ``reconnect_interval=None`` never reconnects. An
attempt is a task of its own, which the calls that need it wait for (at most
``connect_timeout``): a caller that gives up (a tool timeout, a client gone) leaves it running
for the next call, and never cancels what the attempt waits for itself.

Tool-list changes: the ``notifications/tools/list_changed`` notification (2025 protocol) and
the ``subscriptions/listen`` change event (2026-07-28 protocol, where the owner keeps a
listen stream open) both wake a refresher task, which lists the tools again (changes
arriving during a listing coalesce into one more listing).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Final, Literal, TextIO, TypeVar, cast

import anyio
import anyio.abc
import httpx2
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import SubscriptionLost, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolResult,
    Implementation,
    ServerNotification,
    Tool,
    ToolListChangedNotification,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from tooluse._fork import current_process
from tooluse._version import VERSION
from tooluse.mcp._errors import McpServerError
from tooluse.mcp._servers import HttpServer, InProcessServer, ServerParameters, StdioServer

__all__ = ["McpConnection"]

logger = logging.getLogger("tooluse.mcp")

T = TypeVar("T")

CLIENT_INFO: Final = Implementation(name="tooluse", version=VERSION)
_MAX_LIST_PAGES = 100  # a paginator that never ends cannot hang a listing
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # the SDK's defaults: SSE streams stay open
_RELISTEN_DELAY = 1.0  # seconds between attempts to reopen a dropped listen stream
_OWNER_GRACE = 5.0  # seconds a call from another thread waits beyond the owner's own bounds

State = Literal["new", "connecting", "connected", "closing", "closed", "failed"]


class McpConnection:
    """One MCP server's session, owned by one task (see the module docstring).

    ``await start()`` connects and lists the tools; ``tools`` is the latest list;
    ``await call_tool(...)`` calls one; ``await refresh()`` lists again now;
    ``await aclose()`` ends the session (and stops a stdio server's process).
    ``on_tools_changed(connection)`` runs, on the owner's loop, after each listing that
    replaced the tool list.
    """

    def __init__(
        self,
        server: ServerParameters,
        *,
        connect_timeout: float | None = 30.0,
        call_timeout: float | None = 60.0,
        reconnect_interval: float | None = 5.0,
        on_tools_changed: Callable[[McpConnection], None] | None = None,
    ) -> None:
        for label, value in (
            ("connect_timeout", connect_timeout),
            ("call_timeout", call_timeout),
            ("reconnect_interval", reconnect_interval),
        ):
            if value is not None and value <= 0:
                raise ValueError(f"{label} must be a positive number of seconds, got {value}")
        self.server = server
        self.name = server.name
        self._connect_timeout = connect_timeout
        self._call_timeout = call_timeout
        self._reconnect_interval = reconnect_interval
        self._last_reconnect: float | None = None  # time.monotonic() of the last attempt
        self._attempt: asyncio.Task[McpServerError | None] | None = None  # a reconnect
        self._on_tools_changed = on_tools_changed
        self._tools: tuple[Tool, ...] = ()
        self._state: State = "new"
        self._closed = False  # aclose() was called: never reconnect after it
        self._client: Client | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._process: int | None = None  # the process whose loop owns the session
        self._owner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._refresh_wanted: asyncio.Event | None = None
        self._listing = asyncio.Lock()
        self._failure: McpServerError | None = None
        self._finished: concurrent.futures.Future[None] = concurrent.futures.Future()

    def __repr__(self) -> str:
        return f"McpConnection({self.name!r}, {self._state}, {len(self._tools)} tools)"

    @property
    def state(self) -> State:
        return self._state

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The server's tools as last listed (before any include/exclude filtering)."""
        return self._tools

    @property
    def failure(self) -> McpServerError | None:
        """Why the session ended, when the server died or broke the protocol."""
        return self._failure

    @property
    def protocol_version(self) -> str | None:
        return self._client.protocol_version if self._client is not None else None

    @property
    def server_info(self) -> Implementation | None:
        return self._client.server_info if self._client is not None else None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, negotiate, list the tools. Raises ``McpServerError`` naming the server when
        it cannot be started or reached, fails the handshake or misses ``connect_timeout``."""
        if self._state != "new":
            raise RuntimeError(f"MCP server '{self.name}' was already started ({self._state})")
        self._state = "connecting"
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._process = current_process()
        self._stop = asyncio.Event()  # before the owner runs, so aclose() can always signal it
        self._refresh_wanted = asyncio.Event()
        ready: asyncio.Future[None] = loop.create_future()
        self._owner = loop.create_task(self._own(ready), name=f"tooluse.mcp owner {self.name}")
        try:
            async with asyncio.timeout(self._connect_timeout):
                await asyncio.shield(ready)
        except TimeoutError:
            await self._abort_start()
            raise McpServerError(
                f"MCP server '{self.name}' did not complete the connection and tool listing "
                f"within {self._connect_timeout:g} seconds",
                server_name=self.name,
            ) from None
        except BaseException:  # its own failure (already McpServerError) or our cancellation
            await self._abort_start()
            raise

    async def aclose(self) -> None:
        """End the session and wait until the transport is closed. Idempotent. In a forked
        child it only marks its copy closed: the session is its parent's."""
        self._closed = True
        if self._owner is None or self._loop is None or self._in_other_process():
            self._state = "closed"
            return
        await self._stop_attempt()
        if self._state in ("connecting", "connected"):
            self._state = "closing"
        self._signal(self._stop)
        await self._await_finished()
        self._state = "closed"  # a failed session too: nothing reconnects it after closing

    def _in_other_process(self) -> bool:
        return self._process is not None and current_process() != self._process

    async def _abort_start(self) -> None:
        assert self._owner is not None
        self._owner.cancel()
        with contextlib.suppress(BaseException):
            await self._owner

    async def _own(self, ready: asyncio.Future[None]) -> None:
        assert self._stop is not None
        try:
            async with self._open_client() as client, anyio.create_task_group() as tasks:
                self._client = client
                capabilities = client.server_capabilities
                if (
                    client.protocol_version in MODERN_PROTOCOL_VERSIONS
                    and capabilities.tools is not None
                    and capabilities.tools.list_changed
                ):
                    await tasks.start(self._listen, client)
                self._tools = await self._list_tools(client)
                tasks.start_soon(self._refresh_on_change, client)
                self._state = "connected"
                ready.set_result(None)
                await self._stop.wait()
                tasks.cancel_scope.cancel()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(self._startup_failure(exc))
            elif self._failure is None and self._state != "closing":
                self._failure = self._describe(exc, "the session")
                logger.error("%s; the session has ended", self._failure)
        finally:
            self._client = None
            self._state = "failed" if self._failure is not None else "closed"
            if not ready.done():  # cancelled while connecting
                ready.cancel()
            self._finished.set_result(None)

    @contextlib.asynccontextmanager
    async def _open_client(self) -> AsyncIterator[Client]:
        server = self.server
        options: dict[str, Any] = {
            "mode": server.mode,
            "message_handler": self._on_message,
            "client_info": CLIENT_INFO,
            "cache": None,  # this class keeps the tool list; calls are never cached
        }
        async with contextlib.AsyncExitStack() as stack:
            if isinstance(server, StdioServer):
                transport = stdio_client(server.sdk_target(), errlog=_errlog(server.errlog))
                client = Client(transport, **options)
            elif isinstance(server, HttpServer):
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(headers=dict(server.headers), timeout=_HTTP_TIMEOUT)
                )
                client = Client(streamable_http_client(server.url, http_client=http), **options)
            elif isinstance(server, InProcessServer):
                client = Client(server.server, **options)
            else:  # pragma: no cover - the union is exhaustive
                raise TypeError(f"Unknown MCP server parameters: {server!r}")
            yield await stack.enter_async_context(client)

    # -- the tool list --------------------------------------------------------------------------

    async def refresh(self) -> tuple[Tool, ...]:
        """List the server's tools now (also done by itself on a list-changed notice)."""
        return await self._on_owner_loop(self._refresh, "tools/list")

    async def _refresh(self) -> tuple[Tool, ...]:
        await self._relist(await self._require_client())
        return self._tools

    async def _list_tools(self, client: Client) -> tuple[Tool, ...]:
        tools: list[Tool] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(self._call_timeout):
                for _ in range(_MAX_LIST_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                else:
                    logger.warning(
                        "MCP server '%s' listed more than %d pages of tools; using the first %d",
                        self.name,
                        _MAX_LIST_PAGES,
                        len(tools),
                    )
        except TimeoutError as exc:
            raise McpServerError(
                f"MCP server '{self.name}' did not list its tools within "
                f"{self._call_timeout:g} seconds",
                server_name=self.name,
            ) from exc
        except Exception as exc:
            raise self._failed(exc, "tools/list") from exc
        return tuple(tools)

    async def _relist(self, client: Client) -> None:
        async with self._listing:
            tools = await self._list_tools(client)
        if tools == self._tools:
            return
        self._tools = tools
        logger.info("MCP server '%s' now has %d tools", self.name, len(tools))
        if self._on_tools_changed is not None:
            try:
                self._on_tools_changed(self)
            except Exception:  # a listener's bug must not end the session
                logger.exception("on_tools_changed failed for MCP server '%s'", self.name)

    async def _refresh_on_change(self, client: Client) -> None:
        wanted = self._refresh_wanted
        assert wanted is not None
        while True:
            await wanted.wait()
            wanted.clear()  # a change announced during the listing wakes us again
            try:
                await self._relist(client)
            except McpServerError as exc:
                if self._failure is not None:
                    return
                logger.warning("%s; keeping the previous tool list", exc)

    async def _listen(
        self, client: Client, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Keep a 2026-07-28 ``subscriptions/listen`` stream open for tool-list changes."""
        started = False
        while True:
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    if started:  # reopened: changes may have been missed meanwhile
                        self._want_refresh()
                    else:
                        task_status.started()
                        started = True
                    async for event in subscription:
                        if isinstance(event, ToolsListChanged):
                            self._want_refresh()
                return  # the server closed the stream on purpose
            except SubscriptionLost as exc:
                logger.info(
                    "MCP server '%s' dropped its change stream (%s); reopening", self.name, exc
                )
                await anyio.sleep(_RELISTEN_DELAY)
            except MCPError as exc:
                if exc.code != CONNECTION_CLOSED:
                    logger.warning(
                        "MCP server '%s' refused a change stream (%s); tool-list changes will "
                        "not be seen",
                        self.name,
                        exc,
                    )
                if not started:  # the session works without it
                    task_status.started()
                return

    async def _on_message(self, message: ServerNotification | Exception) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._want_refresh()
        elif isinstance(message, Exception):
            logger.warning("MCP server '%s' sent something unreadable: %s", self.name, message)

    def _want_refresh(self) -> None:
        if self._refresh_wanted is not None:
            self._refresh_wanted.set()

    # -- calls ----------------------------------------------------------------------------------

    async def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> CallToolResult:
        """Call the server's tool ``name`` (its own name, not the model's). Protocol errors,
        a closed or dead session and a missed ``call_timeout`` raise ``McpServerError``;
        an ``isError`` result is returned like any other result."""
        return await self._on_owner_loop(
            lambda: self._call_tool(name, arguments, meta), f"tools/call '{name}'", name
        )

    async def _call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None
    ) -> CallToolResult:
        client = await self._require_client()
        try:
            return await client.call_tool(
                name,
                arguments,
                read_timeout_seconds=self._call_timeout,
                meta=meta,  # type: ignore[arg-type]  # RequestParamsMeta is an open TypedDict
            )
        except Exception as exc:
            raise self._failed(exc, f"tools/call '{name}'", tool_name=name) from exc

    async def _require_client(self) -> Client:
        if not self._closed and (self._failure is not None or self._reconnecting):
            await self._reconnect()  # or wait for the one under way, then use its session
        client = self._client
        if client is None or self._state != "connected":
            raise McpServerError(
                f"MCP server '{self.name}' is not connected ({self._state}); connect the "
                "provider first (`async with provider:` or `provider.connect()`)",
                server_name=self.name,
            )
        return client

    @property
    def _reconnecting(self) -> bool:
        return self._attempt is not None and not self._attempt.done()

    async def _reconnect(self) -> None:
        """Wait for a new session in place of the dead one (starting the attempt when none is
        under way and one is due), or raise ``McpServerError`` saying why there is none."""
        attempt = self._attempt if self._reconnecting else None
        if attempt is None:
            failure = self._failure
            if failure is None or self._closed:  # reconnected meanwhile, or closed
                return
            if not self._reconnect_due():
                interval = self._reconnect_interval
                when = "never" if interval is None else f"at most every {interval:g} s"
                raise McpServerError(
                    f"{failure} (the session has ended; reconnecting: {when})",
                    server_name=self.name,
                    code=failure.code,
                )
            attempt = self._start_attempt(failure)
        try:
            # shield: the attempt is the connection's. A caller that gives up leaves it
            # running for the next call; cancelling it would cut a stdio server's start
            # short (seconds of clean-up) and make the next call wait for the interval.
            async with asyncio.timeout(self._connect_timeout):
                error = await asyncio.shield(attempt)
        except TimeoutError:
            raise McpServerError(
                f"MCP server '{self.name}' did not reconnect within {self._connect_timeout:g} "
                "seconds",
                server_name=self.name,
            ) from None
        if error is not None:
            raise error

    def _reconnect_due(self) -> bool:
        interval, last = self._reconnect_interval, self._last_reconnect
        return interval is not None and (last is None or time.monotonic() - last >= interval)

    def _start_attempt(self, failure: McpServerError) -> asyncio.Task[McpServerError | None]:
        attempt = asyncio.get_running_loop().create_task(
            self._attempt_reconnect(failure), name=f"tooluse.mcp reconnect {self.name}"
        )
        attempt.add_done_callback(self._log_unexpected)
        self._attempt = attempt
        return attempt

    def _log_unexpected(self, attempt: asyncio.Task[McpServerError | None]) -> None:
        # Retrieved here, so that an attempt whose callers all gave up is still reported.
        if not attempt.cancelled() and (error := attempt.exception()) is not None:
            logger.error(
                "Reconnecting MCP server '%s' failed unexpectedly", self.name, exc_info=error
            )

    async def _attempt_reconnect(self, failure: McpServerError) -> McpServerError | None:
        """Replace the dead session; the error to give its callers when that fails. Only
        ``aclose()`` cancels it."""
        try:
            await self._await_finished()  # the dead session's owner sets its fields on exit
            self._failure, self._state, self._owner = None, "new", None
            self._finished = concurrent.futures.Future()
            await self.start()
        except McpServerError as exc:
            self._failure, self._state = exc, "failed"
            return McpServerError(
                f"{exc} (reconnecting after: {failure})", server_name=self.name, code=exc.code
            )
        except asyncio.CancelledError:
            if not self._closed:  # not closing: the loop ends; leave the dead session as it was
                self._failure, self._state = failure, "failed"
            raise
        finally:  # the interval runs from the end of an attempt (a start can be slow)
            self._last_reconnect = time.monotonic()
        logger.info("MCP server '%s' reconnected after: %s", self.name, failure)
        if self._on_tools_changed is not None:
            self._on_tools_changed(self)
        return None

    async def _stop_attempt(self) -> None:
        """Cancel a reconnect under way and wait until it has undone itself (its own loop)."""
        owner = self._loop
        if not self._reconnecting or owner is None or owner.is_closed():
            return
        if owner is asyncio.get_running_loop():
            await self._cancel_attempt()
        elif owner.is_running():
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(self._cancel_attempt(), owner)
            )

    async def _cancel_attempt(self) -> None:
        attempt = self._attempt
        if attempt is not None and not attempt.done():
            attempt.cancel()
            await asyncio.wait([attempt])

    def start_failed(self, error: McpServerError) -> None:
        """Keep a server that could not be started as a failed session without tools (an
        optional server): :meth:`reconnect_in_background` brings it in when it can."""
        self._failure, self._state = error, "failed"
        self._last_reconnect = time.monotonic()

    def reconnect_in_background(self) -> None:
        """For a failed session no call reaches (an optional server that never came up): a
        reconnect on the owner's loop, when one is due; its tools show on a later listing."""
        owner = self._loop
        if owner is None or owner.is_closed() or not self._background_reconnect_due():
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is owner:
            self._reconnect_in_background()
        elif owner.is_running():
            owner.call_soon_threadsafe(self._reconnect_in_background)

    def _background_reconnect_due(self) -> bool:
        return (
            not self._closed
            and self._state == "failed"
            and not self._reconnecting
            and self._reconnect_due()
        )

    def _reconnect_in_background(self) -> None:
        failure = self._failure
        if failure is None or not self._background_reconnect_due():  # changed meanwhile
            return

        def report(attempt: asyncio.Task[McpServerError | None]) -> None:
            # Nobody awaits this attempt: its failure is logged here.
            if not attempt.cancelled() and attempt.exception() is None:
                error = attempt.result()
                if error is not None:
                    logger.warning("MCP server '%s' is still unavailable: %s", self.name, error)

        self._start_attempt(failure).add_done_callback(report)

    async def _on_owner_loop(
        self,
        make: Callable[[], Coroutine[Any, Any, T]],
        operation: str,
        tool_name: str | None = None,
    ) -> T:
        owner = self._loop
        if self._in_other_process():
            # A forked child has a copy of the session but not the thread that runs its loop,
            # and it shares the server's pipes or stream with its parent: a call would wait
            # for its timeout, or garble the parent's messages.
            raise McpServerError(
                f"MCP server '{self.name}' was connected in another process (pid "
                f"{self._process}) before this one was forked; a process talks to its servers "
                "over its own connections: make and connect an McpToolProvider in this process",
                server_name=self.name,
            )
        # a failed session reconnects there; calls during a reconnect wait for it there
        alive = self._state in ("connecting", "connected", "failed")
        if owner is None or not alive or asyncio.get_running_loop() is owner:
            return await make()  # not connected: make() raises the error that says so
        if owner.is_closed() or not owner.is_running():
            raise McpServerError(
                f"MCP server '{self.name}' was connected on an event loop that is not running "
                "now; call its tools from that loop (or connect the provider on the thread "
                "that calls them)",
                server_name=self.name,
            )
        future = asyncio.run_coroutine_threadsafe(make(), owner)
        # The owner bounds the work itself (connect_timeout, call_timeout) and reports a miss as
        # McpServerError; this bound only keeps a caller from waiting on a stuck owner loop.
        bound = self._call_timeout
        if bound is not None:
            bound += (self._connect_timeout or 0.0) + _OWNER_GRACE
        deadline = asyncio.timeout(bound)
        try:
            async with deadline:
                return await asyncio.wrap_future(future)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise McpServerError(
                f"MCP server '{self.name}' did not answer {operation} within {bound:g} seconds "
                "(its event loop did not get to it)",
                server_name=self.name,
                tool_name=tool_name,
            ) from None

    # -- failures -------------------------------------------------------------------------------

    def _failed(
        self, exc: BaseException, operation: str, *, tool_name: str | None = None
    ) -> McpServerError:
        """The error to raise for a failed request; a closed connection ends the session."""
        error = self._describe(exc, operation, tool_name=tool_name)
        if error.code == CONNECTION_CLOSED:
            self._end_session(error)
        return error

    def _describe(
        self, exc: BaseException, operation: str, *, tool_name: str | None = None
    ) -> McpServerError:
        """A clear error naming the server and what was being done."""
        if isinstance(exc, McpServerError):
            return exc
        if isinstance(exc, MCPError):
            if exc.code == CONNECTION_CLOSED:
                if self._state == "closing":
                    message = f"MCP server '{self.name}': {operation} was cut off by closing"
                else:
                    message = (
                        f"MCP server '{self.name}' closed the connection during {operation} "
                        "(its process exited or the connection dropped)"
                    )
                return McpServerError(
                    message, server_name=self.name, tool_name=tool_name, code=exc.code
                )
            if exc.code == REQUEST_TIMEOUT:
                return McpServerError(
                    f"MCP server '{self.name}' did not answer {operation} within "
                    f"{self._call_timeout:g} seconds",
                    server_name=self.name,
                    tool_name=tool_name,
                    code=exc.code,
                )
            return McpServerError(
                f"MCP server '{self.name}' rejected {operation}: {exc.message} "
                f"(JSON-RPC error {exc.code})",
                server_name=self.name,
                tool_name=tool_name,
                code=exc.code,
            )
        return McpServerError(
            f"MCP server '{self.name}' failed during {operation}: {type(exc).__name__}: {exc}",
            server_name=self.name,
            tool_name=tool_name,
        )

    def _startup_failure(self, exc: BaseException) -> McpServerError:
        # The SDK's task groups wrap errors in exception groups: report the first real one.
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        if isinstance(exc, McpServerError):
            return exc
        if isinstance(exc, OSError):
            target = (
                f"start {self.server.command!r}{_lookup_note(self.server)}"
                if isinstance(self.server, StdioServer)
                else "reach the server"
            )
            error = McpServerError(
                f"MCP server '{self.name}': could not {target}: {exc}", server_name=self.name
            )
        elif isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
            error = McpServerError(
                f"MCP server '{self.name}' closed the connection during the handshake (see its "
                "stderr: it may have failed to start)",
                server_name=self.name,
                code=exc.code,
            )
        else:
            error = self._describe(exc, "the handshake")
        error.__cause__ = exc
        return error

    def _end_session(self, error: McpServerError) -> None:
        if self._state == "closing" or self._failure is not None:
            return
        # "failed" now, not once its task has ended: /healthz and the next call see it at once
        self._failure, self._state = error, "failed"
        logger.error("%s; the session has ended", error)
        self._signal(self._stop)

    def _signal(self, event: asyncio.Event | None) -> None:
        owner = self._loop
        if event is None or owner is None or owner.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is owner:
            event.set()
        else:
            owner.call_soon_threadsafe(event.set)

    async def _await_finished(self) -> None:
        owner = self._loop
        if owner is not None and owner.is_closed():
            return
        # shield: a waiter that is cancelled must not cancel the future itself, which the
        # owner task sets as it ends (it would fail there, and every later wait at once).
        await asyncio.shield(asyncio.wrap_future(self._finished))


def _errlog(chosen: TextIO | None) -> TextIO:
    """Where a stdio server's stderr goes: the chosen stream, else this process's stderr. The
    subprocess needs a real file descriptor; when ``sys.stderr`` has none (a notebook, a
    captured test) the original stderr is used, and failing that, nowhere."""
    for stream in (chosen, sys.stderr, sys.__stderr__):
        if stream is None:
            continue
        try:
            stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        return stream
    return cast(TextIO, subprocess.DEVNULL)  # the subprocess API takes DEVNULL where a file goes


def _lookup_note(server: StdioServer) -> str:
    """Where a relative command path was looked up, for the error when it did not start: not
    from the directory of the configuration file it may have come from (docs/service.md)."""
    command = server.command
    if os.path.isabs(command) or not any(sep in command for sep in ("/", os.sep)):
        return ""  # a bare name is searched on PATH
    # POSIX looks a relative executable up from the child's cwd; Windows from this process's.
    directory = server.cwd if server.cwd is not None and os.name == "posix" else os.getcwd()
    return f" (a relative path, looked up from the working directory {os.fspath(directory)})"
