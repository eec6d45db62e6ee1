"""Declaring tools: definitions, metadata, the ``ToolCallback`` protocol and the tool context."""

from tooluse.tools._callback import ToolCallback, ToolCallbackProvider
from tooluse.tools._context import ToolContext
from tooluse.tools._definition import ToolDefinition, ToolMetadata

__all__ = [
    "ToolCallback",
    "ToolCallbackProvider",
    "ToolContext",
    "ToolDefinition",
    "ToolMetadata",
]
