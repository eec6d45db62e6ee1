"""Builders for provider wire payloads (OpenAI Chat Completions, Anthropic Messages) and a
minimal tool stub, for the model adapter tests that run against :mod:`provider_server`."""

from __future__ import annotations

import dataclasses
from typing import Any

from tooluse.tools import ToolContext, ToolDefinition, ToolMetadata

NO_PARAMETERS: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {},
    "required": [],
    "additionalProperties": False,
}


@dataclasses.dataclass(frozen=True)
class StubTool:
    """A ``ToolCallback`` whose only job here is to carry a definition into a request."""

    definition: ToolDefinition
    metadata: ToolMetadata = dataclasses.field(default_factory=ToolMetadata)

    def call(self, arguments: str, context: ToolContext | None = None) -> str:
        return arguments

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str:
        return arguments


def stub_tool(name: str, schema: dict[str, Any] | None = None, description: str = "") -> StubTool:
    return StubTool(
        ToolDefinition(name, description or f"The {name} tool", schema or NO_PARAMETERS)
    )


# -- OpenAI ----------------------------------------------------------------------------------


def openai_completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def openai_call(call_id: str, name: str, arguments: str | dict[str, Any]) -> dict[str, Any]:
    """A complete tool call (``arguments`` as an object: what llama.cpp and TGI may send)."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def openai_chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    index: int = 0,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A stream chunk; ``delta=None`` with ``usage`` gives the usage-only final chunk."""
    choices = (
        [] if delta is None else [{"index": index, "delta": delta, "finish_reason": finish_reason}]
    )
    chunk: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-test",
        "choices": choices,
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def openai_call_delta(index: int | None, **fields: Any) -> dict[str, Any]:
    """A chunk delta carrying one tool-call fragment (``index=None``: a delta without one)."""
    fragment = fields if index is None else {"index": index, **fields}
    return {"tool_calls": [fragment]}


def openai_usage(prompt: int, completion: int, **details: int) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if details:
        usage["prompt_tokens_details"] = details
    return usage


# -- Anthropic -------------------------------------------------------------------------------


def anthropic_message(
    *blocks: dict[str, Any],
    stop_reason: str = "end_turn",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(blocks),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": 5},
    }


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use_block(block_id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": block_id, "name": name, "input": input}


# Stream events (``content_block_*`` carry the block's ``index``).


def anthropic_message_start(usage: dict[str, Any]) -> dict[str, Any]:
    message = anthropic_message(usage=usage)
    message["content"], message["stop_reason"] = [], None
    return {"type": "message_start", "message": message}


def anthropic_block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def anthropic_text_delta(index: int, text: str) -> dict[str, Any]:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "text_delta", "text": text},
    }


def anthropic_json_delta(index: int, partial_json: str) -> dict[str, Any]:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": partial_json},
    }


def anthropic_block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def anthropic_message_delta(stop_reason: str, output_tokens: int) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }
