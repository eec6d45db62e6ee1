"""Builders for provider wire payloads (OpenAI Chat Completions and Responses, Anthropic
Messages) and a minimal tool stub, for the model adapter tests that run against
:mod:`provider_server`."""

from __future__ import annotations

import dataclasses
import json
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


# -- OpenAI Responses ------------------------------------------------------------------------


def responses_body(
    *output: dict[str, Any],
    status: str = "completed",
    usage: dict[str, Any] | None = None,
    incomplete_reason: str | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``Response`` object: the JSON body of a plain request, the ``response`` of the
    stream's ``response.created`` / ``.completed`` / ``.incomplete`` / ``.failed`` events."""
    body: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "model": "gpt-test",
        "status": status,
        "output": list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
    }
    if usage is not None:
        body["usage"] = usage
    return body


def responses_message(text: str, item_id: str = "msg_1") -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def responses_call(
    call_id: str, name: str, arguments: str, namespace: str | None = None
) -> dict[str, Any]:
    """A ``function_call`` item; its item id (``fc_...``) is not the ``call_id``. A call of a
    tool that a ``tool_search_output`` loaded names the tool's ``namespace`` too."""
    item = {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def responses_tool_search(call_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A client-executed ``tool_search_call`` item."""
    return {
        "type": "tool_search_call",
        "id": f"tsc_{call_id}",
        "call_id": call_id,
        "execution": "client",
        "arguments": arguments,
        "status": "completed",
    }


def responses_reasoning(
    item_id: str, *summary: str, encrypted: str | None = "gAAAA-encrypted"
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": text} for text in summary],
    }
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def responses_usage(
    input_tokens: int, output_tokens: int, *, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def responses_events(body: dict[str, Any], *, pieces: int = 2) -> list[dict[str, Any]]:
    """The stream OpenAI sends for ``body``: ``response.created``, each output item added,
    its text, arguments or summary parts in ``pieces`` deltas each, the item done, then
    ``response.completed`` (``.incomplete`` for an incomplete body)."""
    created = {**body, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": created}]
    for index, item in enumerate(body["output"]):
        events.append(
            {"type": "response.output_item.added", "output_index": index, "item": _begun(item)}
        )
        events.extend(_item_deltas(index, item, pieces))
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    done = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    events.append({"type": done, "response": body})
    return events


def _begun(item: dict[str, Any]) -> dict[str, Any]:
    """The item as ``response.output_item.added`` shows it: nothing generated yet."""
    if item["type"] == "function_call":
        return {**item, "arguments": "", "status": "in_progress"}
    if item["type"] == "message":
        return {**item, "content": [], "status": "in_progress"}
    if item["type"] == "tool_search_call":
        return {**item, "status": "in_progress"}
    return {key: value for key, value in item.items() if key != "encrypted_content"} | {
        "summary": []
    }


def _item_deltas(index: int, item: dict[str, Any], pieces: int) -> list[dict[str, Any]]:
    if item["type"] == "tool_search_call":
        return []  # its arguments come whole in the done item
    at = {"output_index": index, "item_id": item["id"]}
    if item["type"] == "function_call":
        return [
            *(
                {"type": "response.function_call_arguments.delta", **at, "delta": piece}
                for piece in _split(item["arguments"], pieces)
            ),
            {"type": "response.function_call_arguments.done", **at, "arguments": item["arguments"]},
        ]
    if item["type"] == "message":
        events = []
        for content_index, part in enumerate(item["content"]):
            where = {**at, "content_index": content_index}
            events.extend(
                {"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []}
                for piece in _split(part["text"], pieces)
            )
            events.append(
                {"type": "response.output_text.done", **where, "text": part["text"], "logprobs": []}
            )
        return events
    return [
        {
            "type": "response.reasoning_summary_text.delta",
            **at,
            "summary_index": summary_index,
            "delta": piece,
        }
        for summary_index, summary in enumerate(item["summary"])
        for piece in _split(summary["text"], pieces)
    ]


def _split(text: str, pieces: int) -> list[str]:
    size = max(1, -(-len(text) // pieces))
    return [text[start : start + size] for start in range(0, len(text), size)]


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


# A web search, as the server tool's blocks come: the call, its results, a text citing them.
SEARCH_CALL: dict[str, Any] = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {"query": "Paris weather"},
}
SEARCH_RESULT: dict[str, Any] = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://example.com/paris",
            "title": "Paris weather",
            "encrypted_content": "enc-1",
            "page_age": None,
        }
    ],
}
CITATION: dict[str, Any] = {
    "type": "web_search_result_location",
    "url": "https://example.com/paris",
    "title": "Paris weather",
    "encrypted_index": "idx-1",
    "cited_text": "Sunny all day",
}
CITED_TEXT: dict[str, Any] = {"type": "text", "text": "It is sunny.", "citations": [CITATION]}

# A web fetch: the fetched page comes back as a document, and text cites it by character range;
# the response's citation has a ``file_id`` (null: no Files API document), as the API sends it.
FETCH_CALL: dict[str, Any] = {
    "type": "server_tool_use",
    "id": "srvtoolu_2",
    "name": "web_fetch",
    "input": {"url": "https://example.com/paris"},
}
FETCH_RESULT: dict[str, Any] = {
    "type": "web_fetch_tool_result",
    "tool_use_id": "srvtoolu_2",
    "content": {
        "type": "web_fetch_result",
        "url": "https://example.com/paris",
        "content": {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "Sunny all day."},
            "title": "Paris weather",
            "citations": {"enabled": True},
        },
        "retrieved_at": "2025-08-25T10:30:00Z",
    },
}
DOCUMENT_CITATION: dict[str, Any] = {
    "type": "char_location",
    "cited_text": "Sunny all day.",
    "document_index": 0,
    "document_title": "Paris weather",
    "start_char_index": 0,
    "end_char_index": 14,
    "file_id": None,
}
FETCH_CITED_TEXT: dict[str, Any] = {
    "type": "text",
    "text": "It is sunny.",
    "citations": [DOCUMENT_CITATION],
}


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


def anthropic_streamed(
    *blocks: dict[str, Any], stop_reason: str = "end_turn"
) -> list[dict[str, Any]]:
    """The events of a message of ``blocks`` streamed the way the API streams them: text as a
    ``text_delta`` then a ``citations_delta`` per citation, thinking as a ``thinking_delta``
    closed by its ``signature_delta``, a tool call's input (client or server tool) as an
    ``input_json_delta``; any other block whole in its ``content_block_start``."""
    events = [anthropic_message_start({"input_tokens": 10, "output_tokens": 1})]
    for index, block in enumerate(blocks):
        kind = block["type"]
        if kind == "text":
            events.append(anthropic_block_start(index, text_block("")))
            events.append(anthropic_text_delta(index, block["text"]))
            events.extend(
                _delta(index, {"type": "citations_delta", "citation": citation})
                for citation in block.get("citations") or ()
            )
        elif kind == "thinking":
            events.append(anthropic_block_start(index, {**block, "thinking": "", "signature": ""}))
            events.append(_delta(index, {"type": "thinking_delta", "thinking": block["thinking"]}))
            events.append(
                _delta(index, {"type": "signature_delta", "signature": block["signature"]})
            )
        elif kind in ("tool_use", "server_tool_use"):
            events.append(anthropic_block_start(index, {**block, "input": {}}))
            events.append(anthropic_json_delta(index, json.dumps(block["input"])))
        else:
            events.append(anthropic_block_start(index, block))
        events.append(anthropic_block_stop(index))
    events += [anthropic_message_delta(stop_reason, 5), {"type": "message_stop"}]
    return events


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}
