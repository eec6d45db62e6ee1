"""AnthropicChatModel against a local server speaking the Messages wire format, through the
real ``anthropic`` SDK."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import pytest

from provider_models import ask, collect, model_maker
from provider_payloads import (
    CITATION,
    CITED_TEXT,
    DOCUMENT_CITATION,
    FETCH_CALL,
    FETCH_CITED_TEXT,
    FETCH_RESULT,
    SEARCH_CALL,
    SEARCH_RESULT,
    anthropic_block_start,
    anthropic_block_stop,
    anthropic_json_delta,
    anthropic_message,
    anthropic_message_delta,
    anthropic_message_start,
    anthropic_text_delta,
    stub_tool,
    text_block,
    tool_use_block,
)
from provider_server import ProviderServer, Reply, anthropic_sse, shared_server
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
from tooluse._sync import run_sync
from tooluse.messages import ImagePart
from tooluse.models import (
    AnthropicChatModel,
    ProviderError,
    ProviderResponseError,
    ProviderTimeoutError,
    provider_safe_name,
)
from tooluse.streaming import merge_chunks

WEATHER_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
WEATHER = stub_tool("get_weather", WEATHER_SCHEMA, "Current weather in a city")


@pytest.fixture
def server() -> ProviderServer:
    return shared_server()


@pytest.fixture
async def make_model(server: ProviderServer) -> AsyncIterator[Callable[..., AnthropicChatModel]]:
    async with model_maker(
        AnthropicChatModel, "claude-test", base_url=server.url, api_key="sk-ant-test", max_retries=0
    ) as make:
        yield make


async def test_request_maps_system_tools_tool_use_and_merged_tool_results(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    server.expect(Reply.json(anthropic_message(text_block("ok"))))
    history = [
        SystemMessage(text="Be brief."),
        SystemMessage(text="Use metric units."),
        UserMessage(text="Weather in Paris and Rome?"),
        AssistantMessage(
            text="Checking.",
            tool_calls=(
                ToolCall(id="toolu_1", name="get_weather", arguments='{"city": "Paris"}'),
                ToolCall(id="toolu_2", name="get_weather", arguments=""),
            ),
        ),
        ToolResponseMessage(
            responses=(ToolResponse(id="toolu_1", name="get_weather", data="21C"),)
        ),
        ToolResponseMessage(
            responses=(
                ToolResponse(
                    id="toolu_2", name="get_weather", data="city is required", is_error=True
                ),
            )
        ),
        UserMessage(text="Also Oslo."),
    ]
    options = ChatOptions(
        tool_callbacks=(WEATHER,),
        tool_choice="required",
        parallel_tool_calls=False,
        temperature=0.3,
        stop=("END",),
        extra={"metadata": {"user_id": "u1"}},
    )
    await make_model(extra_headers={"anthropic-beta": "test-beta"}).acall(Prompt(history, options))

    (request,) = server.requests
    assert request.path == "/v1/messages"
    # The header is the SDK's choice: x-api-key in older releases, a bearer token in newer ones.
    sent_keys = {request.headers.get("x-api-key"), request.headers.get("authorization")}
    assert sent_keys & {"sk-ant-test", "Bearer sk-ant-test"}
    assert request.headers["anthropic-beta"] == "test-beta"
    assert "anthropic-version" in request.headers
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 4096,
        "system": "Be brief.\n\nUse metric units.",
        "messages": [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "21C"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "city is required",
                        "is_error": True,
                    },
                    {"type": "text", "text": "Also Oslo."},
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather in a city",
                "input_schema": {k: v for k, v in WEATHER_SCHEMA.items() if k != "$schema"},
            }
        ],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "stop_sequences": ["END"],
        "temperature": 0.3,
        "metadata": {"user_id": "u1"},
    }


async def test_a_result_s_images_are_image_blocks_after_its_text(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    server.expect(Reply.json(anthropic_message(text_block("ok"))))
    images = (ImagePart("image/png", "iVBORw=="), ImagePart("image/jpeg", "/9j/"))
    history = [
        UserMessage(text="Compare the pages."),
        AssistantMessage(tool_calls=(ToolCall(id="toolu_1", name="get_weather"),)),
        ToolResponseMessage((ToolResponse("toolu_1", "get_weather", '["a", "b"]', images=images),)),
        UserMessage(text="Which is newer?"),
    ]
    await make_model().acall(Prompt(history))

    assert server.requests[0].body["messages"][-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [
                    {"type": "text", "text": '["a", "b"]'},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="},
                    },
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"},
                    },
                ],
            },
            {"type": "text", "text": "Which is newer?"},
        ],
    }


@pytest.mark.parametrize(
    ("tool_choice", "parallel", "expected"),
    [
        (None, None, None),
        ("auto", None, {"type": "auto"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("none", None, {"type": "none"}),
        ("get_weather", None, {"type": "tool", "name": "get_weather"}),
    ],
)
async def test_tool_choice_mapping(
    server: ProviderServer,
    make_model: Callable[..., AnthropicChatModel],
    tool_choice: str | None,
    parallel: bool | None,
    expected: dict[str, Any] | None,
) -> None:
    server.expect(Reply.json(anthropic_message(text_block("ok"))))
    await make_model().acall(
        ask(tool_callbacks=(WEATHER,), tool_choice=tool_choice, parallel_tool_calls=parallel)
    )
    assert server.requests[0].body.get("tool_choice") == expected


async def test_response_with_parallel_tool_use_and_cache_usage(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    usage = {
        "input_tokens": 12,
        "output_tokens": 30,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 200,
    }
    server.expect(
        Reply.json(
            anthropic_message(
                text_block("Let me check "),
                text_block("both."),
                tool_use_block("toolu_a", "get_weather", {"city": "Paris"}),
                tool_use_block("toolu_b", "get_weather", {"city": "東京"}),
                stop_reason="tool_use",
                usage=usage,
            )
        )
    )
    response = await make_model().acall(ask(tool_callbacks=(WEATHER,)))

    generation = response.generations[0]
    assert generation.message.text == "Let me check both."
    assert generation.message.tool_calls == (
        ToolCall(id="toolu_a", name="get_weather", arguments='{"city": "Paris"}'),
        ToolCall(id="toolu_b", name="get_weather", arguments='{"city": "東京"}'),
    )
    assert generation.finish_reason == "tool_use"
    assert response.usage == Usage(
        prompt_tokens=1212,
        completion_tokens=30,
        total_tokens=1242,
        cache_read_tokens=1000,
        cache_write_tokens=200,
    )
    assert response.metadata == {"id": "msg_1", "model": "claude-test", "provider": "anthropic"}


async def test_strict_tools_send_anthropic_strict_schemas_and_drop_the_nulls_they_force(
    server: ProviderServer,
    make_model: Callable[..., AnthropicChatModel],
    caplog: pytest.LogCaptureFixture,
) -> None:
    forecast = stub_tool(
        "forecast",
        {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    )
    recursive = stub_tool(
        "tree",
        {
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}},
            "required": ["root"],
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                    },
                }
            },
        },
    )
    server.expect(
        Reply.json(
            anthropic_message(
                tool_use_block("toolu_1", "forecast", {"city": "Paris", "days": None}),
                stop_reason="tool_use",
            )
        )
    )
    response = await make_model(strict_tools=True).acall(ask(tool_callbacks=(forecast, recursive)))

    sent = {tool["name"]: tool for tool in server.requests[0].body["tools"]}
    assert sent["forecast"]["strict"] is True
    assert sent["forecast"]["input_schema"]["properties"]["days"] == {
        "type": ["integer", "null"],
        "description": "(minimum: 1; maximum: 7)",
    }
    assert "strict" not in sent["tree"]  # recursion: sent as it is, with a warning
    assert "'tree' is sent without strict mode" in caplog.text
    (call,) = response.generations[0].message.tool_calls
    assert json.loads(call.arguments) == {"city": "Paris"}  # the forced null is gone


async def test_unsafe_names_are_aliased_and_mapped_back(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    tool = stub_tool("math.factorial")
    alias = provider_safe_name("math.factorial")
    server.expect(Reply.json(anthropic_message(tool_use_block("toolu_2", alias, {"n": 6}))))
    history = [
        UserMessage(text="5! and 6!"),
        AssistantMessage(
            tool_calls=(ToolCall(id="toolu_1", name="math.factorial", arguments='{"n": 5}'),)
        ),
        ToolResponseMessage(
            responses=(ToolResponse(id="toolu_1", name="math.factorial", data="120"),)
        ),
    ]
    response = await make_model().acall(
        Prompt(history, ChatOptions(tool_callbacks=(tool,), tool_choice="math.factorial"))
    )
    body = server.requests[0].body
    assert body["tools"][0]["name"] == alias
    assert body["messages"][1]["content"][0]["name"] == alias
    assert body["tool_choice"] == {"type": "tool", "name": alias}
    assert response.generations[0].message.tool_calls[0].name == "math.factorial"


def stream_events(alias: str = "get_weather") -> list[dict[str, Any]]:
    return [
        anthropic_message_start(
            {"input_tokens": 20, "output_tokens": 1, "cache_read_input_tokens": 100}
        ),
        anthropic_block_start(0, text_block("")),
        {"type": "ping"},
        anthropic_text_delta(0, "Checking "),
        anthropic_text_delta(0, "both."),
        anthropic_block_stop(0),
        anthropic_block_start(1, tool_use_block("toolu_a", alias, {})),
        anthropic_json_delta(1, ""),
        anthropic_json_delta(1, '{"ci'),
        anthropic_json_delta(1, 'ty": "Paris"}'),
        anthropic_block_stop(1),
        anthropic_block_start(2, tool_use_block("toolu_b", alias, {})),
        anthropic_json_delta(2, '{"city": "Rome"}'),
        anthropic_block_stop(2),
        anthropic_message_delta("tool_use", 42),
        {"type": "message_stop"},
    ]


async def test_stream_merges_input_json_deltas_per_block_and_reports_usage(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    server.expect(anthropic_sse(stream_events()))
    chunks = await collect(make_model(), ask(tool_callbacks=(WEATHER,)))

    assert server.requests[0].body["stream"] is True
    assert [c.text for c in chunks if c.text] == ["Checking ", "both."]
    call_chunks = [c.generations[0].message.tool_calls for c in chunks if c.has_tool_calls()]
    assert [[call.id for call in calls] for calls in call_chunks] == [["toolu_a"], ["toolu_b"]]
    merged = merge_chunks(chunks)
    assert merged.generations[0].message.tool_calls == (
        ToolCall(id="toolu_a", name="get_weather", arguments='{"city": "Paris"}'),
        ToolCall(id="toolu_b", name="get_weather", arguments='{"city": "Rome"}'),
    )
    assert merged.generations[0].finish_reason == "tool_use"
    assert merged.usage == Usage(
        prompt_tokens=120, completion_tokens=42, total_tokens=162, cache_read_tokens=100
    )


async def test_an_emoji_split_between_two_input_json_deltas_is_whole_again(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    """Partial JSON cut at UTF-16 code units carries the surrogate halves apart."""
    events = stream_events()
    events[8:10] = [
        anthropic_json_delta(1, '{"city": "Par \ud83d'),
        anthropic_json_delta(1, '\ude00"}'),
    ]
    server.expect(anthropic_sse(events))
    merged = merge_chunks(await collect(make_model(), ask(tool_callbacks=(WEATHER,))))
    first = merged.generations[0].message.tool_calls[0]
    assert first.arguments == '{"city": "Par \U0001f600"}'


async def test_an_emoji_split_between_two_text_or_thinking_deltas_reaches_the_caller_whole(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    """A high half ending a delta is held for the next one; a half nothing completes is given
    as it came when its block ends (for thinking: before the signature that closes it)."""

    def delta(index: int, **fields: str) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": fields}

    server.expect(
        anthropic_sse(
            [
                anthropic_message_start({"input_tokens": 10, "output_tokens": 1}),
                anthropic_block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
                delta(0, type="thinking_delta", thinking="Think \ud83d"),
                delta(0, type="thinking_delta", thinking="\ude00 \ud83d"),
                delta(0, type="signature_delta", signature="sig-1"),
                anthropic_block_stop(0),
                anthropic_block_start(1, text_block("")),
                anthropic_text_delta(1, "Smile \ud83d"),
                anthropic_text_delta(1, "\ude00 and \ud83d"),
                anthropic_block_stop(1),
                anthropic_message_delta("end_turn", 9),
                {"type": "message_stop"},
            ]
        )
    )
    chunks = await collect(make_model(), ask())
    assert [c.text for c in chunks if c.text] == ["Smile ", "\U0001f600 and ", "\ud83d"]
    reasoning = [p.text for c in chunks for g in c.generations for p in g.message.reasoning]
    assert reasoning == ["Think ", "\U0001f600 ", "\ud83d", ""]
    assert merge_chunks(chunks).generations[0].message.reasoning == (
        Reasoning(text="Think \U0001f600 \ud83d", signature="sig-1"),
    )


async def test_stream_maps_aliases_back(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    tool = stub_tool("weather.now")
    server.expect(anthropic_sse(stream_events(provider_safe_name("weather.now"))))
    merged = merge_chunks(await collect(make_model(), ask(tool_callbacks=(tool,))))
    assert {call.name for call in merged.generations[0].message.tool_calls} == {"weather.now"}


def test_call_needs_no_event_loop(server: ProviderServer) -> None:
    server.expect(Reply.json(anthropic_message(text_block("Sunny."))))
    model = AnthropicChatModel(
        "claude-test", base_url=server.url, api_key="sk-ant-test", max_tokens=99
    )
    try:
        assert model.call(ask()).text == "Sunny."
    finally:
        model.close()
    assert server.requests[0].body["max_tokens"] == 99


def test_call_uses_an_injected_async_client(server: ProviderServer) -> None:
    server.expect(Reply.json(anthropic_message(text_block("Sunny."))))
    client = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=server.url)
    assert AnthropicChatModel("claude-test", client=client).call(ask()).text == "Sunny."
    run_sync(client.close(), sync_name="close()", async_name="aclose()")
    assert server.requests[0].path == "/v1/messages"


async def test_a_4xx_is_a_provider_error_with_the_providers_message(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    error = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "tools.0.name: String should match pattern",
        },
    }
    server.expect(Reply.json(error, status=400))
    with pytest.raises(ProviderError) as raised:
        await make_model(max_retries=2).acall(ask())
    assert str(raised.value) == "anthropic: HTTP 400: tools.0.name: String should match pattern"
    assert raised.value.status_code == 400 and len(server.requests) == 1


async def test_529_overloaded_is_retried_after_retry_after(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.expect(
        Reply.json(overloaded, status=529, headers={"retry-after": "0.2"}),
        Reply.json(anthropic_message(text_block("ok"))),
    )
    assert (await make_model(max_retries=1).acall(ask())).text == "ok"
    first, second = server.requests
    assert second.received_at - first.received_at >= 0.2


async def test_rate_limit_retries_are_bounded(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    limited = Reply.json(
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
        status=429,
        headers={"retry-after-ms": "10"},
    )
    server.expect(limited, limited)
    with pytest.raises(ProviderError, match="HTTP 429: slow down"):
        await make_model(max_retries=1).acall(ask())
    assert len(server.requests) == 2


async def test_a_slow_server_raises_a_timeout(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    server.expect(Reply.json(anthropic_message(text_block("late")), delay=1.0))
    with pytest.raises(ProviderTimeoutError, match="anthropic: request timed out"):
        await make_model(timeout=0.2).acall(ask())


async def test_an_error_event_mid_stream_is_a_provider_error(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    events = stream_events()[:4]
    events.append({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    server.expect(anthropic_sse(events))
    received: list[str] = []
    with pytest.raises(ProviderResponseError) as raised:
        async for chunk in make_model().stream(ask()):
            received.append(chunk.text)
    assert received == ["Checking "]
    # The SDK raises it with the stream's status, 200: not an HTTP error, and worth retrying.
    error = raised.value
    assert str(error) == "anthropic: response failed: overloaded_error: Overloaded"
    assert error.status_code is None and error.code == "overloaded_error" and error.retryable


async def test_a_connection_dropped_mid_stream_is_a_provider_error(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    server.expect(anthropic_sse(stream_events(), drop_after=5))
    received: list[str] = []
    with pytest.raises(ProviderError, match="connection lost after 4 stream chunks") as raised:
        async for chunk in make_model().stream(ask(tool_callbacks=(WEATHER,))):
            received.append(chunk.text)
    assert received == ["Checking ", "both."]
    assert raised.value.status_code is None


async def test_a_stream_that_goes_quiet_raises_a_timeout(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    server.expect(anthropic_sse(stream_events(), stall_after=(4, 5.0)))
    # The first chunks must beat the read timeout even on a slow, busy machine (a fresh CI
    # box once took over 0.3 s); the stall after them must not.
    received: list[str] = []
    with pytest.raises(ProviderTimeoutError, match="anthropic: request timed out"):
        async for chunk in make_model(timeout=1.5).stream(ask()):
            received.append(chunk.text)
    assert received == ["Checking "]


def test_constructor_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="needs a model name"):
        AnthropicChatModel("", api_key="k")
    with pytest.raises(ValueError, match="max_tokens must be positive"):
        AnthropicChatModel("m", api_key="k", max_tokens=0)
    with pytest.raises(ValueError, match="max_pause_continuations must be >= 0, got -1"):
        AnthropicChatModel("m", api_key="k", max_pause_continuations=-1)


# -- pause_turn: a server tool loop (web search, code execution) paused a long turn ------------


def paused_message() -> dict[str, Any]:
    paused = anthropic_message(
        SEARCH_CALL,
        SEARCH_RESULT,
        CITED_TEXT,
        stop_reason="pause_turn",
        usage={"input_tokens": 10, "output_tokens": 5},
    )
    paused["container"] = {"id": "container_1", "expires_at": "2030-01-01T00:00:00Z"}
    return paused


async def test_a_paused_turn_is_sent_back_as_it_is_until_the_model_finishes_it(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    """Anthropic's documented continuation: the paused response, block for block, as the
    last (assistant) message of the same request; the answer is the whole turn."""
    finished = anthropic_message(
        text_block(" More later."), usage={"input_tokens": 30, "output_tokens": 7}
    )
    server.expect(Reply.json(paused_message()), Reply.json(finished))
    response = await make_model().acall(ask(tool_callbacks=(WEATHER,)))

    first, second = (request.body for request in server.requests)
    paused_turn = {"role": "assistant", "content": [SEARCH_CALL, SEARCH_RESULT, CITED_TEXT]}
    assert second["messages"] == [*first["messages"], paused_turn]
    assert second["tools"] == first["tools"]
    assert second["container"] == "container_1"  # the code execution container goes on
    assert response.text == "It is sunny. More later."
    assert response.generations[0].finish_reason == "end_turn"
    kept = response.generations[0].message.provider_content  # the blocks of both requests
    assert kept is not None
    assert kept.blocks == (SEARCH_CALL, SEARCH_RESULT, CITED_TEXT, text_block(" More later."))
    assert response.usage == Usage(prompt_tokens=40, completion_tokens=12, total_tokens=52)


async def test_a_paused_turn_goes_back_without_its_citations_file_ids(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    """A citation's ``file_id`` is in responses only: the API refuses it in a request."""
    paused = anthropic_message(FETCH_CALL, FETCH_RESULT, FETCH_CITED_TEXT, stop_reason="pause_turn")
    server.expect(Reply.json(paused), Reply.json(anthropic_message(text_block(" More later."))))
    await make_model().acall(ask())

    sent_back = server.requests[1].body["messages"][-1]["content"]
    citation = {k: v for k, v in DOCUMENT_CITATION.items() if k != "file_id"}
    assert sent_back == [FETCH_CALL, FETCH_RESULT, {**FETCH_CITED_TEXT, "citations": [citation]}]


