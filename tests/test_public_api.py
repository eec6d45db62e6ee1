"""SPEC section 1 is a contract: code outside this repository imports these names from the
package root (or the named sub-modules) and calls them with these parameters. Each test
fails if a name, a parameter or a default changes."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import tooluse
from tooluse import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    Approve,
    AssistantMessage,
    ChatClient,
    ChatOptions,
    ChatResponse,
    DefaultToolExecutionExceptionProcessor,
    Deny,
    FunctionToolCallback,
    Generation,
    PendingToolCall,
    Prompt,
    RunState,
    ToolCall,
    ToolCallback,
    ToolCallingAdvisor,
    ToolCallingManager,
    ToolContext,
    ToolDefinition,
    ToolExecutionResult,
    ToolMetadata,
    ToolParam,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    UserMessage,
    tool,
)
from tooluse.client import CallResponse, ChatClientRequestSpec, StreamResponse
from tooluse.models import ChatModel
from tooluse.tools import BaseToolCallback

ROOT_NAMES = [
    "SystemMessage",
    "UserMessage",
    "AssistantMessage",
    "ToolCall",
    "ToolResponse",
    "ToolResponseMessage",
    "Prompt",
    "ChatResponse",
    "Generation",
    "Usage",
    "ChatOptions",
    "tool",
    "ToolParam",
    "ToolContext",
    "ToolDefinition",
    "ToolMetadata",
    "ToolCallback",
    "FunctionToolCallback",
    "tool_callbacks",
    "ToolCallingManager",
    "ToolExecutionResult",
    "ToolExecutionException",
    "DefaultToolExecutionExceptionProcessor",
    "ToolCallLimitExceeded",
    "ApprovalRequired",
    "ToolCallsNotExecuted",
    "EntityValidationError",
    "ChatClient",
    "CallAdvisor",
    "StreamAdvisor",
    "ToolCallingAdvisor",
    "MessageChatMemoryAdvisor",
    "RetrievalAugmentationAdvisor",
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "PendingToolCall",
    "Approve",
    "Deny",
    "RunState",
]


def parameters(function: Callable[..., Any]) -> dict[str, Any]:
    """Parameter name -> default (``inspect.Parameter.empty`` when required), ``self`` left out."""
    return {
        name: p.default
        for name, p in inspect.signature(function).parameters.items()
        if name != "self"
    }


def fields(model: type) -> list[str]:
    if dataclasses.is_dataclass(model):
        return [f.name for f in dataclasses.fields(model)]
    return list(model.model_fields)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ROOT_NAMES)
def test_every_root_name_is_importable_and_exported(name: str) -> None:
    assert getattr(tooluse, name) is not None
    assert name in tooluse.__all__


def test_the_root_names_are_listed_once_in_the_stub_and_resolve_to_their_modules() -> None:
    # __init__.pyi is the one list: type checkers read it, tooluse._lazy imports from it.
    stub = Path(tooluse.__file__).with_suffix(".pyi").read_text(encoding="utf-8")
    listed = re.findall(r"^from ([\w.]+) import \(?\s*(\w+) as \2\b", stub, flags=re.MULTILINE)
    public = sorted(name for _, name in listed if not name.startswith("_"))
    assert public == tooluse.__all__ == sorted(set(tooluse.__all__))
    assert ("tooluse._version", "__version__") in listed  # read when asked for, not at import
    assert set(ROOT_NAMES) <= set(tooluse.__all__) <= set(dir(tooluse))
    for module, name in listed:
        assert getattr(tooluse, name) is getattr(importlib.import_module(module), name)
    assert "ChatClient" not in Path(tooluse.__file__).read_text(encoding="utf-8")


def test_sub_module_names() -> None:
    from tooluse import schema, testing

    for name in ("generate_for_function_input", "generate_for_type", "ensure_valid_input_schema"):
        assert callable(getattr(schema, name))
    for name in ("ScriptedModel", "FunctionModel", "TestModel"):
        assert isinstance(getattr(testing, name), type)


def test_message_fields() -> None:
    assert fields(ToolCall) == ["id", "name", "arguments"]
    assert fields(ToolResponse) == ["id", "name", "data", "is_error", "images"]
    assert fields(ToolResponseMessage)[:2] == ["role", "responses"]
    assert fields(Generation) == ["message", "metadata"]
    assert fields(ChatResponse) == ["generations", "usage", "metadata"]
    assert fields(Usage) == [
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    ]
    assert {"tool_callbacks", "tool_context", "model", "temperature"} <= set(fields(ChatOptions))
    assert list(parameters(Prompt))[:2] == ["messages", "options"]
    assert ToolResponse(id="1", name="t", data="x").is_error is False
    assert AssistantMessage(text="a").tool_calls == ()
    assert ChatResponse().has_tool_calls() is False
    assert UserMessage(text="hi").text == "hi"


def test_declaration_signatures() -> None:
    assert parameters(tool) == {
        "function": None,
        "name": None,
        "description": None,
        "return_direct": False,
        "requires_approval": None,
        "sequential": False,
        "timeout": None,
        "result_converter": None,
        "inline": False,
        "read_only": False,
        "destructive": False,
        "idempotency_key": None,
    }
    assert parameters(ToolParam) == {"description": None, "required": None}
    assert fields(ToolDefinition) == ["name", "description", "input_schema"]
    assert fields(ToolMetadata)[0] == "return_direct"
    assert ToolMetadata().return_direct is False
    # The protocol is async only; the callbacks of the package add call() (BaseToolCallback).
    assert issubclass(FunctionToolCallback, BaseToolCallback)
    for protocol_method in (BaseToolCallback.call, ToolCallback.acall):
        assert parameters(protocol_method) == {
            "arguments": inspect.Parameter.empty,
            "context": None,
        }
    assert inspect.iscoroutinefunction(ToolCallback.acall)
    assert {"input_type", "input_schema"} <= set(parameters(FunctionToolCallback))
    assert dict(ToolContext({"k": "v"})) == {"k": "v"}


class _AsyncOnlyModel:
    """Implements only what the ChatModel protocol asks: calls ``echo``, then answers with
    its result."""

    async def acall(self, prompt: Prompt) -> ChatResponse:
        results = [m for m in prompt.messages if isinstance(m, ToolResponseMessage)]
        message = (
            AssistantMessage(text=results[-1].responses[0].data)
            if results
            else AssistantMessage(tool_calls=(ToolCall(id="c1", name="echo", arguments="{}"),))
        )
        return ChatResponse(generations=(Generation(message=message),))

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        yield await self.acall(prompt)


class _AsyncOnlyTool:
    """Implements only what the ToolCallback protocol asks."""

    definition = ToolDefinition("echo", "Echo.", {"type": "object", "properties": {}})
    metadata = ToolMetadata()

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str:
        return "echoed"


def test_the_model_and_tool_protocols_are_async_only_and_the_sync_client_runs_them() -> None:
    model, echo = _AsyncOnlyModel(), _AsyncOnlyTool()
    assert isinstance(model, ChatModel) and isinstance(echo, ToolCallback)
    assert tooluse.tool_callbacks(echo) == [echo]
    assert ChatClient(model, tools=[echo]).prompt("hi").call().content() == "echoed"


def test_execution_signatures_and_defaults() -> None:
    manager = parameters(ToolCallingManager)
    assert {
        key: manager[key]
        for key in (
            "exception_processor",
            "max_calls_per_tool",
            "max_total_tool_calls",
            "per_tool_limits",
            "excluded_from_limits",
            "on_limit_exceeded",
        )
    } == {
        "exception_processor": None,
        "max_calls_per_tool": 40,
        "max_total_tool_calls": 150,
        "per_tool_limits": None,
        "excluded_from_limits": (),
        "on_limit_exceeded": "raise",
    }
    assert manager["resolver_fallback"] is False
    assert manager["unknown_tool"] == "error"
    for method in ("resolve_tool_definitions", "execute_tool_calls", "aexecute_tool_calls"):
        assert callable(getattr(ToolCallingManager, method))
    assert inspect.iscoroutinefunction(ToolCallingManager.aexecute_tool_calls)
    assert fields(ToolExecutionResult)[:2] == ["conversation_history", "return_direct"]
    assert parameters(DefaultToolExecutionExceptionProcessor) == {
        "always_throw": False,
        "rethrow": (),
    }


def test_client_and_advisor_signatures() -> None:
    client = parameters(ChatClient)
    assert next(iter(client)) == "model"
    assert {"system", "tools", "advisors", "tool_context"} <= set(client)
    for method in (
        "system",
        "user",
        "messages",
        "tools",
        "add_tools",
        "tool_context",
        "context",
        "advisors",
        "options",
        "call",
        "acall",
        "stream",
    ):
        assert callable(getattr(ChatClientRequestSpec, method)), method
    for method in ("content", "chat_response", "entity"):
        assert callable(getattr(CallResponse, method)), method
    assert callable(StreamResponse.content) and hasattr(StreamResponse, "__aiter__")
    for method in ("resume", "aresume"):
        assert list(parameters(getattr(ChatClient, method)))[:2] == ["state", "decisions"]
    assert ToolCallingAdvisor().order == HIGHEST_PRECEDENCE + 300
    assert (HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE) == (-(2**31), 2**31 - 1)


def test_approval_signatures() -> None:
    assert fields(PendingToolCall) == ["id", "name", "arguments", "reason"]
    assert parameters(Approve) == {"arguments": None, "by": None}
    assert Deny("why").message == "why"
    assert callable(RunState.to_json) and callable(RunState.from_json)


def test_the_spec_signatures_take_their_arguments_by_position() -> None:
    # SPEC section 1 writes these as calls: code outside this repository may write them so.
    call = tooluse.ToolCall("c1", "get_weather", '{"city": "Oslo"}')
    assert call == tooluse.ToolCall(id="c1", name="get_weather", arguments='{"city": "Oslo"}')
    response = tooluse.ToolResponse("c1", "get_weather", "sunny")
    assert (response.id, response.name, response.data) == ("c1", "get_weather", "sunny")
    assert tooluse.ToolResponseMessage([response]).responses == (response,)
    assert tooluse.UserMessage("hi").text == "hi" and tooluse.SystemMessage("be brief").text
    assert tooluse.AssistantMessage(None, (call,)).tool_calls == (call,)
    usage = tooluse.Usage(10, 5, 15, 2, 1)
    assert (usage.total_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (15, 2, 1)
    generation = tooluse.Generation(tooluse.AssistantMessage("done"), {"finish_reason": "stop"})
    assert generation.finish_reason == "stop"
    reply = tooluse.ChatResponse([generation], usage, {"id": "r1"})
    assert (reply.text, reply.usage, reply.metadata) == ("done", usage, {"id": "r1"})
    assert tooluse.ToolDefinition("f", "does f", {"type": "object"}).name == "f"
    assert tooluse.ToolMetadata(True).return_direct is True
    with pytest.raises(TypeError, match=r"at most 3 positional arguments \(id, name, arguments\)"):
        tooluse.ToolCall("c1", "f", "{}", "extra")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'id' both by position and by keyword"):
        tooluse.ToolCall("c1", id="c2", name="f")  # type: ignore[misc]
