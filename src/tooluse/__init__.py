"""tooluse: LLM tool calling and tool search for Python.

The public names are imported when first used (``tooluse._lazy``): ``import tooluse`` and the
loop's names load neither numpy nor the embedding model, the stores or the provider SDKs."""

from typing import TYPE_CHECKING

from tooluse._lazy import lazy_exports
from tooluse._version import VERSION

if TYPE_CHECKING:
    from tooluse.advisors import (
        HIGHEST_PRECEDENCE,
        LOWEST_PRECEDENCE,
        CallAdvisor,
        ChatClientRequest,
        ChatClientResponse,
        LoggingAdvisor,
        StreamAdvisor,
        ToolCallingAdvisor,
    )
    from tooluse.calling import (
        Approve,
        DefaultToolExecutionExceptionProcessor,
        Deny,
        PendingToolCall,
        ToolCallingManager,
        ToolCallLimitExceeded,
        ToolExecutionResult,
    )
    from tooluse.client import (
        ApprovalRequired,
        ChatClient,
        EntityValidationError,
        RunState,
        ToolCallsNotExecuted,
    )
    from tooluse.errors import ToolExecutionException
    from tooluse.memory import MessageChatMemoryAdvisor
    from tooluse.messages import (
        AssistantMessage,
        ChatOptions,
        ChatResponse,
        Generation,
        Message,
        Prompt,
        ProviderContent,
        Reasoning,
        SystemMessage,
        ToolCall,
        ToolResponse,
        ToolResponseMessage,
        Usage,
        UserMessage,
    )
    from tooluse.rag import RetrievalAugmentationAdvisor
    from tooluse.tools import (
        FunctionToolCallback,
        ToolCallback,
        ToolCallbackProvider,
        ToolContext,
        ToolDefinition,
        ToolMetadata,
        ToolParam,
        tool,
        tool_callbacks,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "tooluse.advisors": (
            "HIGHEST_PRECEDENCE",
            "LOWEST_PRECEDENCE",
            "CallAdvisor",
            "ChatClientRequest",
            "ChatClientResponse",
            "LoggingAdvisor",
            "StreamAdvisor",
            "ToolCallingAdvisor",
        ),
        "tooluse.calling": (
            "Approve",
            "DefaultToolExecutionExceptionProcessor",
            "Deny",
            "PendingToolCall",
            "ToolCallingManager",
            "ToolCallLimitExceeded",
            "ToolExecutionResult",
        ),
        "tooluse.client": (
            "ApprovalRequired",
            "ChatClient",
            "EntityValidationError",
            "RunState",
            "ToolCallsNotExecuted",
        ),
        "tooluse.errors": ("ToolExecutionException",),
        "tooluse.memory": ("MessageChatMemoryAdvisor",),
        "tooluse.messages": (
            "AssistantMessage",
            "ChatOptions",
            "ChatResponse",
            "Generation",
            "Message",
            "Prompt",
            "ProviderContent",
            "Reasoning",
            "SystemMessage",
            "ToolCall",
            "ToolResponse",
            "ToolResponseMessage",
            "Usage",
            "UserMessage",
        ),
        "tooluse.rag": ("RetrievalAugmentationAdvisor",),
        "tooluse.tools": (
            "FunctionToolCallback",
            "ToolCallback",
            "ToolCallbackProvider",
            "ToolContext",
            "ToolDefinition",
            "ToolMetadata",
            "ToolParam",
            "tool",
            "tool_callbacks",
        ),
    },
)

__all__ = [
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "ApprovalRequired",
    "Approve",
    "AssistantMessage",
    "CallAdvisor",
    "ChatClient",
    "ChatClientRequest",
    "ChatClientResponse",
    "ChatOptions",
    "ChatResponse",
    "DefaultToolExecutionExceptionProcessor",
    "Deny",
    "EntityValidationError",
    "FunctionToolCallback",
    "Generation",
    "LoggingAdvisor",
    "Message",
    "MessageChatMemoryAdvisor",
    "PendingToolCall",
    "Prompt",
    "ProviderContent",
    "Reasoning",
    "RetrievalAugmentationAdvisor",
    "RunState",
    "StreamAdvisor",
    "SystemMessage",
    "ToolCall",
    "ToolCallLimitExceeded",
    "ToolCallback",
    "ToolCallbackProvider",
    "ToolCallingAdvisor",
    "ToolCallingManager",
    "ToolCallsNotExecuted",
    "ToolContext",
    "ToolDefinition",
    "ToolExecutionException",
    "ToolExecutionResult",
    "ToolMetadata",
    "ToolParam",
    "ToolResponse",
    "ToolResponseMessage",
    "Usage",
    "UserMessage",
    "tool",
    "tool_callbacks",
]

__version__ = VERSION