async def test_a_paused_stream_goes_on_in_a_second_request(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    search_call = {**SEARCH_CALL, "input": {}}  # its input follows as deltas
    paused = [
        anthropic_message_start({"input_tokens": 10, "output_tokens": 1}),
        anthropic_block_start(0, search_call),
        anthropic_json_delta(0, '{"query": '),
        anthropic_json_delta(0, '"Paris weather"}'),
        anthropic_block_stop(0),
        anthropic_block_start(1, SEARCH_RESULT),
        anthropic_block_stop(1),
        anthropic_block_start(2, text_block("")),
        anthropic_text_delta(2, "It is "),
        anthropic_text_delta(2, "sunny."),
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "citations_delta", "citation": CITATION},
        },
        anthropic_block_stop(2),
        anthropic_message_delta("pause_turn", 5),
        {"type": "message_stop"},
    ]
    finished = [
        anthropic_message_start({"input_tokens": 30, "output_tokens": 1}),
        anthropic_block_start(0, text_block("")),
        anthropic_text_delta(0, " More later."),
        anthropic_block_stop(0),
        anthropic_message_delta("end_turn", 7),
        {"type": "message_stop"},
    ]
    server.expect(anthropic_sse(paused), anthropic_sse(finished))
    chunks = await collect(make_model(), ask())

    assert [c.text for c in chunks if c.text] == ["It is ", "sunny.", " More later."]
    first, second = (request.body for request in server.requests)
    paused_turn = {"role": "assistant", "content": [SEARCH_CALL, SEARCH_RESULT, CITED_TEXT]}
    assert second["messages"] == [*first["messages"], paused_turn]
    assert second["stream"] is True
    merged = merge_chunks(chunks)
    assert merged.generations[0].finish_reason == "end_turn"
    kept = merged.generations[0].message.provider_content
    assert kept is not None
    assert kept.blocks == (SEARCH_CALL, SEARCH_RESULT, CITED_TEXT, text_block(" More later."))
    assert merged.usage == Usage(prompt_tokens=40, completion_tokens=12, total_tokens=52)


