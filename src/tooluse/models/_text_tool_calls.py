"""Tool calls a server left in the answer's text: recovered when the whole text is calls.

Small local models (Qwen2.5-Coder through llama.cpp, for one) write a call as JSON, often in
a fenced ```` ```json ```` block, where the server's parser expected other markers; the
server then returns it as text. :func:`text_tool_calls` finds the calls in such a text, and
:func:`recovered_stream` does it for a stream, holding back text that may turn out to be
calls until it is clear either way. Used by ``OpenAIChatModel(text_tool_calls=True)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

from tooluse.messages import AssistantMessage, ChatResponse, Generation, ToolCall

__all__ = ["recovered_stream", "text_tool_calls"]

_FENCE_OPENING = re.compile(r"```[ \t]*(?:json)?[ \t]*\n?", re.IGNORECASE)
_FENCE = "```"
_DECODER = json.JSONDecoder()


def text_tool_calls(text: str, offered: Collection[str]) -> list[tuple[str, str]] | None:
    """``(name, arguments JSON)`` of each call when ``text`` is nothing but tool calls: one or
    more JSON values, each bare or in a fenced block, each an object ``{"name": ...,
    "arguments": {...}}`` (or a list of them) naming one of the ``offered`` tools. ``None``
    when anything else is there: the text is the answer."""
    calls: list[tuple[str, str]] = []
    position = _skip_space(text, 0)
    if position == len(text):
        return None
    while position < len(text):
        fenced = _FENCE_OPENING.match(text, position)
        start = fenced.end() if fenced else position
        try:
            value, end = _DECODER.raw_decode(text, _skip_space(text, start))
        except ValueError:
            return None
        if fenced:
            end = _skip_space(text, end)
            if not text.startswith(_FENCE, end):
                return None
            end += len(_FENCE)
        found = _calls(value, offered)
        if found is None:
            return None
        calls += found
        position = _skip_space(text, end)
    return calls or None


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def _calls(value: Any, offered: Collection[str]) -> list[tuple[str, str]] | None:
    values = value if isinstance(value, list) else [value]
    calls = []
    for item in values:
        if not isinstance(item, dict) or set(item) - {"name", "arguments"}:
            return None
        name, arguments = item.get("name"), item.get("arguments", {})
        if not isinstance(name, str) or name not in offered:
            return None
        if isinstance(arguments, str):  # arguments as JSON text, as the API sends them
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return None
        if not isinstance(arguments, dict):
            return None
        calls.append((name, json.dumps(arguments, ensure_ascii=False)))
    return calls


def _could_become_calls(text: str) -> bool:
    """Whether ``text``, the start of an answer, may still turn out to be tool calls."""
    opening = text.lstrip()
    return (
        not opening
        or opening.startswith(("{", "["))
        or opening.startswith(_FENCE)
        or _FENCE.startswith(opening)
    )


async def recovered_stream(
    chunks: AsyncIterator[ChatResponse],
    offered: Collection[str],
    make_call: Callable[[str, str], ToolCall],
) -> AsyncIterator[ChatResponse]:
    """``chunks`` with the calls of a text that is nothing but tool calls as one chunk of
    whole calls (``make_call(name, arguments)``). Chunks are held back, unchanged, while the
    text so far may still become calls; once it cannot, or the server sent calls itself,
    they go on as they came. A choice other than the first is never held for."""
    held: list[ChatResponse] = []
    text = ""
    holding = True
    async for chunk in chunks:
        if not holding:
            yield chunk
            continue
        held.append(chunk)
        first = chunk.generations[0].message if chunk.generations else None
        if first is not None:
            text += first.text or ""
        if (
            any(g.message.tool_calls for g in chunk.generations)
            or len(chunk.generations) > 1
            or not _could_become_calls(text)
        ):
            holding = False
            for earlier in held:
                yield earlier
            held = []
    if not holding:
        return
    calls = text_tool_calls(text, offered)
    if calls is None:
        for earlier in held:
            yield earlier
        return
    usage = next((c.usage for c in reversed(held) if c.usage is not None), None)
    metadata: dict[str, Any] = {}
    for chunk in held:
        metadata.update(chunk.metadata)
    message = AssistantMessage(tool_calls=tuple(make_call(name, args) for name, args in calls))
    generation = Generation(message=message, metadata={"finish_reason": "tool_calls"})
    yield ChatResponse(generations=(generation,), usage=usage, metadata=metadata)
