import json

import pytest
from pydantic import ValidationError

from tooluse import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    Generation,
    Prompt,
    ProviderContent,
    SystemMessage,
    ToolCall,
    ToolContext,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from tooluse.messages import message_to_json, messages_from_json, messages_to_json


def test_conversation_round_trips_through_json() -> None:
    conversation = [
        SystemMessage(text="be brief"),
        UserMessage(text="weather in 北京?", metadata={"lang": "zh"}),
        AssistantMessage(
            tool_calls=(ToolCall(id="c1", name="weather", arguments='{"city":"北京"}'),)
        ),
        ToolResponseMessage(
            responses=(ToolResponse(id="c1", name="weather", data="sunny", is_error=False),)
        ),
        AssistantMessage(text="Sunny."),
    ]
    restored = messages_from_json(messages_to_json(conversation))
    assert restored == conversation
    assert isinstance(restored[2], AssistantMessage)
    assert restored[2].tool_calls[0].arguments == '{"city":"北京"}'


def test_messages_are_immutable_and_keyword_built() -> None:
    message = UserMessage(text="hi")
    with pytest.raises(ValidationError):
        message.text = "changed"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        UserMessage(txt="typo")  # type: ignore[call-arg]


def test_provider_content_names_its_provider_and_holds_json_blocks() -> None:
    content = ProviderContent("anthropic", [{"type": "server_tool_use", "input": {}}])
    assert content.blocks == ({"type": "server_tool_use", "input": {}},)
    with pytest.raises(ValidationError, match="provider"):
        ProviderContent(provider="", blocks=[])
    with pytest.raises(ValidationError, match="blocks"):
        ProviderContent(provider="anthropic", blocks=["text"])  # type: ignore[list-item]


def test_chat_response_reports_tool_calls_from_any_generation() -> None:
    plain = Generation(message=AssistantMessage(text="a"))
    calling = Generation(
        message=AssistantMessage(tool_calls=(ToolCall(id="1", name="t"),)),
        metadata={"finish_reason": "tool_calls"},
    )
    assert not ChatResponse(generations=(plain,)).has_tool_calls()
    assert ChatResponse(generations=(plain, calling)).has_tool_calls()
    assert calling.finish_reason == "tool_calls"
    assert ChatResponse().text == ""
    assert ChatResponse(generations=(plain,)).text == "a"


def test_usage_sums_and_keeps_unreported_cache_counts_none() -> None:
    total = Usage(
        prompt_tokens=10, completion_tokens=20, total_tokens=30, cache_read_tokens=100
    ) + (Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3, cache_write_tokens=5))
    assert (total.prompt_tokens, total.completion_tokens, total.total_tokens) == (11, 22, 33)
    assert (total.cache_read_tokens, total.cache_write_tokens) == (100, 5)
    assert (Usage() + Usage()).cache_read_tokens is None


def test_prompt_and_options_are_immutable_values() -> None:
    options = ChatOptions(temperature=0.2, tool_context={"user": "u1"})
    prompt = Prompt([UserMessage(text="q")], options)
    assert isinstance(prompt.messages, tuple)
    assert prompt.replace(options=options.replace(temperature=0.5)).options.temperature == 0.5
    assert prompt.options.temperature == 0.2
    assert Prompt([]).options == ChatOptions()


def test_tool_context_is_a_read_only_copy() -> None:
    source = {"k": "v"}
    context = ToolContext(source)
    source["k"] = "changed"
    assert context["k"] == "v"
    assert dict(context) == {"k": "v"}
    with pytest.raises(TypeError):
        context["k"] = "x"  # type: ignore[index]
    assert context.merged({"k": "w", "n": 1}) == {"k": "w", "n": 1}


def test_lone_surrogates_from_a_model_survive_storage() -> None:
    call = ToolCall(id="1", name="t", arguments='{"a": "\ud800"}')
    conversation = [AssistantMessage(tool_calls=(call,)), UserMessage(text="x\udfff")]
    assert messages_from_json(messages_to_json(conversation)) == conversation


def test_marks_stored_by_older_releases_in_metadata_load_into_their_fields() -> None:
    """Releases before the typed fields kept these facts in ``metadata`` under string keys;
    the conversations and paused runs they stored hold them so."""
    stored = [
        {
            "role": "user",
            "text": "documents... Q",
            "metadata": {"rag_original_text": "Q", "paused_turn": "t1", "k": 1},
        },
        {
            "role": "assistant",
            "text": "waits",
            "metadata": {"paused_turn": "t1", "held_for_approval": ["c2"]},
        },
        {
            "role": "tool",
            "responses": [{"id": "c1", "name": "t", "data": "ok"}],
            "metadata": {"held_for_approval": ["c2"], "tooluse.executed_return_direct": False},
        },
    ]
    question, account, results = messages_from_json(json.dumps(stored))
    assert question == UserMessage(
        text="documents... Q", original_text="Q", paused_turn="t1", metadata={"k": 1}
    )
    assert account == AssistantMessage(text="waits", paused_turn="t1", held_for_approval=["c2"])
    assert results == ToolResponseMessage(
        responses=[ToolResponse(id="c1", name="t", data="ok")],
        held_for_approval=["c2"],
        executed_return_direct=False,
    )
    assert messages_from_json(messages_to_json([question, account, results])) == [
        question,
        account,
        results,
    ]


def test_a_message_without_marks_has_the_json_it_always_had() -> None:
    assert message_to_json(UserMessage(text="hi")) == '{"role":"user","text":"hi","metadata":{}}'
    assert json.loads(message_to_json(UserMessage(text="hi", paused_turn="t1"))) == {
        "role": "user",
        "text": "hi",
        "paused_turn": "t1",
        "metadata": {},
    }
