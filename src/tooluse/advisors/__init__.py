"""Advisors: the chain around the model call, and the advisors tooluse ships."""

from tooluse.advisors._api import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    Advisor,
    AdvisorChain,
    BaseAdvisor,
    CallAdvisor,
    ChatClientRequest,
    ChatClientResponse,
    StreamAdvisor,
    ToolAdvisor,
)
from tooluse.advisors._logging import LoggingAdvisor
from tooluse.advisors._tool_calling import (
    APPROVAL_REQUIRED,
    HISTORY_CONTEXT_KEY,
    PAUSE_CONTEXT_KEY,
    PENDING_TOOL_CALLS_METADATA,
    RESUME_CONTEXT_KEY,
    EligibilityChecker,
    LoopPause,
    LoopResume,
    ToolCallingAdvisor,
    ToolLoopListener,
    has_tool_calls,
)

__all__ = [
    "APPROVAL_REQUIRED",
    "HIGHEST_PRECEDENCE",
    "HISTORY_CONTEXT_KEY",
    "LOWEST_PRECEDENCE",
    "PAUSE_CONTEXT_KEY",
    "PENDING_TOOL_CALLS_METADATA",
    "RESUME_CONTEXT_KEY",
    "Advisor",
    "AdvisorChain",
    "BaseAdvisor",
    "CallAdvisor",
    "ChatClientRequest",
    "ChatClientResponse",
    "EligibilityChecker",
    "LoggingAdvisor",
    "LoopPause",
    "LoopResume",
    "StreamAdvisor",
    "ToolAdvisor",
    "ToolCallingAdvisor",
    "ToolLoopListener",
    "has_tool_calls",
]
