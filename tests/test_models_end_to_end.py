"""The whole loop over each provider (OpenAI Chat Completions and Responses, Anthropic):
ChatClient -> ToolCallingAdvisor -> real SDK -> local wire-format server -> tools -> back. The
tools include a dotted name (aliased on the wire) and the model sends parallel calls, one of
them with broken JSON arguments."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from typing import Any

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
    openai_usage,
    responses_body,
    responses_call,
    responses_events,
    responses_message,
    responses_usage,
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
from tooluse import Usage
from tooluse.client import ChatClient
from tooluse.models import ChatModel, provider_safe_name
from tooluse.tools import Image, tool

FACTORIAL = provider_safe_name("math.factorial")
calls_seen: list[tuple[str, Any]] = []


@tool
def get_weather(city: str, unit: str = "c") -> str:
    """Current weather in a city."""
    calls_seen.append(("get_weather", (city, unit)))
    return f"Sunny in {city}, 21{unit.upper()}"


@tool(name="math.factorial")
def factorial(n: int) -> int:
    """n! for a small n."""
    calls_seen.append(("math.factorial", n))
    result = 1
    for k in range(2, n + 1):
        result *= k
    return result


# A 100 KB screenshot: 136,536 characters of base64, which must never be sent as text.
SCREENSHOT = Image(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 400, "image/png")
SCREENSHOT_BASE64 = base64.b64encode(SCREENSHOT.data).decode()


@tool
def screenshot() -> Image:
    """The browser page as it looks."""
    calls_seen.append(("screenshot", None))
    return SCREENSHOT


@pytest.fixture
def server() -> ProviderServer:
    calls_seen.clear()
    return shared_server()


@pytest.fixture
async def models(server: ProviderServer) -> AsyncIterator[dict[str, Callable[..., Any]]]:
    async with all_providers(server.url) as models:
        yield models


def client_for(model: ChatModel) -> ChatClient:
    return ChatClient(model, system="Use the tools.", tools=[get_weather, factorial, screenshot])


# -- OpenAI --------------------------------------------------------------------------------------


async def test_openai_call_loop_with_aliases_parallel_calls_and_broken_arguments(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(
        Reply.json(
            openai_completion(
                None,
                [
                    openai_call("call_w", "get_weather", '{"city": "Paris"}'),
                    openai_call("call_f", FACTORIAL, '{"n": 5}'),
                    openai_call("call_x", "get_weather", '{"city": "Ro'),
                ],
                finish_reason="tool_calls",
                usage=openai_usage(100, 10, cached_tokens=50),
            )
        ),
        Reply.json(openai_completion("Paris is sunny; 5! = 120.", usage=openai_usage(200, 20))),
    )
    response = await client_for(models["openai"]()).prompt("Weather in Paris, and 5!?").acall()

    assert response.content() == "Paris is sunny; 5! = 120."
    assert sorted(calls_seen) == [("get_weather", ("Paris", "c")), ("math.factorial", 5)]
    second = server.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool", "tool"]
    assert [c["function"]["name"] for c in second[2]["tool_calls"]] == [
        "get_weather",
        FACTORIAL,
        "get_weather",
    ]
    results = {m["tool_call_id"]: m["content"] for m in second[3:]}
    assert results["call_w"] == '"Sunny in Paris, 21C"'  # str results are JSON-encoded
    assert results["call_f"] == "120"
    assert "the arguments are not valid JSON" in results["call_x"]  # the model hears what broke
    assert response.chat_response().usage == Usage(
        prompt_tokens=300, completion_tokens=30, total_tokens=330, cache_read_tokens=50
    )


async def test_openai_loop_shows_a_tool_s_image_in_a_user_message_after_the_tool_messages(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(
        Reply.json(
            openai_completion(
                None,
                [
                    openai_call("call_s", "screenshot", "{}"),
                    openai_call("call_w", "get_weather", '{"city": "Paris"}'),
                ],
                finish_reason="tool_calls",
            )
        ),
        Reply.json(openai_completion("A weather page for Paris.")),
    )
    response = await client_for(models["openai"]()).prompt("What is on screen?").acall()

    assert response.content() == "A weather page for Paris."
    second = server.requests[1].body["messages"]
    # A tool message takes only text: the image follows every tool message of the round.
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert second[3] == {
        "role": "tool",
        "tool_call_id": "call_s",
        "content": "(The image(s) of this result follow in the next user message.)",
    }
    assert second[4]["content"] == '"Sunny in Paris, 21C"'
    assert second[5]["content"] == [
        {"type": "text", "text": "The image(s) of the result of screenshot (call_s):"},
        {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{SCREENSHOT_BASE64}"},
        },
    ]


async def test_responses_loop_puts_a_tool_s_image_in_the_function_call_output(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(
        Reply.json(responses_body(responses_call("call_s", "screenshot", "{}"))),
        Reply.json(responses_body(responses_message("A weather page for Paris."))),
    )
    client = client_for(models["openai-responses"]())
    response = await client.prompt("What is on screen?").acall()

    assert response.content() == "A weather page for Paris."
    (output,) = [i for i in server.requests[1].body["input"] if i["type"] == "function_call_output"]
    assert output == {
        "type": "function_call_output",
        "call_id": "call_s",
        "output": [
            {"type": "input_image", "image_url": f"data:image/png;base64,{SCREENSHOT_BASE64}"}
        ],
    }


async def test_openai_stream_loop(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(
        openai_sse(
            [
                openai_chunk({"role": "assistant", "content": None}),
                openai_chunk(
                    openai_call_delta(
                        0,
                        id="call_f",
                        type="function",
                        function={"name": FACTORIAL[:6], "arguments": ""},
                    )
                ),
                openai_chunk(
                    openai_call_delta(0, function={"name": FACTORIAL[6:], "arguments": '{"n"'})
                ),
                openai_chunk(openai_call_delta(0, function={"arguments": ": 4}"})),
                openai_chunk({}, finish_reason="tool_calls"),
                openai_chunk(None, usage=openai_usage(40, 4)),
            ]
        ),
        openai_sse(
            [
                openai_chunk({"content": "4! is "}),
                openai_chunk({"content": "24."}, finish_reason="stop"),
                openai_chunk(None, usage=openai_usage(60, 6)),
            ]
        ),
    )
    stream = client_for(models["openai"]()).prompt("4!?").stream()
    pieces = [piece async for piece in stream.content()]

    assert pieces == ["4! is ", "24."]
    assert calls_seen == [("math.factorial", 4)]
    assert server.requests[1].body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_f",
        "content": "24",
    }
    assert stream.chat_response().usage == Usage(
        prompt_tokens=100, completion_tokens=10, total_tokens=110
    )


async def test_openai_strict_loop_gives_tools_their_defaults(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(
        Reply.json(
            openai_completion(
                None, [openai_call("c1", "get_weather", '{"city": "Oslo", "unit": null}')]
            )
        ),
        Reply.json(openai_completion("Sunny.")),
    )
    response = await client_for(models["openai"](strict_tools=True)).prompt("Oslo?").acall()
    assert response.content() == "Sunny."
    assert calls_seen == [("get_weather", ("Oslo", "c"))]
    assert server.requests[0].body["tools"][0]["function"]["strict"] is True


# -- OpenAI Responses ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["acall", "stream"])
async def test_responses_loop_with_aliases_parallel_calls_and_broken_arguments(
    server: ProviderServer, models: dict[str, Callable[..., Any]], mode: str
) -> None:
    rounds = [
        responses_body(
            responses_call("call_w", "get_weather", '{"city": "Paris"}'),
            responses_call("call_f", FACTORIAL, '{"n": 5}'),
            responses_call("call_x", "get_weather", '{"city": "Ro'),
            usage=responses_usage(100, 10, cached=50),
        ),
        responses_body(
            responses_message("Paris is sunny; 5! = 120."), usage=responses_usage(200, 20)
        ),
    ]
    if mode == "stream":
        server.expect(*(openai_responses_sse(responses_events(body)) for body in rounds))
    else:
        server.expect(*(Reply.json(body) for body in rounds))
    prompt = client_for(models["openai-responses"]()).prompt("Weather in Paris, and 5!?")
    if mode == "stream":
        stream = prompt.stream()
        answer = "".join([piece async for piece in stream.content()])
        usage = stream.chat_response().usage
    else:
        response = await prompt.acall()
        answer, usage = response.content(), response.chat_response().usage

    assert answer == "Paris is sunny; 5! = 120."
    assert sorted(calls_seen) == [("get_weather", ("Paris", "c")), ("math.factorial", 5)]
    second = server.requests[1].body
    assert second["instructions"] == "Use the tools."
    assert [item["type"] for item in second["input"]] == [
        "message",
        *["function_call"] * 3,
        *["function_call_output"] * 3,
    ]
    assert [item["name"] for item in second["input"][1:4]] == [
        "get_weather",
        FACTORIAL,
        "get_weather",
    ]
    results = {item["call_id"]: item["output"] for item in second["input"][4:]}
    assert results["call_w"] == '"Sunny in Paris, 21C"'
    assert results["call_f"] == "120"
    assert "the arguments are not valid JSON" in results["call_x"]
    assert usage == Usage(
        prompt_tokens=300, completion_tokens=30, total_tokens=330, cache_read_tokens=50
    )


# -- Anthropic -----------------------------------------------------------------------------------


async def test_anthropic_call_loop_with_aliases_parallel_calls_and_error_results(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(
        Reply.json(
            anthropic_message(
                text_block("Checking."),
                tool_use_block("toolu_w", "get_weather", {"city": "Paris"}),
                tool_use_block("toolu_f", FACTORIAL, {"n": "five"}),
                stop_reason="tool_use",
                usage={"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 90},
            )
        ),
        Reply.json(
            anthropic_message(
                text_block("Paris is sunny."), usage={"input_tokens": 20, "output_tokens": 7}
            )
        ),
    )
    response = await client_for(models["anthropic"]()).prompt("Weather in Paris, and 5!?").acall()

    assert response.content() == "Paris is sunny."
    assert calls_seen == [("get_weather", ("Paris", "c"))]
    body = server.requests[1].body
    assert body["system"] == "Use the tools."
    assistant, results = body["messages"][1], body["messages"][2]
    assert [b.get("name") for b in assistant["content"]] == [None, "get_weather", FACTORIAL]
    assert results["role"] == "user"
    weather, failed = results["content"]
    assert weather == {
        "type": "tool_result",
        "tool_use_id": "toolu_w",
        "content": '"Sunny in Paris, 21C"',
    }
    assert failed["tool_use_id"] == "toolu_f" and failed["is_error"] is True
    assert "Invalid arguments for tool 'math.factorial'" in failed["content"]
    assert response.chat_response().usage == Usage(
        prompt_tokens=120, completion_tokens=12, total_tokens=132, cache_read_tokens=90
    )


async def test_anthropic_loop_shows_a_tool_s_image_as_an_image_block_of_its_result(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(
        Reply.json(
            anthropic_message(
                tool_use_block("toolu_s", "screenshot", {}),
                tool_use_block("toolu_w", "get_weather", {"city": "Paris"}),
                stop_reason="tool_use",
            )
        ),
        Reply.json(anthropic_message(text_block("A weather page for Paris."))),
    )
    response = await client_for(models["anthropic"]()).prompt("What is on screen?").acall()

    assert response.content() == "A weather page for Paris."
    results = server.requests[1].body["messages"][-1]
    assert results == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_s",
                "content": [
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": SCREENSHOT_BASE64,
                        },
                    }
                ],
            },
            {"type": "tool_result", "tool_use_id": "toolu_w", "content": '"Sunny in Paris, 21C"'},
        ],
    }


async def test_anthropic_stream_loop(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(
        anthropic_sse(
            [
                anthropic_message_start({"input_tokens": 30, "output_tokens": 1}),
                anthropic_block_start(0, tool_use_block("toolu_1", FACTORIAL, {})),
                anthropic_json_delta(0, '{"n":'),
                anthropic_json_delta(0, " 3}"),
                anthropic_block_stop(0),
                anthropic_message_delta("tool_use", 9),
                {"type": "message_stop"},
            ]
        ),
        anthropic_sse(
            [
                anthropic_message_start({"input_tokens": 50, "output_tokens": 1}),
                anthropic_block_start(0, text_block("")),
                anthropic_text_delta(0, "3! = "),
                anthropic_text_delta(0, "6"),
                anthropic_block_stop(0),
                anthropic_message_delta("end_turn", 4),
                {"type": "message_stop"},
            ]
        ),
    )
    stream = client_for(models["anthropic"]()).prompt("3!?").stream()
    pieces = [piece async for piece in stream.content()]

    assert pieces == ["3! = ", "6"]
    assert calls_seen == [("math.factorial", 3)]
    last_turn = server.requests[1].body["messages"][-1]
    assert last_turn == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "6"}],
    }
    assert stream.chat_response().usage == Usage(
        prompt_tokens=80, completion_tokens=13, total_tokens=93
    )


# -- both ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic"])
@pytest.mark.parametrize("mode", ["call", "acall", "stream"])
async def test_a_lone_surrogate_is_sent_as_a_replacement_character(
    server: ProviderServer, models: dict[str, Callable[..., Any]], provider: str, mode: str
) -> None:
    # UTF-8 cannot carry a lone surrogate (a client's broken "\ud83d" escape, a file name read
    # with surrogateescape): the SDK failed to encode the request with a UnicodeEncodeError.
    if provider == "openai":
        reply = (
            openai_sse([openai_chunk({"content": "ok"}, finish_reason="stop")])
            if mode == "stream"
            else Reply.json(openai_completion("ok"))
        )
    elif provider == "openai-responses":
        body = responses_body(responses_message("ok"))
        reply = (
            openai_responses_sse(responses_events(body)) if mode == "stream" else Reply.json(body)
        )
    else:
        reply = (
            anthropic_sse(
                [
                    anthropic_message_start({"input_tokens": 3, "output_tokens": 0}),
                    anthropic_block_start(0, text_block("")),
                    anthropic_text_delta(0, "ok"),
                    anthropic_block_stop(0),
                    anthropic_message_delta("end_turn", 1),
                ]
            )
            if mode == "stream"
            else Reply.json(anthropic_message(text_block("ok")))
        )
    server.expect(reply)
    prompt = client_for(models[provider]()).prompt("smile \ud83d please")
    if mode == "call":
        answer = (await asyncio.to_thread(prompt.call)).content()
    elif mode == "acall":
        answer = (await prompt.acall()).content()
    else:
        answer = "".join([piece async for piece in prompt.stream().content()])
    assert answer == "ok"
    body = server.requests[-1].body
    content = (body["input"] if provider == "openai-responses" else body["messages"])[-1]["content"]
    text = content if isinstance(content, str) else content[0]["text"]
    assert text == "smile \ufffd please"
