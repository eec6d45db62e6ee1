"""Streamed text cut at UTF-16 code units, anywhere (a gateway's fixed-size chunks): whatever
the cuts, the caller gets the text whole, and a paused Anthropic turn goes back whole."""

from __future__ import annotations

import itertools
from typing import Any

from anthropic.types import RawMessageStreamEvent
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk
from pydantic import TypeAdapter

from provider_payloads import (
    anthropic_block_start,
    anthropic_block_stop,
    anthropic_message_delta,
    anthropic_message_start,
    anthropic_text_delta,
    openai_chunk,
    text_block,
)
from tooluse.messages import ChatResponse, Reasoning
from tooluse.models import _anthropic, _openai
from tooluse.models._calls import IncomingCalls
from tooluse.models._names import ToolNameAliases
from tooluse.models._utf16 import StreamedText, joined_surrogates
from tooluse.streaming import merge_chunks

# Any text: characters outside the BMP (two UTF-16 units) and lone surrogates too.
TEXT = st.text(st.characters(exclude_categories=[]), max_size=12)
ASTRAL = st.text(st.sampled_from("a\U0001f600\U00020000\ud83d\ude00é"), max_size=8)
ANY_TEXT = st.one_of(TEXT, ASTRAL)
CUTS = st.lists(st.integers(0, 30), max_size=6)

EVENT: TypeAdapter[RawMessageStreamEvent] = TypeAdapter(RawMessageStreamEvent)


def utf16_deltas(text: str, cuts: list[int]) -> list[str]:
    """``text`` cut at the given UTF-16 code unit offsets (halves of a pair fall apart)."""
    units = text.encode("utf-16-le", "surrogatepass")
    count = len(units) // 2
    offsets = sorted({0, count, *(cut for cut in cuts if cut < count)})
    return [
        units[2 * start : 2 * end].decode("utf-16-le", "surrogatepass")
        for start, end in itertools.pairwise(offsets)
    ]


def no_calls() -> IncomingCalls:
    return IncomingCalls(ToolNameAliases.for_request([], []), {})


@settings(max_examples=200)
@given(ANY_TEXT, CUTS)
def test_streamed_text_gives_the_text_whole_whatever_the_cuts(text: str, cuts: list[int]) -> None:
    streamed = StreamedText()
    shown = [streamed.add(delta) for delta in utf16_deltas(text, cuts)]
    shown.append(streamed.end())
    # Two lone halves that meet in the text are the character in UTF-16 too.
    assert "".join(shown) == joined_surrogates(text)
    assert not splits_a_pair([piece for piece in shown if piece])


def splits_a_pair(pieces: list[str]) -> bool:
    """Whether a piece ends in a high half that the next piece's low half completes."""
    return any(
        "\ud800" <= before[-1] <= "\udbff" and "\udc00" <= after[0] <= "\udfff"
        for before, after in itertools.pairwise(pieces)
    )


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(ANY_TEXT, ANY_TEXT, CUTS), min_size=1, max_size=3),
    st.randoms(use_true_random=False),
    st.sampled_from(["own chunk", "with the last delta", "none"]),
)
def test_openai_choices_get_their_text_and_reasoning_whole(
    choices: list[tuple[str, str, list[int]]], random: Any, finish: str
) -> None:
    """n > 1: the choices' deltas interleave; each choice's text and reasoning arrive whole,
    whether the choice finishes in a chunk of its own, with its last delta, or never."""
    queues: list[list[dict[str, Any]]] = []
    for index, (content, reasoning, cuts) in enumerate(choices):
        deltas = [{"reasoning_content": d} for d in utf16_deltas(reasoning, cuts)]
        deltas += [{"content": d} for d in utf16_deltas(content, cuts)]
        chunks = [openai_chunk(delta, index=index) for delta in deltas]
        if finish == "own chunk" or (finish == "with the last delta" and not chunks):
            chunks.append(openai_chunk({}, index=index, finish_reason="stop"))
        elif finish == "with the last delta":
            chunks[-1]["choices"][0]["finish_reason"] = "stop"
        queues.append(chunks)
    raw: list[dict[str, Any]] = []
    while any(queues):  # interleaved, each choice's chunks in their order
        raw.append(random.choice([q for q in queues if q]).pop(0))

    state = _openai._StreamState(_openai._Request({}, no_calls()))
    chunks = [c for c in (state.add(ChatCompletionChunk.model_validate(r)) for r in raw) if c]
    final = state.finish()
    chunks += [final] if final else []
    merged = merge_chunks(chunks)

    for index, (content, reasoning, _cuts) in enumerate(choices):
        # A choice that sent nothing, not even a finish reason, has no generation.
        got = merged.generations[index].message if index < len(merged.generations) else None
        assert ((got.text if got else None) or "") == joined_surrogates(content)
        assert (got.reasoning_text() if got else "") == joined_surrogates(reasoning)
        shown = [c.generations[index].message for c in chunks if index < len(c.generations)]
        assert not splits_a_pair([m.text for m in shown if m.text])
        assert not splits_a_pair([p.text for m in shown for p in m.reasoning if p.text])


