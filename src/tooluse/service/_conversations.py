"""A conversation's messages as ``GET /api/conversations/{id}`` shows them: what its chat
memory holds, in the shapes the chat stream sends (a tool call as a ``tool_call`` event's
data, a result as a ``tool_result`` event's), so that a client renders a stored turn as it
rendered the live one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tooluse.history import paused_turn_of
from tooluse.messages import AssistantMessage, Message, SystemMessage, ToolResponseMessage
from tooluse.qa import ToolCallEvent, ToolResultEvent

__all__ = ["message_views"]


def message_views(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """``messages`` as the user sees them, in order: system messages (instructions for the
    model, never shown) are left out. Each has its ``role`` and ``paused_turn``: the id of
    the turn it belongs to if that turn paused for approval, else ``None``."""
    return [_view(message) for message in messages if not isinstance(message, SystemMessage)]


def _view(message: Message) -> dict[str, Any]:
    view: dict[str, Any] = {"role": message.role}
    if isinstance(message, AssistantMessage):
        view["text"] = message.text
        view["tool_calls"] = [
            ToolCallEvent(call.id, call.name, call.arguments).to_dict()
            for call in message.tool_calls
        ]
    elif isinstance(message, ToolResponseMessage):
        view["results"] = [ToolResultEvent.of(response).to_dict() for response in message.responses]
    else:
        view["text"] = message.text
    view["paused_turn"] = paused_turn_of(message)
    return view