async def test_a_paused_stream_with_an_emoji_split_between_deltas_is_sent_back_whole(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    """The blocks sent back hold the emoji, not its two halves: UTF-8 cannot carry a lone
    half (the request would go with U+FFFD in their place), and a signed thinking block
    changed so fails the API's signature check."""

    def delta(index: int, **fields: str) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": fields}

    search_call = {**SEARCH_CALL, "input": {}}
    paused = [
        anthropic_message_start({"input_tokens": 10, "output_tokens": 1}),
        anthropic_block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, type="thinking_delta", thinking="Search \ud83d"),
        delta(0, type="thinking_delta", thinking="\ude00"),
        delta(0, type="signature_delta", signature="sig-1"),
        anthropic_block_stop(0),
        anthropic_block_start(1, search_call),
        anthropic_json_delta(1, '{"query": "Paris \ud83d'),
        anthropic_json_delta(1, '\ude00"}'),
        anthropic_block_stop(1),
        anthropic_block_start(2, text_block("")),
        anthropic_text_delta(2, "Sunny \ud83d"),
        anthropic_text_delta(2, "\ude00"),
        anthropic_block_stop(2),
        anthropic_message_delta("pause_turn", 5),
        {"type": "message_stop"},
    ]
    finished = [
        anthropic_message_start({"input_tokens": 30, "output_tokens": 1}),
        anthropic_message_delta("end_turn", 7),
        {"type": "message_stop"},
    ]
    server.expect(anthropic_sse(paused), anthropic_sse(finished))
    await collect(make_model(), ask())

    sent_back = server.requests[1].body["messages"][-1]["content"]
    assert sent_back == [
        {"type": "thinking", "thinking": "Search \U0001f600", "signature": "sig-1"},
        {**SEARCH_CALL, "input": {"query": "Paris \U0001f600"}},
        text_block("Sunny \U0001f600"),
    ]


