"""Building model responses for test doubles: full ``ChatResponse``s or short forms."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from tooluse.messages import AssistantMessage, ChatResponse, Generation, ToolCall, Usage

__all__ = ["ResponseLike", "as_chat_response", "chat_response", "tool_call"]

ResponseLike: TypeAlias = ChatResponse | str | ToolCall | Sequence[ToolCall]
"""What a test double accepts as a response: a ``ChatResponse`` (used as is), a text answer,
one tool call, or several tool calls made in one round."""


def tool_call(
    name: str, arguments: Mapping[str, Any] | str | None = None, *, id: str = ""
) -> ToolCall:
    """A tool call in short form: ``tool_call("get_weather", {"city": "Paris"})``.

    ``arguments`` may be a mapping (JSON-encoded here) or raw JSON text. An empty ``id`` is
    filled in by the test double that replays the call (``call_<request>_<position>``).
    """
    if arguments is None:
        encoded = "{}"
    elif isinstance(arguments, str):
        encoded = arguments
    else:
        encoded = json.dumps(dict(arguments), ensure_ascii=False)
    return ToolCall(id=id, name=name, arguments=encoded)


def chat_response(
    text: str | None = None,
    tool_calls: Sequence[ToolCall] = (),
    *,
    usage: Usage | None = None,
    finish_reason: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> ChatResponse:
    """A one-generation response. ``finish_reason`` defaults to ``"tool_calls"`` when there
    are tool calls and ``"stop"`` otherwise."""
    if finish_reason is None:
        finish_reason = "tool_calls" if tool_calls else "stop"
    return ChatResponse(
        generations=(
            Generation(
                message=AssistantMessage(text=text, tool_calls=tuple(tool_calls)),
                metadata={"finish_reason": finish_reason},
            ),
        ),
        usage=usage,
        metadata=dict(metadata or {}),
    )


_WRONG_TYPE = (
    "A test double's response must be a ChatResponse, a str, a ToolCall or a sequence of "
    "ToolCalls; "
)


def as_chat_response(item: ResponseLike, *, request_index: int) -> ChatResponse:
    """The response a short form stands for. Tool calls without an id, also inside a given
    ``ChatResponse``, get ``call_<request_index>_<position>``: a streamed call needs its id
    (a fragment with an empty id continues the previous call)."""
    if isinstance(item, ChatResponse):
        return _with_call_ids(item, request_index)
    if isinstance(item, str):
        return chat_response(item)
    if isinstance(item, ToolCall):
        calls: tuple[object, ...] = (item,)
    elif isinstance(item, Sequence):
        calls = tuple(item)
    else:
        raise TypeError(_WRONG_TYPE + f"got a {type(item).__name__}: {item!r}")
    if not calls:
        raise ValueError("An empty sequence is not a response; give a text or tool calls")
    checked: list[ToolCall] = []
    for call in calls:
        if not isinstance(call, ToolCall):
            raise TypeError(_WRONG_TYPE + f"the sequence holds a {type(call).__name__}: {call!r}")
        checked.append(call)
    return _with_call_ids(chat_response(tool_calls=checked), request_index)


def _with_call_ids(response: ChatResponse, request_index: int) -> ChatResponse:
    if all(call.id for g in response.generations for call in g.message.tool_calls):
        return response
    position = 0
    generations = []
    for generation in response.generations:
        calls = []
        for call in generation.message.tool_calls:
            if not call.id:
                call = call.model_copy(update={"id": f"call_{request_index}_{position}"})
            calls.append(call)
            position += 1
        message = generation.message.model_copy(update={"tool_calls": tuple(calls)})
        generations.append(generation.model_copy(update={"message": message}))
    return response.model_copy(update={"generations": tuple(generations)})
