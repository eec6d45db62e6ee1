"""An MCP server built with the SDK's own ``MCPServer`` (independent of tooluse), for the client
tests. Run: ``python sdk_server.py``; it speaks MCP over stdio.

Tools: ``echo``, ``add`` (both annotated read-only), ``pixel`` (an image, captioned or not),
``mixed`` (text, image, resource, link), ``structured`` (structured content only), ``fail``
(an ``isError`` result),
``crash`` (the process exits mid-call), ``sleep``, ``meta`` (returns the request's ``_meta``),
``add_tool`` / ``remove_tool`` (change the tool list and notify the client, in either protocol
era), and ``counter`` (how many calls this process served, to check one session serves them
all).
"""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

PIXEL = base64.b64encode(b"\x89PNG fake pixel").decode()

server = MCPServer("sdk-test-server")
calls = 0


def _count() -> None:
    global calls
    calls += 1


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Echo the text back."""
    _count()
    return text


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    _count()
    return a + b


@server.tool()
def pixel(caption: str = "") -> CallToolResult:
    """One image, after a text block with the caption if one is given (as browser-automation
    servers answer: "Took screenshot", then the image)."""
    image = ImageContent(type="image", data=PIXEL, mime_type="image/png")
    text = [TextContent(type="text", text=caption)] if caption else []
    return CallToolResult(content=[*text, image])


@server.tool()
def mixed() -> CallToolResult:
    """Text, an image, an embedded resource and a resource link."""
    return CallToolResult(
        content=[
            TextContent(type="text", text="first"),
            ImageContent(type="image", data=PIXEL, mime_type="image/png"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(
                    uri="file:///a.txt", mime_type="text/plain", text="A"
                ),
            ),
            ResourceLink(type="resource_link", uri="file:///b.txt", name="b"),
        ]
    )


@server.tool()
def structured() -> CallToolResult:
    """Structured content and no content blocks."""
    return CallToolResult(content=[], structured_content={"temperature": 21.5})


@server.tool()
def fail(message: str) -> str:
    """Always fails with the given message."""
    raise ToolError(message)


@server.tool()
def crash() -> str:
    """The server process dies while answering."""
    os._exit(3)


@server.tool()
async def sleep(seconds: float) -> str:
    """Wait, then answer."""
    _count()
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def counter() -> int:
    """How many echo/add/sleep calls this process has served."""
    return calls


@server.tool()
def meta(ctx: Context) -> dict[str, Any]:
    """The request's _meta, minus the keys the SDK adds."""
    received = ctx.request_context.meta or {}
    return {k: v for k, v in dict(received).items() if "/" not in k and k != "traceparent"}


async def _notify_tools_changed(ctx: Context) -> None:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool called `name` and tell the client the list changed."""

    def added(text: str = "") -> str:
        return f"{name}:{text}"

    server.add_tool(added, name=name, description=f"Added at run time: {name}")
    await _notify_tools_changed(ctx)
    return f"added {name}"


@server.tool()
async def remove_tool(name: str, ctx: Context) -> str:
    """Remove the tool called `name` and tell the client the list changed."""
    server.remove_tool(name)
    await _notify_tools_changed(ctx)
    return f"removed {name}"


if __name__ == "__main__":
    server.run("stdio")
