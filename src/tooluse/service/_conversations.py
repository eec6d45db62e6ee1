"""A conversation's messages as ``GET /api/conversations/{id}`` shows them: what its chat
memory holds, in the shapes the chat stream sends (a tool call as a ``tool_call`` event's
data, a result as a ``tool_result`` event's), so that a client renders a stored turn as it
rendered the live one; each question with the display events the service stored of its turn
(:mod:`tooluse.service._turn_displays`), which memory does not keep."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tooluse.history import paused_turn_of
from tooluse.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.qa import ToolCallEvent, ToolResultEvent
from tooluse.service._turn_displays import StoredTurnDisplay

__all__ = ["message_views"]


def message_views(
    messages: Sequence[Message], displays: Sequence[StoredTurnDisplay] = ()
) -> list[dict[str, Any]]:
    """``messages`` as the user sees them, in order: system messages (instructions for the
    model, never shown) are left out. Each has its ``role`` and ``paused_turn``: the id of
    the turn it belongs to if that turn paused for approval, else ``None``. A question
    (``role`` ``"user"``) has the ``events`` of its turn's record among ``displays`` (oldest
    first), ``[]`` when none is stored."""
    shown = [message for message in messages if not isinstance(message, SystemMessage)]
    events = _events_by_question(shown, displays)
    views = []
    for position, message in enumerate(shown):
        view = _view(message)
        if isinstance(message, UserMessage):
            view["events"] = events.get(position, [])
        views.append(view)
    return views


def _events_by_question(
    messages: Sequence[Message], displays: Sequence[StoredTurnDisplay]
) -> dict[int, list[dict[str, Any]]]:
    """The events of each question's turn, by the question's position in ``messages``.

    A question of a turn that paused carries its turn's id, as its record does. The other
    records are matched to the questions by their text, from the newest back, each record
    after the one before in turn order: a record whose turn memory no longer holds (cut by
    the window, or cleared) matches no question."""
    paused = {display.turn_id: display for display in displays if display.turn_id is not None}
    unpaused = [display for display in displays if display.turn_id is None]
    found: dict[int, list[dict[str, Any]]] = {}
    for position in reversed(range(len(messages))):
        message = messages[position]
        if not isinstance(message, UserMessage):
            continue
        turn_id = paused_turn_of(message)
        if turn_id is not None:
            if turn_id in paused:
                found[position] = paused[turn_id].events
            continue
        for index in reversed(range(len(unpaused))):
            if unpaused[index].question == message.text:
                found[position] = unpaused[index].events
                del unpaused[index:]
                break
    return found


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
