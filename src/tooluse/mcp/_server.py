"""Serving ``tooluse`` tools as an MCP server (stdio or streamable HTTP).

Built on the SDK's low-level ``Server``, so each tool's input schema goes out exactly as
``tooluse`` generated it (``MCPServer`` would derive its own from the function). Each call
runs the tool callback, which validates its arguments itself; what the model should read
about a failure (bad arguments, an exception, a timeout) comes back as an ``isError`` result,
decided by the same exception processor the ``ToolCallingManager`` uses. An unknown tool is
a JSON-RPC ``-32602`` error, as the MCP specification asks. A result that is a JSON object
also goes out as ``structuredContent``.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    AudioContent,
    CallToolRequestParams,
    CallToolResult,
    ContentBlock,
    ImageContent,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)

from tooluse._sync import run_sync
from tooluse._version import VERSION
from tooluse.calling import (
    DefaultToolExecutionExceptionProcessor,
    ToolExecutionExceptionProcessor,
)
from tooluse.tools import (
    Image,
    ToolCallback,
    ToolContext,
    ToolMetadata,
    ToolResult,
    tool_callbacks,
)

__all__ = [
    "MCP_META_KEY",
    "ApprovalToolsError",
    "ServedToolContext",
    "aserve_tools",
    "mcp_server",
    "serve_tools",
]

MCP_META_KEY = "mcp_meta"
"""The tool-context key under which a served tool finds the ``_meta`` the client sent (less
the protocol's own keys). It is the client's word: never trust it for identity."""

ServedToolContext: TypeAlias = (
    Mapping[str, Any] | Callable[[ServerRequestContext[Any, Any]], Mapping[str, Any]]
)
"""The tool context of served calls: fixed entries, or a function of the SDK's request
context (its ``request`` is the HTTP request on streamable HTTP, e.g. for auth headers)."""


class ApprovalToolsError(ValueError):
    """Tools that need human approval, refused without ``allow_approval_tools``;
    ``tool_names`` are theirs (commands word their own advice from them)."""

    def __init__(self, tool_names: Sequence[str]) -> None:
        super().__init__(
            f"Tools {', '.join(tool_names)} require human approval, which MCP clients cannot "
            "give; leave them out or pass allow_approval_tools=True to serve them without "
            "approval"
        )
        self.tool_names = tuple(tool_names)


def mcp_server(
    *tools: object,
    name: str = "tooluse",
    version: str = VERSION,
    instructions: str | None = None,
    tool_context: ServedToolContext | None = None,
    exception_processor: ToolExecutionExceptionProcessor | None = None,
    allow_approval_tools: bool = False,
) -> Server[Any]:
    """An SDK ``Server`` offering ``tools`` (anything ``tool_callbacks(...)`` takes).

    Each call's ``ToolContext`` is ``tool_context`` (entries, or a function of the request)
    plus, under ``MCP_META_KEY``, the client's ``_meta``; ``tool_context`` wins a clash.
    Tools that need human approval are refused unless ``allow_approval_tools``: an MCP client
    would run them with no one asked.
    """
    callbacks = tool_callbacks(*tools)
    if not callbacks:
        raise ValueError("mcp_server needs at least one tool")
    held = [c.definition.name for c in callbacks if c.metadata.requires_approval]
    if held and not allow_approval_tools:
        raise ApprovalToolsError(held)
    by_name = {callback.definition.name: callback for callback in callbacks}
    listing = ListToolsResult(
        tools=[
            Tool(
                name=callback.definition.name,
                description=callback.definition.description,
                input_schema=callback.definition.input_schema,
                annotations=_annotations(callback.metadata),
            )
            for callback in callbacks
        ]
    )
    processor = exception_processor or DefaultToolExecutionExceptionProcessor()

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return listing

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        callback = by_name.get(params.name)
        if callback is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
        context = _context_for(ctx, tool_context)
        arguments = json.dumps(params.arguments or {}, ensure_ascii=False)
        return await _run(callback, arguments, context, processor)

    return Server(
        name,
        version=version,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def aserve_tools(
    *tools: object,
    name: str = "tooluse",
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    tool_context: ServedToolContext | None = None,
    allow_approval_tools: bool = False,
    log_level: str = "warning",
) -> None:
    """Serve ``tools`` until the client leaves (stdio) or the process is stopped (HTTP, at
    ``http://host:port/path``). See ``mcp_server`` for the options."""
    server = mcp_server(
        *tools,
        name=name,
        tool_context=tool_context,
        allow_approval_tools=allow_approval_tools,
    )
    if transport == "stdio":
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    elif transport == "http":
        import uvicorn  # a dependency of the mcp SDK; only HTTP serving needs it

        app = server.streamable_http_app(streamable_http_path=path, host=host)
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level)
        http_server = uvicorn.Server(config)
        serving = asyncio.ensure_future(http_server.serve())
        try:
            await asyncio.shield(serving)
        except asyncio.CancelledError:
            # uvicorn stops on a signal, not on cancellation: cancelled, it would keep its
            # port listening. Stop it as a signal does, then go on being cancelled.
            http_server.should_exit = True
            await serving
            raise
    else:
        raise ValueError(f"transport must be 'stdio' or 'http', got {transport!r}")


def serve_tools(
    *tools: object,
    name: str = "tooluse",
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    tool_context: ServedToolContext | None = None,
    allow_approval_tools: bool = False,
    log_level: str = "warning",
) -> None:
    """``aserve_tools`` for scripts: blocks until the server stops."""
    run_sync(
        aserve_tools(
            *tools,
            name=name,
            transport=transport,
            host=host,
            port=port,
            path=path,
            tool_context=tool_context,
            allow_approval_tools=allow_approval_tools,
            log_level=log_level,
        ),
        sync_name="serve_tools()",
        async_name="aserve_tools(...)",
    )


async def _run(
    callback: ToolCallback,
    arguments: str,
    context: ToolContext,
    processor: ToolExecutionExceptionProcessor,
) -> CallToolResult:
    name = callback.definition.name
    timeout = callback.metadata.timeout
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            result = await callback.acall(arguments, context)
    except Exception as exc:
        # Only our deadline is "did not finish"; a TimeoutError the tool raised itself (a read
        # that timed out) goes to the processor like any other failure, as in the manager.
        if isinstance(exc, TimeoutError) and deadline.expired():
            return _error(f"Tool '{name}' did not finish within {timeout:g} seconds.")
        try:
            return _error(processor.process(exc, name))
        except Exception as raised:  # the processor says the caller must hear of it
            raise MCPError(INTERNAL_ERROR, f"Tool '{name}' failed: {raised}") from raised
    return CallToolResult(content=_content(result), structured_content=_structured(result))


def _structured(result: str | ToolResult) -> dict[str, Any] | None:
    """A result that is a JSON object (a tool returning a dict or a model), as
    ``structuredContent`` beside its text block, which is its JSON as the specification asks.
    Nothing for other values (2025-11-25 allows only objects there) and for results with
    images, whose text stands ``{"image": n}`` in for them."""
    if not isinstance(result, str) or not result.startswith("{"):
        return None
    try:
        value = json.loads(result)
    except ValueError:  # text that only starts like an object
        return None
    return value if isinstance(value, dict) else None


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _content(result: str | ToolResult) -> list[ContentBlock]:
    """A result's text, then its images (``tooluse.tools.Image``) as MCP image or audio
    blocks; an ``Image`` of another type has no block of its own and goes as its JSON."""
    if isinstance(result, str):
        return [TextContent(type="text", text=result)]
    blocks: list[ContentBlock] = [TextContent(type="text", text=result.text)] if result.text else []
    blocks.extend(_media_block(image) for image in result.images)
    return blocks or [TextContent(type="text", text="")]


def _media_block(image: Image) -> ContentBlock:
    data = base64.b64encode(image.data).decode("ascii")
    if image.mime_type.startswith("image/"):
        return ImageContent(type="image", data=data, mime_type=image.mime_type)
    if image.mime_type.startswith("audio/"):
        return AudioContent(type="audio", data=data, mime_type=image.mime_type)
    return TextContent(type="text", text=json.dumps(image.to_json_object()))


def _context_for(
    ctx: ServerRequestContext[Any, Any], tool_context: ServedToolContext | None
) -> ToolContext:
    entries: dict[str, Any] = {}
    client_meta = {
        key: value
        for key, value in (ctx.meta or {}).items()
        if "/" not in key and key != "progressToken"  # the protocol's own keys
    }
    if client_meta:
        entries[MCP_META_KEY] = client_meta
    if tool_context is not None:
        entries.update(tool_context(ctx) if callable(tool_context) else tool_context)
    return ToolContext(entries)


def _annotations(metadata: ToolMetadata) -> ToolAnnotations:
    """What a client should know of a tool before calling it (the specification's hints)."""
    return ToolAnnotations(
        read_only_hint=metadata.read_only,
        destructive_hint=None if metadata.read_only else metadata.destructive,
        idempotent_hint=metadata.idempotency_key is not None or None,
    )
