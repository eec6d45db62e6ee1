"""Tools served by ``tooluse mcp serve tests/mcp_servers/tooluse_tools.py:tools`` in the MCP
tests (over stdio and streamable HTTP)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from tooluse import ToolContext, ToolParam, tool
from tooluse.tools import Image, ToolResult

PICTURE = Image(b"\x89PNG tooluse picture", "image/png")


@tool(read_only=True)
def get_weather(
    city: Annotated[str, ToolParam(description="The city")],
    unit: Literal["c", "f"] = "c",
) -> dict[str, Any]:
    """Current weather in a city."""
    return {"city": city, "temperature": 21 if unit == "c" else 70, "unit": unit}


@tool(read_only=True)
def whoami(context: ToolContext) -> dict[str, Any]:
    """The tool context this call received."""
    return dict(context)


@tool(read_only=True, result_converter=lambda caption: ToolResult(caption, [PICTURE]))
def picture(caption: str = "") -> str:
    """A picture, captioned if a caption is given (served as a text block, then an image
    block)."""
    return caption


@tool(read_only=True)
def broken() -> str:
    """Always fails."""
    raise RuntimeError("the weather service is down")


tools = [get_weather, whoami, picture, broken]
