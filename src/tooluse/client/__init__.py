"""``ChatClient``: requests through the advisor chain to the model, with the tool loop,
streaming, structured output and pause/resume for human approval."""

from tooluse.client._client import AUTO_REGISTER_TOOL_ADVISOR, ChatClient, ChatClientRequestSpec
from tooluse.client._entity import EntityValidationError
from tooluse.client._response import (
    ApprovalRequired,
    CallResponse,
    StreamResponse,
    ToolCallsNotExecuted,
)
from tooluse.client._state import RunState

__all__ = [
    "AUTO_REGISTER_TOOL_ADVISOR",
    "ApprovalRequired",
    "CallResponse",
    "ChatClient",
    "ChatClientRequestSpec",
    "EntityValidationError",
    "RunState",
    "StreamResponse",
    "ToolCallsNotExecuted",
]
