"""tooluse: LLM tool calling and tool search for Python."""

from tooluse.advisors import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    CallAdvisor,
    ChatClientRequest,
    ChatClientResponse,
    StreamAdvisor,
)
from tooluse.errors import ToolExecutionException
from tooluse.messages import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    Generation,
    Message,
    Prompt,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from tooluse.tools import (
    ToolCallback,
    ToolCallbackProvider,
    ToolContext,
    ToolDefinition,
    ToolMetadata,
)

__all__ = [
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "AssistantMessage",
    "CallAdvisor",
    "ChatClientRequest",
    "ChatClientResponse",
    "ChatOptions",
    "ChatResponse",
    "Generation",
    "Message",
    "Prompt",
    "StreamAdvisor",
    "SystemMessage",
    "ToolCall",
    "ToolCallback",
    "ToolCallbackProvider",
    "ToolContext",
    "ToolDefinition",
    "ToolExecutionException",
    "ToolMetadata",
    "ToolResponse",
    "ToolResponseMessage",
    "Usage",
    "UserMessage",
]
