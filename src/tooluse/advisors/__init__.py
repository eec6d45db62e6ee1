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
from tooluse.advisors._recent_images import (
    OMITTED_IMAGES_NOTE,
    RecentImagesAdvisor,
    omit_older_images,
)
from tooluse.advisors._tool_calling import (
    APPROVAL_REQUIRED,
    PENDING_TOOL_CALLS_METADATA,
    EligibilityChecker,
    HistoryReplayer,
    ToolCallingAdvisor,
    ToolLoopListener,
    has_tool_calls,
)
from tooluse.advisors._turn import LoopOutcome, LoopPause, LoopResume, Turn, TurnKey

__all__ = [
    "APPROVAL_REQUIRED",
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "OMITTED_IMAGES_NOTE",
    "PENDING_TOOL_CALLS_METADATA",
    "Advisor",
    "AdvisorChain",
    "BaseAdvisor",
    "CallAdvisor",
    "ChatClientRequest",
    "ChatClientResponse",
    "EligibilityChecker",
    "HistoryReplayer",
    "LoggingAdvisor",
    "LoopOutcome",
    "LoopPause",
    "LoopResume",
    "RecentImagesAdvisor",
    "StreamAdvisor",
    "ToolAdvisor",
    "ToolCallingAdvisor",
    "ToolLoopListener",
    "Turn",
    "TurnKey",
    "has_tool_calls",
    "omit_older_images",
]
