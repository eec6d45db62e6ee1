"""Splitting a response into stream chunks the way providers send them."""

from __future__ import annotations

from collections.abc import Iterator

from tooluse.messages import AssistantMessage, ChatResponse, Generation, ToolCall

__all__ = ["stream_chunks"]

_EMPTY_GENERATION = Generation(message=AssistantMessage())


def _pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def _fragments(message: AssistantMessage, size: int) -> list[AssistantMessage]:
    """The message as a provider would stream it: text in pieces, then each tool call as a
    first fragment (id and name) followed by argument pieces with an empty id, which the
    fragment rule of ``ChatModel`` reads as "continues the previous call"."""
    fragments = [AssistantMessage(text=piece) for piece in _pieces(message.text or "", size)]
    for call in message.tool_calls:
        argument_pieces = _pieces(call.arguments, size) or [""]
        fragments.append(
            AssistantMessage(
                tool_calls=(ToolCall(id=call.id, name=call.name, arguments=argument_pieces[0]),)
            )
        )
        fragments.extend(
            AssistantMessage(tool_calls=(ToolCall(id="", name="", arguments=piece),))
            for piece in argument_pieces[1:]
        )
    return fragments or [AssistantMessage()]


def stream_chunks(response: ChatResponse, size: int) -> Iterator[ChatResponse]:
    """Chunks that :class:`tooluse.streaming.StreamAggregator` merges back into ``response``.

    Text and arguments are cut every ``size`` characters. Generation ``i`` is streamed after
    generation ``i - 1`` (earlier positions carry empty placeholders); each generation's
    metadata (its finish reason) rides on its last chunk, and the response's usage and
    metadata on the very last chunk, as providers report them.
    """
    if not response.generations:
        yield response
        return
    last_index = len(response.generations) - 1
    for index, generation in enumerate(response.generations):
        placeholders = (_EMPTY_GENERATION,) * index
        fragments = _fragments(generation.message, size)
        for position, fragment in enumerate(fragments):
            closing = position == len(fragments) - 1
            final = closing and index == last_index
            yield ChatResponse(
                generations=(
                    *placeholders,
                    Generation(message=fragment, metadata=generation.metadata if closing else {}),
                ),
                usage=response.usage if final else None,
                metadata=response.metadata if final else {},
            )