# Blocks of a server tool the installed SDK does not know (the MCP connector's, a tool newer
# than the SDK): the SDK builds them as ``TextBlock`` objects without text.
MCP_CALL: dict[str, Any] = {
    "type": "mcp_tool_use",
    "id": "mcptoolu_1",
    "name": "lookup",
    "server_name": "docs",
    "input": {"q": "Paris"},
}
MCP_RESULT: dict[str, Any] = {
    "type": "mcp_tool_result",
    "tool_use_id": "mcptoolu_1",
    "is_error": False,
    "content": [{"type": "text", "text": "Paris is sunny"}],
}


async def test_blocks_of_a_server_tool_the_sdk_does_not_know_are_no_text_and_go_back_as_they_came(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    paused = anthropic_message(MCP_CALL, MCP_RESULT, stop_reason="pause_turn")
    server.expect(Reply.json(paused), Reply.json(anthropic_message(text_block("Sunny."))))
    response = await make_model().acall(ask())

    assert response.text == "Sunny."
    assert server.requests[1].body["messages"][-1]["content"] == [MCP_CALL, MCP_RESULT]


async def test_a_streamed_block_of_a_server_tool_the_sdk_does_not_know_is_no_text(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    events = [
        anthropic_message_start({"input_tokens": 10, "output_tokens": 1}),
        anthropic_block_start(0, MCP_CALL),
        anthropic_block_stop(0),
        anthropic_block_start(1, MCP_RESULT),
        anthropic_block_stop(1),
        anthropic_block_start(2, text_block("")),
        anthropic_text_delta(2, "Sunny."),
        anthropic_block_stop(2),
        anthropic_message_delta("end_turn", 5),
        {"type": "message_stop"},
    ]
    server.expect(anthropic_sse(events))
    chunks = await collect(make_model(), ask())

    assert merge_chunks(chunks).text == "Sunny."


async def test_a_turn_still_paused_after_the_continuations_allowed_is_returned_as_it_is(
    server: ProviderServer,
    make_model: Callable[..., AnthropicChatModel],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.expect(Reply.json(paused_message()), Reply.json(paused_message()))
    model = make_model(max_pause_continuations=1)
    with caplog.at_level(logging.WARNING, logger="tooluse.models"):
        response = await asyncio.to_thread(model.call, ask())  # the blocking client's path

    assert len(server.requests) == 2
    assert response.generations[0].finish_reason == "pause_turn"
    assert response.text == "It is sunny.It is sunny."
    assert "still paused after 1 continuation" in caplog.text


@pytest.mark.parametrize(
    ("prompt_cache", "sent"),
    [
        (None, None),
        ("5m", {"type": "ephemeral"}),
        ("1h", {"type": "ephemeral", "ttl": "1h"}),
    ],
)
async def test_prompt_cache_is_anthropics_top_level_cache_control(
    server: ProviderServer,
    make_model: Callable[..., AnthropicChatModel],
    prompt_cache: str | None,
    sent: dict[str, str] | None,
) -> None:
    server.expect(
        Reply.json(anthropic_message(text_block("ok"))),
        anthropic_sse(
            [
                anthropic_message_start({"input_tokens": 5, "output_tokens": 0}),
                anthropic_block_start(0, text_block("")),
                anthropic_text_delta(0, "ok"),
                anthropic_block_stop(0),
                anthropic_message_delta("end_turn", 1),
            ]
        ),
    )
    model = make_model(prompt_cache=prompt_cache)
    await model.acall(ask())
    await collect(model, ask())

    assert [r.body.get("cache_control") for r in server.requests] == [sent, sent]


def test_prompt_cache_takes_only_anthropics_lifetimes() -> None:
    with pytest.raises(ValueError, match=r"prompt_cache must be '5m', '1h' or None.*'10m'"):
        AnthropicChatModel("claude-test", api_key="k", prompt_cache="10m")  # type: ignore[arg-type]
