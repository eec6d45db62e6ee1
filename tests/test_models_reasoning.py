"""Reasoning kept and sent back, over each wire format, through the whole loop.

DeepSeek's thinking mode answers 400 when a tool-call turn comes back without its
``reasoning_content``; Claude's extended thinking when a tool-use turn comes back without its
signed thinking blocks (first in the turn); OpenAI's Responses API, used statelessly, carries a
reasoning model's thinking into the next round only through the reasoning items (with their
encrypted content) sent back before the calls they led to. These tests run the loop against
local servers in those formats and read what the later requests carried.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import openai
import pytest

from provider_models import all_providers
from provider_payloads import (
    anthropic_block_start,
    anthropic_block_stop,
    anthropic_json_delta,
    anthropic_message,
    anthropic_message_delta,
    anthropic_message_start,
    anthropic_text_delta,
    openai_call,
    openai_call_delta,
    openai_chunk,
    openai_completion,
    responses_body,
    responses_call,
    responses_events,
    responses_message,
    responses_reasoning,
    text_block,
    tool_use_block,
)
from provider_server import (
    ProviderServer,
    Reply,
    anthropic_sse,
    openai_responses_sse,
    openai_sse,
    shared_server,
)
from tooluse import (
    AssistantMessage,
    ChatResponse,
    Generation,
    Reasoning,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.client import ChatClient
from tooluse.messages import message_from_json, message_to_json
from tooluse.models import OpenAIChatModel
from tooluse.streaming import merge_chunks
from tooluse.tools import tool


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}"


@pytest.fixture
def server() -> ProviderServer:
    return shared_server()


@pytest.fixture
async def models(server: ProviderServer) -> AsyncIterator[dict[str, Callable[..., Any]]]:
    async with all_providers(server.url) as models:
        yield models


def thinking_completion(field: str = "reasoning_content") -> dict[str, Any]:
    body = openai_completion(
        None,
        [openai_call("call_1", "get_weather", '{"city": "Paris"}')],
        finish_reason="tool_calls",
    )
    body["choices"][0]["message"][field] = "The user wants Paris; call the tool."
    return body


# -- OpenAI-compatible (DeepSeek, Qwen, vLLM, Ollama) --------------------------------------------


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_of_a_tool_call_turn_goes_back_with_it(
    server: ProviderServer, models: dict[str, Callable[..., Any]], field: str
) -> None:
    server.expect(
        Reply.json(thinking_completion(field)),
        Reply.json(openai_completion("Sunny in Paris.")),
    )
    client = ChatClient(models["openai"](), tools=[get_weather])
    response = await client.prompt("Weather in Paris?").acall()

    assert response.content() == "Sunny in Paris."
    assistant = server.requests[1].body["messages"][1]
    assert assistant["tool_calls"][0]["id"] == "call_1"
    assert assistant["reasoning_content"] == "The user wants Paris; call the tool."


async def test_reasoning_of_a_turn_without_tool_calls_is_not_sent(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(Reply.json(openai_completion("Fine.")))
    history = [
        UserMessage(text="Hi"),
        AssistantMessage(text="Hello!", reasoning=(Reasoning(text="Greet back."),)),
        UserMessage(text="How are you?"),
    ]
    await ChatClient(models["openai"]()).prompt().messages(history).acall()
    assert "reasoning_content" not in server.requests[0].body["messages"][1]


async def test_every_assistant_turn_of_a_question_that_used_tools_goes_back_with_its_reasoning(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    """DeepSeek's rule: between two user messages, if the model called a tool, the reasoning
    of every assistant message there (the answer after the tool results too) goes back in all
    later requests; a question answered without tools needs none."""
    server.expect(Reply.json(openai_completion("Rainy too.")))
    history = [
        UserMessage(text="Weather in Paris?"),
        AssistantMessage(text="Let me look.", reasoning=(Reasoning(text="Say so first."),)),
        AssistantMessage(
            tool_calls=(ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}'),),
            reasoning=(Reasoning(text="Call the tool."),),
        ),
        ToolResponseMessage(
            responses=(ToolResponse(id="call_1", name="get_weather", data="Rain"),)
        ),
        AssistantMessage(text="Rain in Paris.", reasoning=(Reasoning(text="Report it."),)),
        UserMessage(text="Thanks!"),
        AssistantMessage(text="You're welcome.", reasoning=(Reasoning(text="Be polite."),)),
        UserMessage(text="And in Rome?"),
    ]
    await ChatClient(models["openai"](), tools=[get_weather]).prompt().messages(history).acall()

    sent = server.requests[0].body["messages"]
    assert [m.get("reasoning_content") for m in sent if m["role"] == "assistant"] == [
        "Say so first.",
        "Call the tool.",
        "Report it.",
        None,
    ]


async def test_no_reasoning_goes_to_openais_own_api_which_rejects_unknown_message_fields() -> None:
    # A history with reasoning (from DeepSeek, before a switch of models) sent to OpenAI.
    sent: list[dict[str, Any]] = []

    def openai_api(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=openai_completion("Fine."))

    http = httpx.AsyncClient(transport=httpx.MockTransport(openai_api))
    async with openai.AsyncOpenAI(
        base_url="https://api.openai.com/v1", api_key="k", http_client=http
    ) as client:
        model = OpenAIChatModel("gpt-4o", client=client)
        history = [
            UserMessage(text="Weather in Paris?"),
            AssistantMessage(
                tool_calls=(ToolCall(id="call_1", name="get_weather", arguments="{}"),),
                reasoning=(Reasoning(text="Call the tool."),),
            ),
            ToolResponseMessage(
                responses=(ToolResponse(id="call_1", name="get_weather", data="Rain"),)
            ),
            UserMessage(text="Thanks!"),
        ]
        await ChatClient(model, tools=[get_weather]).prompt().messages(history).acall()
    assert "reasoning_content" not in sent[0]["messages"][1]
    assert sent[0]["messages"][1]["tool_calls"][0]["id"] == "call_1"


@pytest.mark.parametrize(
    ("base_url", "send_reasoning", "expected"),
    [
        ("https://api.openai.com/v1", None, False),
        ("https://my-resource.openai.azure.com/openai", None, False),
        ("https://api.deepseek.com", None, True),
        ("http://localhost:8000/v1", None, True),
        ("https://api.openai.com/v1", True, True),
        ("https://api.deepseek.com", False, False),
    ],
)
def test_reasoning_goes_back_unless_the_endpoint_is_openais_own(
    base_url: str, send_reasoning: bool | None, expected: bool
) -> None:
    model = OpenAIChatModel("m", base_url=base_url, api_key="k", send_reasoning=send_reasoning)
    model.close()
    assert model.send_reasoning is expected


async def test_streamed_reasoning_is_joined_sent_back_and_shown_to_the_caller(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(
        openai_sse(
            [
                openai_chunk({"role": "assistant", "content": None, "reasoning_content": "Paris "}),
                openai_chunk({"reasoning_content": "weather, "}),
                openai_chunk({"reasoning_content": "use the tool."}),
                openai_chunk(
                    openai_call_delta(
                        0,
                        id="call_1",
                        type="function",
                        function={"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    )
                ),
                openai_chunk({}, finish_reason="tool_calls"),
            ]
        ),
        openai_sse(
            [openai_chunk({"content": "Sunny in Paris."}), openai_chunk({}, finish_reason="stop")]
        ),
    )
    client = ChatClient(models["openai"](), tools=[get_weather])
    chunks = [chunk async for chunk in client.prompt("Weather in Paris?").stream()]

    assistant = server.requests[1].body["messages"][1]
    assert assistant["reasoning_content"] == "Paris weather, use the tool."
    shown = "".join(
        part.text for c in chunks for g in c.generations for part in g.message.reasoning
    )
    assert shown == "Paris weather, use the tool."
    assert "".join(c.text or "" for c in chunks) == "Sunny in Paris."


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_empty_reasoning_of_a_tool_call_turn_goes_back_empty(
    server: ProviderServer, models: dict[str, Callable[..., Any]], streamed: bool
) -> None:
    """DeepSeek's thinking mode may answer a tool call with ``"reasoning_content": ""``; its
    check wants the field back all the same (400 "Missing `reasoning_content` field in the
    assistant message")."""
    call = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    if streamed:
        first = openai_sse(
            [
                openai_chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
                openai_chunk(openai_call_delta(0, id="call_1", type="function", function=call)),
                openai_chunk({}, finish_reason="tool_calls"),
            ]
        )
        answer = [
            openai_chunk({"content": "Sunny in Paris."}),
            openai_chunk({}, finish_reason="stop"),
        ]
        server.expect(first, openai_sse(answer))
    else:
        body = thinking_completion()
        body["choices"][0]["message"]["reasoning_content"] = ""
        server.expect(Reply.json(body), Reply.json(openai_completion("Sunny in Paris.")))
    client = ChatClient(models["openai"](), tools=[get_weather])
    request = client.prompt("Weather in Paris?")
    if streamed:
        assert "".join([text async for text in request.stream().content()]) == "Sunny in Paris."
    else:
        assert (await request.acall()).content() == "Sunny in Paris."

    assistant = server.requests[1].body["messages"][1]
    assert assistant["tool_calls"][0]["id"] == "call_1"
    assert assistant["reasoning_content"] == ""


# -- OpenAI Responses -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["call", "acall", "stream"])
async def test_reasoning_items_go_back_before_the_calls_they_led_to_in_every_later_round(
    server: ProviderServer, models: dict[str, Callable[..., Any]], mode: str
) -> None:
    rounds = [
        responses_body(
            responses_reasoning("rs_1", "Paris first.", "Then Rome.", encrypted="gAAAA-1"),
            responses_call("call_1", "get_weather", '{"city": "Paris"}'),
            responses_call("call_2", "get_weather", '{"city": "Rome"}'),
        ),
        responses_body(
            responses_reasoning("rs_2", encrypted="gAAAA-2"),  # no summary asked for
            responses_call("call_3", "get_weather", '{"city": "Oslo"}'),
        ),
        responses_body(responses_message("Sunny everywhere.")),
    ]
    if mode == "stream":
        server.expect(*(openai_responses_sse(responses_events(body)) for body in rounds))
    else:
        server.expect(*(Reply.json(body) for body in rounds))
    prompt = ChatClient(models["openai-responses"](), tools=[get_weather]).prompt("Weather?")
    if mode == "stream":
        answer = "".join([piece async for piece in prompt.stream().content()])
    elif mode == "call":
        answer = (await asyncio.to_thread(prompt.call)).content()
    else:
        answer = (await prompt.acall()).content()

    assert answer == "Sunny everywhere."
    first_reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [
            {"type": "summary_text", "text": "Paris first."},
            {"type": "summary_text", "text": "Then Rome."},
        ],
        "encrypted_content": "gAAAA-1",
    }
    second_reasoning = {
        "type": "reasoning",
        "id": "rs_2",
        "summary": [],
        "encrypted_content": "gAAAA-2",
    }
    first, second, third = (request.body for request in server.requests)
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    assert second["input"][1] == first_reasoning
    assert [item["type"] for item in second["input"]] == [
        "message",
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert third["input"][1] == first_reasoning  # the whole conversation, every round
    assert third["input"][6] == second_reasoning
    assert third["input"][7]["call_id"] == "call_3"


def test_openai_reasoning_parts_stay_apart_in_a_merged_stream() -> None:
    def chunk(*parts: Reasoning) -> ChatResponse:
        return ChatResponse(generations=(Generation(message=AssistantMessage(reasoning=parts)),))

    merged = merge_chunks(
        [
            chunk(Reasoning(text="a")),
            chunk(Reasoning(text="b")),
            chunk(Reasoning(id="rs_1")),  # the item's next summary part begins
            chunk(Reasoning(text="c")),
            chunk(Reasoning(id="rs_1", encrypted_content="e1")),  # the item is done
            chunk(Reasoning(id="rs_2", encrypted_content="e2")),  # an item without summary
        ]
    )
    assert merged.generations[0].message.reasoning == (
        Reasoning(text="ab", id="rs_1"),
        Reasoning(text="c", id="rs_1", encrypted_content="e1"),
        Reasoning(id="rs_2", encrypted_content="e2"),
    )


# -- Anthropic extended thinking ------------------------------------------------------------------


async def test_signed_and_redacted_thinking_lead_the_tool_use_turn_sent_back(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(
        Reply.json(
            anthropic_message(
                {"type": "thinking", "thinking": "Need the weather.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "opaque-2"},
                text_block("Checking."),
                tool_use_block("toolu_1", "get_weather", {"city": "Paris"}),
                stop_reason="tool_use",
            )
        ),
        Reply.json(anthropic_message(text_block("Sunny in Paris."))),
    )
    client = ChatClient(models["anthropic"](), tools=[get_weather])
    response = await client.prompt("Weather in Paris?").acall()

    assert response.content() == "Sunny in Paris."
    turn = server.requests[1].body["messages"][1]
    assert turn["role"] == "assistant"
    assert turn["content"] == [
        {"type": "thinking", "thinking": "Need the weather.", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque-2"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
    ]


async def test_streamed_thinking_is_joined_and_signed_before_it_goes_back(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    def thinking(delta: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": 0, "delta": delta}

    server.expect(
        anthropic_sse(
            [
                anthropic_message_start({"input_tokens": 10, "output_tokens": 1}),
                anthropic_block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
                thinking({"type": "thinking_delta", "thinking": "Need "}),
                thinking({"type": "thinking_delta", "thinking": "the weather."}),
                thinking({"type": "signature_delta", "signature": "sig-1"}),
                anthropic_block_stop(0),
                anthropic_block_start(1, tool_use_block("toolu_1", "get_weather", {})),
                anthropic_json_delta(1, '{"city": "Paris"}'),
                anthropic_block_stop(1),
                anthropic_message_delta("tool_use", 9),
                {"type": "message_stop"},
            ]
        ),
        anthropic_sse(
            [
                anthropic_message_start({"input_tokens": 20, "output_tokens": 1}),
                anthropic_block_start(0, text_block("")),
                anthropic_text_delta(0, "Sunny in Paris."),
                anthropic_block_stop(0),
                anthropic_message_delta("end_turn", 4),
                {"type": "message_stop"},
            ]
        ),
    )
    client = ChatClient(models["anthropic"](), tools=[get_weather])
    text = [piece async for piece in client.prompt("Weather in Paris?").stream().content()]

    assert "".join(text) == "Sunny in Paris."
    turn = server.requests[1].body["messages"][1]
    assert turn["content"][0] == {
        "type": "thinking",
        "thinking": "Need the weather.",
        "signature": "sig-1",
    }
    assert turn["content"][1]["type"] == "tool_use"


async def test_unsigned_reasoning_from_another_provider_is_not_sent_to_anthropic(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(Reply.json(anthropic_message(text_block("Fine."))))
    history = [
        UserMessage(text="Hi"),
        AssistantMessage(text="Hello!", reasoning=(Reasoning(text="from DeepSeek"),)),
        UserMessage(text="How are you?"),
    ]
    await ChatClient(models["anthropic"]()).prompt().messages(history).acall()
    assert server.requests[0].body["messages"][1] == {"role": "assistant", "content": "Hello!"}


# -- the value and its merging ------------------------------------------------------------------


def test_reasoning_survives_the_json_round_trip_of_stored_conversations() -> None:
    message = AssistantMessage(
        tool_calls=(ToolCall(id="c", name="t"),),
        reasoning=(Reasoning(text="think", signature="s"), Reasoning(redacted="opaque")),
    )
    assert message_from_json(message_to_json(message)) == message
    assert message.reasoning_text() == "think"


def test_stream_merging_joins_open_parts_and_a_signature_closes_one() -> None:
    def chunk(*parts: Reasoning) -> ChatResponse:
        return ChatResponse(generations=(Generation(message=AssistantMessage(reasoning=parts)),))

    merged = merge_chunks(
        [
            chunk(Reasoning(text="a")),
            chunk(Reasoning(text="b")),
            chunk(Reasoning(signature="s1")),
            chunk(Reasoning(text="c")),  # a signed part is closed: a new one starts
            chunk(Reasoning(redacted="r")),
            chunk(Reasoning(text="d")),
        ]
    )
    assert merged.generations[0].message.reasoning == (
        Reasoning(text="ab", signature="s1"),
        Reasoning(text="c"),
        Reasoning(redacted="r"),
        Reasoning(text="d"),
    )
