"""``McpToolProvider``: the tools of one or more MCP servers as a ``ToolCallbackProvider``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from types import TracebackType

from mcp.types import Tool

from tooluse._fork import ProcessLock
from tooluse._sync import run_sync
from tooluse.mcp._callback import ContextToMeta, McpToolCallback
from tooluse.mcp._connection import McpConnection
from tooluse.mcp._convert import tool_context_to_meta
from tooluse.mcp._errors import McpServerError
from tooluse.mcp._naming import NamingStrategy, ToolNamer
from tooluse.mcp._servers import (
    HttpServer,
    InProcessServer,
    ServerParameters,
    StdioServer,
    ToolSettings,
)
from tooluse.tools import ToolMetadata

__all__ = ["McpToolProvider", "ToolFilter", "ToolMetadataFor", "annotated_metadata"]

logger = logging.getLogger("tooluse.mcp")

ToolFilter = Callable[[str, Tool], bool]
"""``(server_name, tool) -> keep?``: which MCP tools to offer (after include/exclude)."""

ToolMetadataFor = Callable[[str, Tool], ToolMetadata]
"""``(server_name, tool) -> ToolMetadata``: how the executor treats an MCP tool, in place of
:func:`annotated_metadata` (its annotations and its server's settings)."""


class McpToolProvider:
    """MCP servers as a source of tools.

    ::

        async with McpToolProvider(
            StdioServer("uvx", ["mcp-server-time"], name="time"),
            HttpServer("http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer t"}),
        ) as mcp:
            answer = await ChatClient(model, tools=[mcp]).prompt("What time is it?").acall()

    Each server gets one session for the provider's lifetime (see ``McpConnection``); its
    tool list is cached and refreshed when the server says it changed, so
    ``tool_callbacks()`` (asked on every request) costs nothing. Which tools are offered:
    each server's ``include`` / ``exclude`` lists, then ``tool_filter``. Their names:
    ``naming`` (see ``NamingStrategy``; by default a name taken by an earlier tool becomes
    ``alt_<n>_<name>``). ``tool_metadata`` gives tools executor metadata (approval,
    timeouts); by default :func:`annotated_metadata`: read-only or a (destructive) write
    from the tool's annotations, approval from its server's ``settings``.
    ``context_to_meta`` turns the tool context into each call's ``_meta`` (by default: the
    context less private ``_keys`` and values that are not JSON).

    ``connect_timeout`` bounds connecting plus the first tool listing; ``call_timeout``
    bounds each tool call and listing (``None``: no bound). A server that dies is reconnected
    by the next call to one of its tools, at most every ``reconnect_interval`` seconds
    (``None``: never; the call in flight when it died fails and is not sent again). Connect
    with ``async with``, ``await aconnect()`` or, from sync code, ``with`` / ``connect()``;
    close the same way.
    """

    def __init__(
        self,
        *servers: ServerParameters,
        tool_filter: ToolFilter | None = None,
        tool_metadata: ToolMetadataFor | None = None,
        naming: NamingStrategy = "alt",
        context_to_meta: ContextToMeta = tool_context_to_meta,
        connect_timeout: float | None = 30.0,
        call_timeout: float | None = 60.0,
        reconnect_interval: float | None = 5.0,
    ) -> None:
        if not servers:
            raise ValueError("McpToolProvider needs at least one MCP server")
        for server in servers:
            if not isinstance(server, StdioServer | HttpServer | InProcessServer):
                raise TypeError(
                    "McpToolProvider takes StdioServer, HttpServer or InProcessServer "
                    f"parameters, got {type(server).__name__}: {server!r}"
                )
        names = [server.name for server in servers]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(
                f"Several MCP servers are named {', '.join(map(repr, repeated))}; give each "
                "server a distinct name="
            )
        self._namer = ToolNamer(naming)
        self._tool_filter = tool_filter
        self._tool_metadata = tool_metadata
        self._context_to_meta = context_to_meta
        self._connections = tuple(
            McpConnection(
                server,
                connect_timeout=connect_timeout,
                call_timeout=call_timeout,
                reconnect_interval=reconnect_interval,
                on_tools_changed=self._on_tools_changed,
            )
            for server in servers
        )
        self._connected = False
        self._build_lock = ProcessLock()
        self._callbacks: tuple[McpToolCallback, ...] | None = None
        # per server: the tool list the callbacks were built from, and those callbacks
        self._built: dict[str, tuple[tuple[Tool, ...], tuple[McpToolCallback, ...]]] = {}

    def __repr__(self) -> str:
        servers = ", ".join(repr(connection) for connection in self._connections)
        return f"McpToolProvider({servers})"

    @property
    def connections(self) -> tuple[McpConnection, ...]:
        """One per server, in the order given."""
        return self._connections

    # -- lifecycle ------------------------------------------------------------------------------

    async def aconnect(self) -> McpToolProvider:
        """Connect to every server at once and list their tools. If any server fails, the
        others are closed again and ``McpServerError`` names each server that failed; if
        building the tools fails (``tool_filter``, ``tool_metadata`` or ``naming`` raising,
        tools of one name), every server is closed again and the exception propagates."""
        if self._connected:
            raise RuntimeError("This McpToolProvider is already connected")
        outcomes = await asyncio.gather(
            *(connection.start() for connection in self._connections), return_exceptions=True
        )
        for connection, outcome in zip(self._connections, outcomes, strict=True):
            if isinstance(outcome, McpServerError) and not connection.server.required:
                logger.warning(
                    "MCP server '%s' is left out for now (required=False): %s",
                    connection.name,
                    outcome,
                )
                connection.start_failed(outcome)
        failures = [
            outcome
            for connection, outcome in zip(self._connections, outcomes, strict=True)
            if isinstance(outcome, BaseException)
            and not (isinstance(outcome, McpServerError) and not connection.server.required)
        ]
        if failures:
            await asyncio.gather(*(connection.aclose() for connection in self._connections))
            cancelled = [f for f in failures if not isinstance(f, Exception)]
            if cancelled:
                raise cancelled[0]
            if len(failures) == 1:
                raise failures[0]
            raise McpServerError(
                "\n".join(str(failure) for failure in failures),
                server_name=", ".join(
                    f.server_name if isinstance(f, McpServerError) else "?" for f in failures
                ),
            ) from failures[0]
        self._connected = True
        try:
            self._rebuild()  # names given in server order: the first server keeps plain names
        except BaseException:
            # Duplicate names (naming="none" or a naming function), or the user's tool_filter,
            # tool_metadata or naming raising: close what was opened, stopping the servers.
            await self.aclose()
            raise
        return self

    async def aclose(self) -> None:
        """Close every session (stopping stdio servers). Idempotent."""
        self._connected = False
        await asyncio.gather(*(connection.aclose() for connection in self._connections))

    def connect(self) -> McpToolProvider:
        """``aconnect`` for sync code: the sessions live on this thread's event loop, which
        the sync ``call()`` of the tools (and a sync ``ChatClient.call()``) run on too."""
        return run_sync(
            self.aconnect(), sync_name="McpToolProvider.connect()", async_name="provider.aconnect()"
        )

    def close(self) -> None:
        run_sync(self.aclose(), sync_name="McpToolProvider.close()", async_name="provider.aclose()")

    async def __aenter__(self) -> McpToolProvider:
        return await self.aconnect()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __enter__(self) -> McpToolProvider:
        return self.connect()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- tools ----------------------------------------------------------------------------------

    def tool_callbacks(self) -> Sequence[McpToolCallback]:
        """The servers' tools, as last listed. Raises ``RuntimeError`` before connecting, and
        ``ValueError`` when two tools have one name (not possible with ``naming="alt"``)."""
        if not self._connected:
            raise RuntimeError(
                "McpToolProvider is not connected; use `async with provider:`, "
                "`await provider.aconnect()` or `provider.connect()` first"
            )
        for connection in self._connections:
            connection.reconnect_in_background()  # only acts on a failed session, when due
        callbacks = self._callbacks
        if callbacks is None:
            callbacks = self._rebuild()
        return callbacks

    async def refresh(self) -> None:
        """List every server's tools now (they are also refreshed when a server announces a
        change)."""
        await asyncio.gather(*(connection.refresh() for connection in self._connections))

    def _on_tools_changed(self, connection: McpConnection) -> None:
        self._callbacks = None  # rebuilt on the next tool_callbacks()

    def _rebuild(self) -> tuple[McpToolCallback, ...]:
        with self._build_lock:
            callbacks = tuple(
                callback
                for connection in self._connections
                for callback in self._server_callbacks(connection)
            )
            if not self._namer.unique:
                _check_unique(callbacks)
            self._callbacks = callbacks
            return callbacks

    def _server_callbacks(self, connection: McpConnection) -> tuple[McpToolCallback, ...]:
        tools = connection.tools
        built = self._built.get(connection.name)
        if built is not None and built[0] is tools:
            return built[1]
        server = connection.server
        offered = [tool for tool in tools if server.accepts(tool.name)]
        if self._tool_filter is not None:
            offered = [tool for tool in offered if self._tool_filter(server.name, tool)]
        # An unchanged tool keeps its callback (no schema repair again on a re-listing).
        previous = {c.original_name: c for c in built[1]} if built is not None else {}
        callbacks = tuple(
            callback
            for tool in offered
            if (callback := self._callback_for(connection, tool, previous)) is not None
        )
        if server.include is not None:
            missing = sorted(set(server.include) - {tool.name for tool in tools})
            if missing:
                logger.warning(
                    "MCP server '%s' has no tools named %s (from include=)",
                    server.name,
                    ", ".join(missing),
                )
        self._built[connection.name] = (tools, callbacks)
        return callbacks

    def _callback_for(
        self, connection: McpConnection, tool: Tool, previous: dict[str, McpToolCallback]
    ) -> McpToolCallback | None:
        known = previous.get(tool.name)
        if known is not None and known.tool == tool:
            return known
        name = self._namer.name(connection.name, tool)
        metadata = (
            self._tool_metadata(connection.name, tool)
            if self._tool_metadata is not None
            else annotated_metadata(tool, connection.server.settings_for(tool.name))
        )
        try:
            return McpToolCallback(
                connection,
                tool,
                name=name,
                context_to_meta=self._context_to_meta,
                metadata=metadata,
            )
        except ValueError as exc:  # a schema too broken to repair: offer the other tools
            logger.warning(
                "MCP tool '%s' of server '%s' is left out: %s", tool.name, connection.name, exc
            )
            return None


def annotated_metadata(tool: Tool, settings: ToolSettings) -> ToolMetadata:
    """How the executor treats ``tool``: read-only when its ``readOnlyHint`` says so (or
    ``settings.read_only``), else a write, destructive unless its ``destructiveHint`` is
    false (the specification's defaults: a tool with no annotations may destroy);
    ``settings.approval`` ``"always"`` / ``"never"`` sets ``requires_approval``. The hints
    come from the server: trust them only as far as you trust it (``settings`` overrides)."""
    hints = tool.annotations
    read_only = settings.read_only
    if read_only is None:
        read_only = hints is not None and hints.read_only_hint is True
    destructive = not read_only and (hints is None or hints.destructive_hint is not False)
    approval = {"always": True, "never": False, None: None}[settings.approval]
    return ToolMetadata(requires_approval=approval, read_only=read_only, destructive=destructive)


def _check_unique(callbacks: Sequence[McpToolCallback]) -> None:
    servers_by_name: dict[str, list[str]] = {}
    for callback in callbacks:
        servers_by_name.setdefault(callback.definition.name, []).append(
            f"'{callback.original_name}' of {callback.server_name}"
        )
    duplicates = {name: tools for name, tools in servers_by_name.items() if len(tools) > 1}
    if duplicates:
        details = "; ".join(f"'{name}': {', '.join(t)}" for name, t in duplicates.items())
        raise ValueError(
            f"Multiple MCP tools with the same name ({', '.join(duplicates)}): {details}. "
            "Use naming='alt' (or a naming function that keeps them apart), or filter the tools"
        )
