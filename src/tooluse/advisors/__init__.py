"""Advisors: the chain around the model call, and the advisors tooluse ships."""

from tooluse.advisors._api import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    Advisor,
    AdvisorChain,
    CallAdvisor,
    ChatClientRequest,
    ChatClientResponse,
    StreamAdvisor,
)

__all__ = [
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "Advisor",
    "AdvisorChain",
    "CallAdvisor",
    "ChatClientRequest",
    "ChatClientResponse",
    "StreamAdvisor",
]
