"""``McpToolCallback``: one MCP server tool as a ``ToolCallback``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcp.types import Tool
from pydantic import TypeAdapter, ValidationError

from tooluse.errors import ToolArgumentsError, ToolExecutionException
from tooluse.mcp._connection import McpConnection
from tooluse.mcp._convert import error_text, result_content
from tooluse.schema import ensure_valid_input_schema
from tooluse.tools import BaseToolCallback, ToolContext, ToolDefinition, ToolMetadata, ToolResult
from tooluse.tools._function_schema import describe_validation_error, normalise_arguments

__all__ = ["ContextToMeta", "McpToolCallback"]

ContextToMeta = Callable[[Mapping[str, Any] | None], dict[str, Any] | None]
"""Builds a call's ``_meta`` from the tool context (``tool_context_to_meta`` by default)."""

_ARGUMENTS: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


class McpToolCallback(BaseToolCallback):
    """A tool of an MCP server, as the model and the executor see it.

    - definition: the name the provider gave it (see ``NamingStrategy``), the server's
      description (else the tool's display name: its title, else its annotations' title,
      else its name, the specification's order) and its input schema repaired by
      ``ensure_valid_input_schema``;
    - calling: the argument JSON must be an object (empty or ``null`` means ``{}``), else a
      ``ToolExecutionException`` tells the model what to fix; the server validates the rest.
      The call goes to the server under its own name, with the tool context as the request's
      ``_meta`` (see ``tool_context_to_meta``);
    - results: text for the model, or a ``ToolResult`` when the server sent images (see
      ``tooluse.mcp._convert``); an ``isError`` result raises
      ``ToolExecutionException`` with the server's error text, so the model reads it;
    - a server that died, broke the protocol or did not answer in time raises
      ``McpServerError``, which reaches the caller.
    """

    __slots__ = ("_connection", "_context_to_meta", "_definition", "_metadata", "tool")
    fixed_definition = True  # a changed server tool is a new callback (the provider's)

    def __init__(
        self,
        connection: McpConnection,
        tool: Tool,
        *,
        name: str,
        context_to_meta: ContextToMeta,
        metadata: ToolMetadata | None = None,
    ) -> None:
        self.tool = tool
        """The tool as the server listed it."""
        self._connection = connection
        self._context_to_meta = context_to_meta
        self._definition = ToolDefinition(
            name=name,
            description=_description(tool),
            input_schema=ensure_valid_input_schema(tool.input_schema),
        )
        self._metadata = metadata if metadata is not None else ToolMetadata()

    def __repr__(self) -> str:
        return (
            f"McpToolCallback({self._definition.name!r}, server={self.server_name!r}, "
            f"tool={self.tool.name!r})"
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def metadata(self) -> ToolMetadata:
        return self._metadata

    @property
    def server_name(self) -> str:
        return self._connection.name

    @property
    def original_name(self) -> str:
        """The tool's name on its server (the model may see another, see ``NamingStrategy``)."""
        return self.tool.name

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str | ToolResult:
        try:
            parsed = _ARGUMENTS.validate_json(normalise_arguments(arguments))
        except ValidationError as exc:
            message = describe_validation_error(
                self._definition.name,
                exc,
                self._definition.input_schema,
                normalise_arguments(arguments),
            )
            raise ToolArgumentsError(message, definition=self._definition, cause=exc) from exc
        result = await self._connection.call_tool(
            self.tool.name, parsed, self._context_to_meta(context)
        )
        if result.is_error:
            text = error_text(result) or (
                f"The MCP tool '{self.tool.name}' of server '{self.server_name}' reported an "
                "error without a message"
            )
            raise ToolExecutionException(text, definition=self._definition)
        return result_content(result)


def _description(tool: Tool) -> str:
    titled = tool.annotations.title if tool.annotations is not None else None
    return tool.description or tool.title or titled or tool.name
