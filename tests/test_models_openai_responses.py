"""OpenAIResponsesChatModel against a local server speaking the Responses wire format, through
the real ``openai`` SDK (request encoding, SSE decoding, retries are the SDK's)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
import pytest

from provider_models import ask, collect, model_maker
from provider_payloads import (
    responses_body,
    responses_call,
    responses_events,
    responses_message,
    responses_reasoning,
    responses_usage,
    stub_tool,
)
from provider_server import ProviderServer, Reply, openai_responses_sse, shared_server
from tooluse import (
    AssistantMessage,
    ChatOptions,
    Prompt,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from tooluse.models import (
    OpenAIResponsesChatModel,
    ProviderError,
    ProviderResponseError,
    provider_safe_name,
)
from tooluse.streaming import merge_chunks

WEATHER_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
    },
    "required": ["city"],
    "additionalProperties": False,
}
WEATHER = stub_tool("get_weather", WEATHER_SCHEMA, "Current weather in a city")
FACTORIAL = provider_safe_name("math.factorial")


@pytest.fixture
def server() -> ProviderServer:
    return shared_server()


@pytest.fixture
async def make_model(
    server: ProviderServer,
) -> AsyncIterator[Callable[..., OpenAIResponsesChatModel]]:
    async with model_maker(
        OpenAIResponsesChatModel,
        "gpt-test",
        base_url=f"{server.url}/v1",
        api_key="sk-test",
        max_retries=0,
    ) as make:
        yield make


# -- request encoding --------------------------------------------------------------------------


async def test_request_carries_instructions_input_items_tools_and_parameters(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    server.expect(Reply.json(responses_body(responses_message("ok"))))
    model = make_model(extra_headers={"X-Team": "qa"})
    history = [
        SystemMessage(text="Be brief."),
        SystemMessage(text="Use metric units."),
        UserMessage(text="Weather in Paris?"),
        AssistantMessage(
            text="Checking.",
            tool_calls=(ToolCall(id="call_1", name="get_weather", arguments=""),),
            reasoning=(
                Reasoning(text="The user wants Paris.", id="rs_1"),
                Reasoning(text="Call the tool.", id="rs_1", encrypted_content="gAAAA-1"),
            ),
        ),
        ToolResponseMessage(
            responses=(ToolResponse(id="call_1", name="get_weather", data='{"temp": 21}'),)
        ),
        SystemMessage(text="Answer in French."),
    ]
    options = ChatOptions(
        tool_callbacks=(WEATHER,),
        tool_choice="get_weather",
        parallel_tool_calls=False,
        temperature=0.2,
        top_p=0.9,
        max_tokens=64,
        extra={"reasoning": {"effort": "low"}, "include": ["message.output_text.logprobs"]},
    )

    await model.acall(Prompt(history, options))

    (request,) = server.requests
    assert request.path == "/v1/responses"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["x-team"] == "qa"
    assert request.body == {
        "model": "gpt-test",
        "instructions": "Be brief.\n\nUse metric units.",
        "input": [
            {"type": "message", "role": "user", "content": "Weather in Paris?"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [
                    {"type": "summary_text", "text": "The user wants Paris."},
                    {"type": "summary_text", "text": "Call the tool."},
                ],
                "encrypted_content": "gAAAA-1",
            },
            {"type": "message", "role": "assistant", "content": "Checking."},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": '{"temp": 21}'},
            {"type": "message", "role": "developer", "content": "Answer in French."},
        ],
        "store": False,
        "include": ["reasoning.encrypted_content", "message.output_text.logprobs"],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather in a city",
                "parameters": {k: v for k, v in WEATHER_SCHEMA.items() if k != "$schema"},
                "strict": False,  # the API takes a missing "strict" for true
            }
        ],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": False,
        "temperature": 0.2,
        "top_p": 0.9,
        "max_output_tokens": 64,
        "reasoning": {"effort": "low"},
    }


async def test_requests_that_cannot_be_sent_as_asked_are_refused_before_sending(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    model = make_model()
    with pytest.raises(ValueError, match="the Responses API has no stop sequences"):
        await model.acall(ask(stop=("END",)))
    with pytest.raises(ValueError, match="tool_choice='get_weather' needs tools"):
        await model.acall(ask(tool_choice="get_weather"))
    with pytest.raises(ValueError, match=r"extra=\{'store': ...\}: pass store= to"):
        await model.acall(ask(extra={"store": True}))
    assert server.requests == []


async def test_reasoning_goes_back_only_as_openai_takes_it(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    server.expect(
        Reply.json(responses_body(responses_message("ok"))),
        Reply.json(responses_body(responses_message("ok"))),
    )
    history = [
        UserMessage(text="Hi"),
        # Claude's signed thinking (a model switch): not OpenAI's to read.
        AssistantMessage(text="Hello.", reasoning=(Reasoning(text="hm", signature="sig"),)),
        UserMessage(text="Again"),
        # An item without encrypted content: without store, OpenAI cannot look it up.
        AssistantMessage(text="Hello again.", reasoning=(Reasoning(id="rs_stored"),)),
        UserMessage(text="And?"),
        # Reasoning that led to nothing (cut off): an item without its following item.
        AssistantMessage(reasoning=(Reasoning(id="rs_cut", encrypted_content="gAAAA-cut"),)),
        UserMessage(text="Go on"),
    ]
    await make_model().acall(Prompt(history))
    await make_model(store=True).acall(Prompt(history))

    stateless, stored = (request.body for request in server.requests)
    assert [item.get("type") for item in stateless["input"]] == ["message"] * 6
    assert stored["store"] is True
    assert {"type": "reasoning", "id": "rs_stored", "summary": []} in stored["input"]
    assert all(item.get("id") != "rs_cut" for item in stored["input"])


async def test_strict_tools_send_strict_schemas_and_drop_the_nulls_they_force(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    server.expect(
        Reply.json(
            responses_body(responses_call("call_1", "get_weather", '{"city":"Oslo","unit":null}'))
        )
    )
    response = await make_model(strict_tools=True).acall(ask(tool_callbacks=(WEATHER,)))
    (tool,) = server.requests[0].body["tools"]
    assert tool["strict"] is True
    assert tool["parameters"]["required"] == ["city", "unit"]
    assert response.generations[0].message.tool_calls == (
        ToolCall("call_1", "get_weather", '{"city": "Oslo"}'),
    )


# -- response mapping ---------------------------------------------------------------------------


async def test_response_text_calls_reasoning_usage_and_finish_reason(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    server.expect(
        Reply.json(
            responses_body(
                responses_reasoning("rs_1", "Two cities.", "Call twice.", encrypted="gAAAA-1"),
                responses_message("Checking both."),
                responses_call("call_p", "get_weather", '{"city": "Paris"}'),
                responses_call("call_f", FACTORIAL, '{"n": 5}'),
                usage=responses_usage(100, 40, cached=64, reasoning=30),
            )
        )
    )
    math_tool = stub_tool("math.factorial")
    response = await make_model().acall(ask(tool_callbacks=(WEATHER, math_tool)))

    assert server.requests[0].body["tools"][1]["name"] == FACTORIAL
    generation = response.generations[0]
    assert generation.message == AssistantMessage(
        text="Checking both.",
        tool_calls=(
            ToolCall("call_p", "get_weather", '{"city": "Paris"}'),
            ToolCall("call_f", "math.factorial", '{"n": 5}'),  # the call_id, the real name
        ),
        reasoning=(
            Reasoning(text="Two cities.", id="rs_1"),
            Reasoning(text="Call twice.", id="rs_1", encrypted_content="gAAAA-1"),
        ),
    )
    assert generation.finish_reason == "completed"
    assert response.usage == Usage(
        prompt_tokens=100, completion_tokens=40, total_tokens=140, cache_read_tokens=64
    )
    assert response.metadata == {
        "id": "resp_1",
        "model": "gpt-test",
        "provider": "openai",
        "reasoning_tokens": 30,
    }


async def test_an_incomplete_response_says_why(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    body = responses_body(
        responses_reasoning("rs_1"),
        status="incomplete",
        incomplete_reason="max_output_tokens",
        usage=responses_usage(10, 64, reasoning=64),
    )
    server.expect(Reply.json(body))
    response = await make_model().acall(ask(max_tokens=64))
    assert response.generations[0].finish_reason == "max_output_tokens"
    assert response.generations[0].message.reasoning == (
        Reasoning(id="rs_1", encrypted_content="gAAAA-encrypted"),
    )


def test_call_needs_no_event_loop(server: ProviderServer) -> None:
    model = OpenAIResponsesChatModel("gpt-test", base_url=f"{server.url}/v1", api_key="k")
    server.expect(Reply.json(responses_body(responses_message("sync ok"))))
    try:
        assert model.call(ask()).text == "sync ok"
    finally:
        model.close()
    assert server.requests[0].path == "/v1/responses"


# -- streaming -----------------------------------------------------------------------------------


async def test_a_stream_gives_text_as_it_comes_and_each_call_whole_when_its_item_is_done(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    body = responses_body(
        responses_reasoning("rs_1", "First this.", "Then that.", encrypted="gAAAA-1"),
        responses_message("Checking."),
        responses_call("call_p", "get_weather", '{"city": "Paris"}'),
        responses_call("call_f", FACTORIAL, '{"n": 5}'),
        usage=responses_usage(100, 40, cached=64, reasoning=30),
    )
    options = {"tool_callbacks": (WEATHER, stub_tool("math.factorial"))}
    server.expect(openai_responses_sse(responses_events(body, pieces=3)), Reply.json(body))
    model = make_model()
    chunks = await collect(model, ask(**options))
    plain = await model.acall(ask(**options))

    texts = [chunk.text for chunk in chunks if chunk.text]
    assert texts == ["Che", "cki", "ng."]
    calls = [
        c.generations[0].message.tool_calls for c in chunks if c.generations[0].message.tool_calls
    ]
    assert calls == [  # whole, once complete: never an argument fragment
        (ToolCall("call_p", "get_weather", '{"city": "Paris"}'),),
        (ToolCall("call_f", "math.factorial", '{"n": 5}'),),
    ]
    summaries = [part.text for chunk in chunks for part in chunk.generations[0].message.reasoning]
    assert "".join(summaries) == "First this.Then that."
    assert chunks[-1].usage == plain.usage
    assert chunks[-1].generations[0].finish_reason == "completed"
    merged = merge_chunks(chunks)
    assert merged.generations[0].message == plain.generations[0].message
    assert merged.metadata == plain.metadata


async def test_a_done_call_without_its_arguments_gets_those_of_its_deltas(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    call = responses_call("call_1", "get_weather", '{"city": "Paris"}')
    events = responses_events(responses_body(call))
    for event in events:
        if event["type"] == "response.output_item.done":  # a gateway that sends it bare
            event["item"] = {**call, "arguments": ""}
    server.expect(openai_responses_sse(events))
    merged = merge_chunks(await collect(make_model(), ask()))
    assert merged.generations[0].message.tool_calls == (
        ToolCall("call_1", "get_weather", '{"city": "Paris"}'),
    )


async def test_a_reasoning_summary_sent_only_with_its_done_item_is_kept(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    item = responses_reasoning("rs_1", "All at once.")
    server.expect(
        openai_responses_sse(
            [
                {"type": "response.output_item.done", "output_index": 0, "item": item},
                {"type": "response.completed", "response": responses_body(item)},
            ]
        )
    )
    merged = merge_chunks(await collect(make_model(), ask()))
    assert merged.generations[0].message.reasoning == (
        Reasoning(text="All at once.", id="rs_1", encrypted_content="gAAAA-encrypted"),
    )


async def test_an_emoji_split_between_two_deltas_reaches_the_caller_whole(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    at = {"output_index": 0, "item_id": "msg_1", "content_index": 0, "logprobs": []}
    server.expect(
        openai_responses_sse(
            [
                {"type": "response.output_text.delta", **at, "delta": "ok \ud83d"},
                {"type": "response.output_text.delta", **at, "delta": "\ude00!"},
                {"type": "response.output_text.done", **at, "text": "ok \U0001f600!"},
                {
                    "type": "response.completed",
                    "response": responses_body(responses_message("ok \U0001f600!")),
                },
            ]
        )
    )
    chunks = await collect(make_model(), ask())
    assert [chunk.text for chunk in chunks if chunk.text] == ["ok ", "\U0001f600!"]


# -- errors ---------------------------------------------------------------------------------------


async def test_429_is_retried_after_the_retry_after_delay(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    limited = {"error": {"message": "Rate limit reached", "type": "requests"}}
    server.expect(
        Reply.json(limited, status=429, headers={"retry-after": "0.3"}),
        Reply.json(responses_body(responses_message("done"))),
    )
    response = await make_model(max_retries=2).acall(ask())
    assert response.text == "done"
    first, second = server.requests
    assert second.received_at - first.received_at >= 0.3
    assert second.headers["x-stainless-retry-count"] == "1"


# What OpenAI answers a model that does not reason (gpt-4o, gpt-4.1, gpt-5-chat-latest) asked
# for encrypted reasoning (reported in pydantic/pydantic-ai#2865, #3326, miquido/draive#399).
NO_ENCRYPTED_CONTENT = {
    "error": {
        "message": "Encrypted content is not supported with this model.",
        "type": "invalid_request_error",
        "param": "include",
        "code": None,
    }
}


@pytest.mark.parametrize("streamed", [False, True], ids=["call", "stream"])
async def test_a_model_refusing_encrypted_reasoning_is_asked_again_without_it_and_from_then_on(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel], streamed: bool
) -> None:
    def answer(text: str) -> Reply:
        if streamed:
            return openai_responses_sse(responses_events(responses_body(responses_message(text))))
        return Reply.json(responses_body(responses_message(text)))

    server.expect(Reply.json(NO_ENCRYPTED_CONTENT, status=400), answer("one"), answer("two"))
    model = make_model()
    prompt = ask(extra={"include": ["message.output_text.logprobs"]})
    texts = []
    for _ in range(2):
        if streamed:
            texts.append(merge_chunks(await collect(model, prompt)).text)
        else:
            texts.append((await model.acall(prompt)).text)

    assert texts == ["one", "two"]
    refused, *asked = (request.body["include"] for request in server.requests)
    assert refused == ["reasoning.encrypted_content", "message.output_text.logprobs"]
    assert asked == [["message.output_text.logprobs"]] * 2


async def test_a_blocking_call_refused_encrypted_reasoning_is_asked_again_without_it(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    server.expect(
        Reply.json(NO_ENCRYPTED_CONTENT, status=400),
        Reply.json(responses_body(responses_message("ok"))),
    )
    response = await asyncio.to_thread(make_model().call, ask())

    assert response.text == "ok"
    assert "include" not in server.requests[1].body


async def test_another_refusal_of_include_is_a_provider_error_without_a_second_request(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    refused = {
        "error": {
            "message": "Invalid value: 'x'.",
            "type": "invalid_request_error",
            "param": "include",
        }
    }
    server.expect(Reply.json(refused, status=400))
    with pytest.raises(ProviderError, match=r"HTTP 400: Invalid value: 'x'\."):
        await make_model().acall(ask())
    assert len(server.requests) == 1


async def test_a_500_is_a_provider_error_with_the_providers_message(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    server.expect(Reply.json({"error": {"message": "boom", "type": "server_error"}}, status=500))
    with pytest.raises(ProviderError) as raised:
        await collect(make_model(), ask())
    assert str(raised.value) == "openai: HTTP 500: boom"
    assert raised.value.status_code == 500 and raised.value.retryable
    assert isinstance(raised.value.__cause__, openai.InternalServerError)


async def test_a_failure_event_mid_stream_is_a_provider_response_error_after_the_text_so_far(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    at = {"output_index": 0, "item_id": "msg_1", "content_index": 0, "logprobs": []}
    error = {"code": "server_error", "message": "The model failed to generate a response."}
    server.expect(
        openai_responses_sse(
            [
                {"type": "response.created", "response": responses_body(status="in_progress")},
                {"type": "response.output_text.delta", **at, "delta": "Par"},
                {
                    "type": "response.failed",
                    "response": responses_body(status="failed", error=error),
                },
            ]
        )
    )
    received: list[str] = []
    with pytest.raises(ProviderResponseError) as raised:
        async for chunk in make_model().stream(ask()):
            received.append(chunk.text)
    assert received == ["Par"]
    assert str(raised.value) == (
        "openai: response failed: server_error: The model failed to generate a response."
    )
    assert raised.value.code == "server_error" and raised.value.retryable
    assert raised.value.status_code is None


@pytest.mark.parametrize(
    "event",
    [
        # The form OpenAI documents for the ``error`` event ...
        {"type": "error", "code": "invalid_prompt", "message": "Bad prompt.", "param": None},
        # ... and the one with an ``error`` object, which the SDK raises itself.
        {"type": "error", "error": {"code": "invalid_prompt", "message": "Bad prompt."}},
    ],
)
async def test_an_error_event_is_a_provider_response_error(
    server: ProviderServer,
    make_model: Callable[..., OpenAIResponsesChatModel],
    event: dict[str, Any],
) -> None:
    server.expect(openai_responses_sse([event]))
    with pytest.raises(
        ProviderResponseError, match=r"openai: error: invalid_prompt: Bad prompt\."
    ) as raised:
        await collect(make_model(), ask())
    assert raised.value.code == "invalid_prompt" and not raised.value.retryable


async def test_a_failed_response_is_a_provider_response_error(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    error = {"code": "rate_limit_exceeded", "message": "Slow down."}
    server.expect(Reply.json(responses_body(status="failed", error=error)))
    with pytest.raises(ProviderResponseError, match=r"rate_limit_exceeded: Slow down\.") as raised:
        await make_model().acall(ask())
    assert raised.value.retryable


async def test_a_stream_that_ends_without_completing_is_a_provider_error(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    events = responses_events(responses_body(responses_message("Hello")))[:-1]
    server.expect(openai_responses_sse(events))
    received: list[str] = []
    with pytest.raises(ProviderError, match="stream ended after 6 events without"):
        async for chunk in make_model().stream(ask()):
            received.append(chunk.text)
    assert "".join(received) == "Hello"


async def test_a_connection_dropped_mid_stream_is_a_provider_error(
    server: ProviderServer, make_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    events = responses_events(responses_body(responses_message("Hello")))
    server.expect(openai_responses_sse(events, drop_after=3))
    with pytest.raises(ProviderError, match="connection lost after 3 stream chunks") as raised:
        await collect(make_model(), ask())
    assert raised.value.status_code is None and raised.value.retryable
