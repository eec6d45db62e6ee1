"""Aggregating a stream of ``ChatResponse`` chunks into one response.

The loop needs the whole response of a streamed round to decide on tool calls; users need the
text as it arrives. :class:`StreamAggregator` does the first without holding up the second.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tooluse.messages import (
    AssistantMessage,
    ChatResponse,
    Generation,
    ProviderContent,
    Reasoning,
    ToolCall,
    Usage,
)

__all__ = ["StreamAggregator", "merge_chunks"]


class _CallBuffer:
    __slots__ = ("arguments", "call_id", "names")

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self.names: list[str] = []  # name fragments, in arrival order
        self.arguments: list[str] = []  # argument fragments

    def is_complete(self) -> bool:
        """Named, with arguments that are a whole JSON value: nothing can continue it."""
        if not self.names or not self.arguments:
            return False
        try:
            json.loads("".join(self.arguments))
        except ValueError:
            return False
        return True


class _GenerationBuffer:
    __slots__ = (
        "by_id",
        "calls",
        "metadata",
        "provider_content",
        "reasoning",
        "text",
    )

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[Reasoning] = []
        self.provider_content: ProviderContent | None = None
        self.calls: list[_CallBuffer] = []  # in arrival order
        self.by_id: dict[str, _CallBuffer] = {}  # call id -> the latest call of that id
        self.metadata: dict[str, Any] = {}


class StreamAggregator:
    """Feed chunks with :meth:`add`; :meth:`response` gives the merged response.

    Text is concatenated per generation index, and so is reasoning: an open part (no signature,
    redaction or OpenAI item id) continues the open part before it, a part with only a
    signature, or only an item id and encrypted reasoning, closes it (a signed, redacted or
    identified part stays closed). Tool-call fragments are merged by id (an empty
    id continues the previous call), which tolerates names and arguments split anywhere and
    calls whose arguments never arrive (they become ``"{}"``); a call that is complete (named,
    its arguments whole JSON) is closed, and a named fragment with its id begins another call
    of that id, as ``call()`` gets two calls sharing an id. Provider content blocks
    (:class:`~tooluse.messages.ProviderContent`) are joined in arrival order; chunks of one
    generation giving content of two providers are an error. Metadata is merged with later
    chunks winning; the last non-empty usage wins (providers report the total once).
    """

    def __init__(self) -> None:
        self._generations: list[_GenerationBuffer] = []
        self._usage: Usage | None = None
        self._metadata: dict[str, Any] = {}

    def add(self, chunk: ChatResponse) -> None:
        if chunk.usage is not None and not chunk.usage.is_empty():
            self._usage = chunk.usage
        self._metadata.update(chunk.metadata)
        for index, generation in enumerate(chunk.generations):
            while len(self._generations) <= index:
                self._generations.append(_GenerationBuffer())
            buffer = self._generations[index]
            message = generation.message
            if message.text:
                buffer.text.append(message.text)
            buffer.metadata.update(generation.metadata)
            for fragment in message.tool_calls:
                self._add_fragment(buffer, fragment)
            for part in message.reasoning:
                _add_reasoning(buffer.reasoning, part)
            if message.provider_content is not None:
                buffer.provider_content = _joined_content(
                    buffer.provider_content, message.provider_content
                )

    @staticmethod
    def _add_fragment(buffer: _GenerationBuffer, fragment: ToolCall) -> None:
        if fragment.id:
            call = buffer.by_id.get(fragment.id)
            # A complete call is closed: a named fragment with its id is another call (the
            # loop gives it an id of its own, as for calls that share an id in one response).
            if call is None or (fragment.name and call.is_complete()):
                call = _CallBuffer(fragment.id)
                buffer.calls.append(call)
                buffer.by_id[fragment.id] = call
        elif buffer.calls:
            call = buffer.calls[-1]  # an empty id continues the previous call
        else:
            # Nothing to continue: a call of its own, so it is answered (with an error)
            # rather than dropped.
            call = _CallBuffer("call_0")
            buffer.calls.append(call)
            buffer.by_id[call.call_id] = call
        if fragment.name:
            call.names.append(fragment.name)
        if fragment.arguments:
            call.arguments.append(fragment.arguments)

    def response(self) -> ChatResponse:
        generations = []
        for buffer in self._generations:
            calls = tuple(
                ToolCall(
                    id=call.call_id,
                    name="".join(call.names),
                    arguments="".join(call.arguments).strip() or "{}",
                )
                for call in buffer.calls
            )
            text = "".join(buffer.text)
            generations.append(
                Generation(
                    message=AssistantMessage(
                        text=text or None,
                        tool_calls=calls,
                        reasoning=tuple(buffer.reasoning),
                        provider_content=buffer.provider_content,
                    ),
                    metadata=buffer.metadata,
                )
            )
        return ChatResponse(
            generations=tuple(generations), usage=self._usage, metadata=self._metadata
        )


def _add_reasoning(parts: list[Reasoning], part: Reasoning) -> None:
    last = parts[-1] if parts else None
    if last is not None and not _sealed(last) and part.redacted is None:
        if not _sealed(part):
            parts[-1] = last.model_copy(update={"text": last.text + part.text})
            return
        if not part.text:  # a signature, or an OpenAI item's id (and encrypted reasoning)
            seal = part.model_dump(include=_SEALS, exclude_none=True)
            parts[-1] = last.model_copy(update=seal)
            return
    parts.append(part)


_SEALS = {"signature", "id", "encrypted_content"}


def _sealed(part: Reasoning) -> bool:
    """Whether the part is closed: text that later chunks no longer continue."""
    return any(
        value is not None
        for value in (part.signature, part.redacted, part.id, part.encrypted_content)
    )


def _joined_content(earlier: ProviderContent | None, later: ProviderContent) -> ProviderContent:
    if earlier is None:
        return later
    if earlier.provider != later.provider:
        raise ValueError(
            f"a stream gave one generation provider content of two providers "
            f"({earlier.provider!r}, then {later.provider!r}); one turn comes from one provider"
        )
    return ProviderContent(provider=earlier.provider, blocks=(*earlier.blocks, *later.blocks))


def merge_chunks(chunks: Iterable[ChatResponse]) -> ChatResponse:
    """Merge a whole stream of chunks into one response."""
    aggregator = StreamAggregator()
    for chunk in chunks:
        aggregator.add(chunk)
    return aggregator.response()
