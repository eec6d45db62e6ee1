"""The package root's names, one per line: type checkers read this stub instead of
``__init__.py``, and ``tooluse._lazy`` imports each from its module on first use (the
version too: reading it imports ``importlib.metadata``)."""

from tooluse._version import __version__ as __version__
from tooluse.advisors import HIGHEST_PRECEDENCE as HIGHEST_PRECEDENCE
from tooluse.advisors import LOWEST_PRECEDENCE as LOWEST_PRECEDENCE
from tooluse.advisors import CallAdvisor as CallAdvisor
from tooluse.advisors import ChatClientRequest as ChatClientRequest
from tooluse.advisors import ChatClientResponse as ChatClientResponse
from tooluse.advisors import LoggingAdvisor as LoggingAdvisor
from tooluse.advisors import StreamAdvisor as StreamAdvisor
from tooluse.advisors import ToolCallingAdvisor as ToolCallingAdvisor
from tooluse.calling import Approve as Approve
from tooluse.calling import (
    DefaultToolExecutionExceptionProcessor as DefaultToolExecutionExceptionProcessor,
)
from tooluse.calling import Deny as Deny
from tooluse.calling import PendingToolCall as PendingToolCall
from tooluse.calling import ToolCallingManager as ToolCallingManager
from tooluse.calling import ToolCallLimitExceeded as ToolCallLimitExceeded
from tooluse.calling import ToolExecutionResult as ToolExecutionResult
from tooluse.client import ApprovalRequired as ApprovalRequired
from tooluse.client import ChatClient as ChatClient
from tooluse.client import EntityValidationError as EntityValidationError
from tooluse.client import RunState as RunState
from tooluse.client import ToolCallsNotExecuted as ToolCallsNotExecuted
from tooluse.errors import ToolExecutionException as ToolExecutionException
from tooluse.memory import MessageChatMemoryAdvisor as MessageChatMemoryAdvisor
from tooluse.messages import AssistantMessage as AssistantMessage
from tooluse.messages import ChatOptions as ChatOptions
from tooluse.messages import ChatResponse as ChatResponse
from tooluse.messages import Generation as Generation
from tooluse.messages import Message as Message
from tooluse.messages import Prompt as Prompt
from tooluse.messages import ProviderContent as ProviderContent
from tooluse.messages import Reasoning as Reasoning
from tooluse.messages import SystemMessage as SystemMessage
from tooluse.messages import ToolCall as ToolCall
from tooluse.messages import ToolResponse as ToolResponse
from tooluse.messages import ToolResponseMessage as ToolResponseMessage
from tooluse.messages import Usage as Usage
from tooluse.messages import UserMessage as UserMessage
from tooluse.rag import RetrievalAugmentationAdvisor as RetrievalAugmentationAdvisor
from tooluse.tools import FunctionToolCallback as FunctionToolCallback
from tooluse.tools import ToolCallback as ToolCallback
from tooluse.tools import ToolCallbackProvider as ToolCallbackProvider
from tooluse.tools import ToolContext as ToolContext
from tooluse.tools import ToolDefinition as ToolDefinition
from tooluse.tools import ToolMetadata as ToolMetadata
from tooluse.tools import ToolParam as ToolParam
from tooluse.tools import tool as tool
from tooluse.tools import tool_callbacks as tool_callbacks

__all__: list[str]  # the names above but __version__ (read from this file on first use)
