from tooluse import AssistantMessage, ChatResponse, Generation, ToolCall, Usage
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
