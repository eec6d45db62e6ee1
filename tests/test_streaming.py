import pytest

from tooluse import AssistantMessage, ChatResponse, Generation, ProviderContent, ToolCall, Usage
from tooluse.streaming import merge_chunks


def chunk(text: str | None = None, *calls: ToolCall, usage: Usage | None = None) -> ChatResponse:
    return ChatResponse(
        generations=(Generation(message=AssistantMessage(text=text, tool_calls=calls)),),
        usage=usage,
    )


def test_text_and_fragmented_tool_calls_are_merged() -> None:
    merged = merge_chunks(
        [
            chunk("Let me "),
            chunk("check."),
            chunk(None, ToolCall(id="a", name="get_", arguments="")),
            chunk(None, ToolCall(id="", name="weather", arguments='{"ci')),
            chunk(None, ToolCall(id="", name="", arguments='ty": "Paris"}')),
            chunk(None, ToolCall(id="b", name="time", arguments="")),
            chunk(None, ToolCall(id="a", name="", arguments="")),
            chunk(None, usage=Usage(prompt_tokens=3, completion_tokens=4, total_tokens=7)),
        ]
    )
    message = merged.generations[0].message
    assert message.text == "Let me check."
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [
        ("a", "get_weather", '{"city": "Paris"}'),
        ("b", "time", "{}"),
    ]
    assert merged.usage == Usage(prompt_tokens=3, completion_tokens=4, total_tokens=7)


def test_empty_stream_gives_empty_response() -> None:
    merged = merge_chunks([])
    assert merged.generations == ()
    assert not merged.has_tool_calls()


def content_chunk(provider: str, *types: str) -> ChatResponse:
    content = ProviderContent(provider=provider, blocks=[{"type": kind} for kind in types])
    return ChatResponse(
        generations=(Generation(message=AssistantMessage(provider_content=content)),)
    )


def test_provider_content_of_chunks_is_joined_in_order() -> None:
    merged = merge_chunks(
        [content_chunk("anthropic", "a", "b"), chunk("x"), content_chunk("anthropic", "c")]
    )
    message = merged.generations[0].message
    assert message.provider_content == ProviderContent(
        provider="anthropic", blocks=[{"type": "a"}, {"type": "b"}, {"type": "c"}]
    )
    assert message.text == "x"


def test_provider_content_of_two_providers_in_one_generation_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"two providers \('anthropic', then 'other'\)"):
        merge_chunks([content_chunk("anthropic", "a"), content_chunk("other", "b")])


def test_a_complete_call_is_closed_and_a_named_fragment_with_its_id_is_another_call() -> None:
    merged = merge_chunks(
        [
            chunk(None, ToolCall(id="x", name="echo", arguments='{"text": "a"}')),
            chunk(None, ToolCall(id="x", name="echo", arguments='{"text": "b"}')),
            chunk(None, ToolCall(id="y", name="echo", arguments='{"te')),
            chunk(None, ToolCall(id="y", name="", arguments='xt": "c"}')),  # the id repeated
            chunk(None, ToolCall(id="y", name="", arguments=" ")),
        ]
    )
    assert [(c.id, c.name, c.arguments) for c in merged.generations[0].message.tool_calls] == [
        ("x", "echo", '{"text": "a"}'),
        ("x", "echo", '{"text": "b"}'),
        ("y", "echo", '{"text": "c"}'),
    ]
