"""Assertions about which tools a model called, with which arguments."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

from tooluse.messages import AssistantMessage, ChatResponse, Message, ToolCall

__all__ = ["ToolCallSource", "assert_tool_called", "assert_tool_not_called", "called_tools"]


@runtime_checkable
class _RecordsResponses(Protocol):
    responses: list[ChatResponse]


@runtime_checkable
class _HasHistory(Protocol):
    @property
    def conversation_history(self) -> Sequence[Message]: ...


ToolCallSource: TypeAlias = _RecordsResponses | _HasHistory | Sequence[Message]
"""A test double (its recorded responses), anything with a ``conversation_history`` (a
client response, a ``ToolExecutionResult``, a ``RunState``), or a list of messages."""


def called_tools(source: ToolCallSource) -> list[ToolCall]:
    """Every tool call in ``source``, in the order the model made them."""
    if isinstance(source, _RecordsResponses):
        return [
            call
            for response in source.responses
            for generation in response.generations
            for call in generation.message.tool_calls
        ]
    messages = source.conversation_history if isinstance(source, _HasHistory) else source
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise TypeError(
            "called_tools takes a test double, an object with conversation_history, or a "
            f"sequence of messages; got {type(source).__name__}"
        )
    return [
        call
        for message in messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    ]


def _parsed(call: ToolCall) -> Any:
    if not call.arguments.strip():
        return {}
    try:
        return json.loads(call.arguments)
    except ValueError:
        return call.arguments  # compared as raw text: malformed arguments never match a dict


def _describe(calls: list[ToolCall]) -> str:
    if not calls:
        return "no tool was called"
    return "calls made: " + "; ".join(f"{c.name}({c.arguments})" for c in calls)


def assert_tool_called(
    source: ToolCallSource,
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    times: int | None = None,
) -> list[ToolCall]:
    """Assert that tool ``name`` was called (with exactly these ``arguments``, compared as
    parsed JSON, when given; exactly ``times`` times when given, else at least once).

    Returns the matching calls. The ``AssertionError`` lists every call that was made.
    """
    calls = called_tools(source)
    matching = [call for call in calls if call.name == name]
    if arguments is not None:
        expected = dict(arguments)
        matching = [call for call in matching if _parsed(call) == expected]
    wanted = f"tool {name!r}"
    if arguments is not None:
        wanted += f" with arguments {dict(arguments)!r}"
    if times is None and not matching:
        raise AssertionError(f"Expected a call to {wanted}, but {_describe(calls)}")
    if times is not None and len(matching) != times:
        raise AssertionError(
            f"Expected {times} call(s) to {wanted}, found {len(matching)}; {_describe(calls)}"
        )
    return matching


def assert_tool_not_called(source: ToolCallSource, name: str) -> None:
    """Assert that tool ``name`` was never called."""
    assert_tool_called(source, name, times=0)
