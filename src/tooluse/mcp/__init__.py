"""MCP (Model Context Protocol), both ways, on the official ``mcp`` SDK.

- MCP servers as a tool source: ``McpToolProvider(StdioServer(...), HttpServer(...))`` gives
  ``McpToolCallback``s, one long-lived session per server, tool lists refreshed when a
  server announces a change, names kept unique across servers (``NamingStrategy``);
  ``load_mcp_config(path)`` reads the servers from a Claude Desktop / Cursor / VS Code style
  ``{"mcpServers": {...}}`` file.
- ``tooluse`` tools as an MCP server: ``mcp_server(...)`` builds one, ``serve_tools(...)`` /
  ``aserve_tools(...)`` serve it over stdio or streamable HTTP (``tooluse mcp serve``).
"""

from tooluse.mcp._callback import ContextToMeta, McpToolCallback
from tooluse.mcp._config import McpConfigError, load_mcp_config, mcp_servers_from_config
from tooluse.mcp._connection import McpConnection
from tooluse.mcp._convert import tool_context_to_meta
from tooluse.mcp._errors import McpServerError
from tooluse.mcp._naming import NamingStrategy
from tooluse.mcp._provider import (
    McpToolProvider,
    ToolFilter,
    ToolMetadataFor,
    annotated_metadata,
)
from tooluse.mcp._server import (
    MCP_META_KEY,
    ServedToolContext,
    aserve_tools,
    mcp_server,
    serve_tools,
)
from tooluse.mcp._servers import (
    HttpServer,
    InProcessServer,
    ProtocolMode,
    ServerParameters,
    StdioServer,
    ToolSettings,
)

__all__ = [
    "MCP_META_KEY",
    "ContextToMeta",
    "HttpServer",
    "InProcessServer",
    "McpConfigError",
    "McpConnection",
    "McpServerError",
    "McpToolCallback",
    "McpToolProvider",
    "NamingStrategy",
    "ProtocolMode",
    "ServedToolContext",
    "ServerParameters",
    "StdioServer",
    "ToolFilter",
    "ToolMetadataFor",
    "ToolSettings",
    "annotated_metadata",
    "aserve_tools",
    "load_mcp_config",
    "mcp_server",
    "mcp_servers_from_config",
    "serve_tools",
    "tool_context_to_meta",
]
