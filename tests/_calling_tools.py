"""Small hand-written ``ToolCallback``s for the ``ToolCallingManager`` tests: they record every
call and run a plain function (sync in a worker thread, async on the loop)."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any

from tooluse import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    Generation,
    Prompt,
    ToolCall,
    ToolCallback,
    ToolContext,
    ToolDefinition,
    ToolExecutionException,
    ToolMetadata,
    UserMessage,
)

ToolFunction = Callable[..., Any]


class FakeTool:
    """A tool named ``name`` that calls ``fn(**arguments)`` (plus ``context=`` when ``fn``
    takes it) and returns its result unchanged. Invalid JSON or a non-object argument is a
    ``ToolExecutionException``, like a real callback."""

    def __init__(self, name: str, fn: ToolFunction | None = None, **metadata: Any) -> None:
        # plain attributes satisfy the protocol's read-only properties
        self.definition = ToolDefinition(
            name=name, description=f"{name} tool", input_schema={"type": "object"}
        )
        self.metadata = ToolMetadata(**metadata)
        self._fn: ToolFunction = fn if fn is not None else (lambda **kw: f"{name} ok")
        self.calls: list[tuple[str, ToolContext | None]] = []

    def _arguments(self, arguments: str, context: ToolContext | None) -> dict[str, Any]:
        self.calls.append((arguments, context))
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ToolExecutionException(f"Arguments are not valid JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise ToolExecutionException("Arguments must be a JSON object")
        if "context" in inspect.signature(self._fn).parameters:
            parsed["context"] = context
        return parsed

    def _call_sync(self, arguments: str, context: ToolContext | None) -> str:
        return self._fn(**self._arguments(arguments, context))  # type: ignore[return-value]

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str:
        if inspect.iscoroutinefunction(self._fn):
            return await self._fn(**self._arguments(arguments, context))  # type: ignore[no-any-return]
        return await asyncio.to_thread(self._call_sync, arguments, context)


def tool_calls_response(*calls: ToolCall | tuple[str, str]) -> ChatResponse:
    """A one-generation response requesting ``calls`` (tuples are ``(name, arguments)``,
    given ids ``c0``, ``c1``, ... by position)."""
    built = tuple(
        c if isinstance(c, ToolCall) else ToolCall(id=f"c{i}", name=c[0], arguments=c[1])
        for i, c in enumerate(calls)
    )
    return ChatResponse(generations=(Generation(message=AssistantMessage(tool_calls=built)),))


def prompt_with(
    tools: Sequence[ToolCallback],
    *,
    context: dict[str, Any] | None = None,
    messages: Sequence[Any] = (),
) -> Prompt:
    return Prompt(
        list(messages) or [UserMessage(text="go")],
        ChatOptions(tool_callbacks=tuple(tools), tool_context=context or {}),
    )
