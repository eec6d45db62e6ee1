"""The error raised when an MCP server fails."""

from __future__ import annotations

from tooluse.errors import ToolSourceError

__all__ = ["McpServerError"]


class McpServerError(ToolSourceError):
    """An MCP server could not be reached, died, broke the protocol, or did not answer in time.

    ``server_name`` names the server (as configured), ``tool_name`` the MCP tool being called
    when there was one, ``code`` the JSON-RPC error code when the server sent one (``None`` for
    transport failures). The original error is the ``__cause__``.

    It is a ``ToolSourceError``: the model cannot fix a broken server, so the default
    exception processor of the ``ToolCallingManager`` lets it propagate to the caller.
    (A tool that *ran* and failed is not this error: its ``isError`` result reaches the model
    as a ``ToolExecutionException``.)
    """

    def __init__(
        self,
        message: str,
        *,
        server_name: str,
        tool_name: str | None = None,
        code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.server_name = server_name
        self.tool_name = tool_name
        self.code = code
