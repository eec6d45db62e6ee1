"""``TestModel``: a chat model that calls every offered tool once, then answers."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
from typing import Any

from tooluse.messages import (
    AssistantMessage,
    ChatResponse,
    Message,
    Prompt,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.testing._base import RespondingModel
from tooluse.testing._responses import chat_response
from tooluse.testing._schema_values import generate_arguments
from tooluse.tools import ToolDefinition

__all__ = ["TestModel"]


def _current_turn(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """The messages since the last user message (all of them when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], UserMessage):
            return messages[index + 1 :]
    return messages


class TestModel(RespondingModel):
    """A model for demos and tests that needs no script.

    On each request it calls, in one round, every offered tool it has not called yet in the
    current turn (the messages since the last user message), with arguments generated from
    the tool's input schema (valid against it; see :func:`generate_arguments`). When nothing
    is left to call it answers with ``final_text``, or by default a JSON object mapping each
    tool called in the turn to its result (``"success (no tool calls)"`` when none was). A
    result with images is its text, then a line naming them (``[1 image: image/png]``): the
    model cannot look at them, but an offline run shows that they came.

    ``call_tools`` limits which tools it calls: ``"all"`` (default), or a collection of names
    (offered tools not named are left alone; names never offered are never called). A turn
    that ends with tools offered but none of the named ones offered or called gives a
    ``UserWarning`` naming both: a misspelt name would otherwise test nothing.
    Requests are recorded in :attr:`requests`, responses in :attr:`responses`.
    """

    __test__ = False  # not a pytest test class, despite the name
    model_name = "test"

    def __init__(
        self,
        *,
        call_tools: str | Iterable[str] = "all",
        final_text: str | None = None,
        chunk_size: int = 8,
    ) -> None:
        if isinstance(call_tools, str):
            if call_tools != "all":
                raise ValueError(
                    f'call_tools takes "all" or a collection of tool names, got {call_tools!r}'
                )
            self.call_tools: frozenset[str] | None = None
        else:
            self.call_tools = frozenset(call_tools)
        super().__init__(chunk_size=chunk_size)
        self.final_text = final_text
        # Generated arguments per definition object, so a tool's schema is walked once.
        self._arguments: dict[int, tuple[ToolDefinition, str]] = {}

    def _arguments_for(self, definition: ToolDefinition) -> str:
        cached = self._arguments.get(id(definition))
        if cached is not None and cached[0] is definition:
            return cached[1]
        arguments = json.dumps(generate_arguments(definition.input_schema), ensure_ascii=False)
        self._arguments[id(definition)] = (definition, arguments)
        return arguments

    def _respond(self, prompt: Prompt) -> ChatResponse:
        self.requests.append(prompt)
        turn = _current_turn(prompt.messages)
        called = {
            call.name
            for message in turn
            if isinstance(message, AssistantMessage)
            for call in message.tool_calls
        }
        round_number = sum(isinstance(m, AssistantMessage) for m in prompt.messages)
        calls: list[ToolCall] = []
        for callback in prompt.options.tool_callbacks:
            definition = callback.definition
            name = definition.name
            if name in called or (self.call_tools is not None and name not in self.call_tools):
                continue
            called.add(name)
            calls.append(
                ToolCall(
                    id=f"call_{round_number}_{len(calls)}",
                    name=name,
                    arguments=self._arguments_for(definition),
                )
            )
        if not calls:
            self._warn_if_none_named(prompt, called)
        response = chat_response(tool_calls=calls) if calls else chat_response(self._answer(turn))
        self.responses.append(response)
        return response

    def _warn_if_none_named(self, prompt: Prompt, called: set[str]) -> None:
        if not self.call_tools or called & self.call_tools:  # None: "all"; empty: none asked
            return
        offered = sorted(c.definition.name for c in prompt.options.tool_callbacks)
        if offered:
            warnings.warn(
                f"TestModel(call_tools={sorted(self.call_tools)}) called no tool this turn: "
                f"none of those names was offered (offered: {offered})",
                UserWarning,
                stacklevel=2,
            )

    def _answer(self, turn: tuple[Message, ...]) -> str:
        if self.final_text is not None:
            return self.final_text
        results = {
            response.name: _result_value(response)
            for message in turn
            if isinstance(message, ToolResponseMessage)
            for response in message.responses
        }
        if not results:
            return "success (no tool calls)"
        return json.dumps(results, ensure_ascii=False)


def _result_value(response: ToolResponse) -> Any:
    """A result in the summary: its JSON value, or its text; with images, its text and a line
    naming them."""
    if response.images:
        count = len(response.images)
        types = ", ".join(image.mime_type for image in response.images)
        named = f"[{count} image{'s' if count > 1 else ''}: {types}]"
        return "\n".join(filter(None, (response.data, named)))
    try:
        return json.loads(response.data)
    except ValueError:
        return response.data