THINKING_OR_TEXT = st.lists(st.tuples(st.booleans(), ANY_TEXT, CUTS), min_size=1, max_size=3)


@settings(max_examples=100, deadline=None)
@given(THINKING_OR_TEXT)
def test_anthropic_blocks_reach_the_caller_and_a_pause_whole(
    blocks: list[tuple[bool, str, list[int]]],
) -> None:
    """Text and signed thinking blocks cut anywhere: the caller's merged message, and the
    blocks a paused turn is sent back as, hold each block's text whole."""
    usage = {"input_tokens": 1, "output_tokens": 1}
    events: list[dict[str, Any]] = [anthropic_message_start(usage)]
    for index, (thinking, text, cuts) in enumerate(blocks):
        if thinking:
            start = {"type": "thinking", "thinking": "", "signature": ""}
            events.append(anthropic_block_start(index, start))
            events.extend(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": delta},
                }
                for delta in utf16_deltas(text, cuts)
            )
            signature = {"type": "signature_delta", "signature": f"sig-{index}"}
            events.append({"type": "content_block_delta", "index": index, "delta": signature})
        else:
            events.append(anthropic_block_start(index, text_block("")))
            events.extend(anthropic_text_delta(index, d) for d in utf16_deltas(text, cuts))
        events.append(anthropic_block_stop(index))
    events.append(anthropic_message_delta("pause_turn", 1))

    state = _anthropic._StreamState(no_calls())
    content = _anthropic._StreamedContent()
    chunks: list[ChatResponse] = []
    shown: dict[int, list[str]] = {}  # by block, the text pieces the caller was given
    for raw in events:
        event = EVENT.validate_python(raw)
        content.add(event)
        chunk = state.add(event)
        if chunk is not None:
            chunks.append(chunk)
            message = chunk.generations[0].message
            pieces = [message.text or "", *(part.text for part in message.reasoning)]
            shown.setdefault(raw.get("index", -1), []).extend(p for p in pieces if p)
    assert not any(splits_a_pair(pieces) for pieces in shown.values())
    message = merge_chunks(chunks).generations[0].message

    texts = [joined_surrogates(text) for thinking, text, _ in blocks if not thinking]
    assert (message.text or "") == "".join(texts)
    assert message.reasoning == tuple(
        Reasoning(text=joined_surrogates(text), signature=f"sig-{index}")
        for index, (thinking, text, _) in enumerate(blocks)
        if thinking
    )
    assert content.blocks() == [
        {"type": "thinking", "thinking": joined_surrogates(text), "signature": f"sig-{index}"}
        if thinking
        else text_block(joined_surrogates(text))
        for index, (thinking, text, _) in enumerate(blocks)
    ]
