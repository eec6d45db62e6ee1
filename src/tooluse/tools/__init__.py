"""Declaring tools: ``@tool``, ``ToolParam``, ``FunctionToolCallback``, ``tool_callbacks``,
definitions, metadata, the ``ToolCallback`` protocol, its ``BaseToolCallback`` and the tool
context."""

from tooluse.tools._callback import (
    BaseToolCallback,
    ToolCallback,
    ToolCallbackProvider,
    has_fixed_definition,
    is_tool_callback,
    is_tool_callback_provider,
)
from tooluse.tools._decorator import tool
from tooluse.tools._definition import ToolContext, ToolDefinition, ToolMetadata
from tooluse.tools._function import FunctionToolCallback
from tooluse.tools._function_schema import ToolParam
from tooluse.tools._results import Image, ResultConverter, ToolResult, convert_result
from tooluse.tools._sources import tool_callbacks

__all__ = [
    "BaseToolCallback",
    "FunctionToolCallback",
    "Image",
    "ResultConverter",
    "ToolCallback",
    "ToolCallbackProvider",
    "ToolContext",
    "ToolDefinition",
    "ToolMetadata",
    "ToolParam",
    "ToolResult",
    "convert_result",
    "has_fixed_definition",
    "is_tool_callback",
    "is_tool_callback_provider",
    "tool",
    "tool_callbacks",
]
