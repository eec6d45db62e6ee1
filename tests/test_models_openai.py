"""OpenAIChatModel against a local server speaking the Chat Completions wire format, through
the real ``openai`` SDK (request encoding, SSE decoding, retries and timeouts are the SDK's)."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk

from provider_models import ask, collect, model_maker
from provider_payloads import (
    openai_call,
    openai_call_delta,
    openai_chunk,
    openai_completion,
    openai_usage,
    stub_tool,
)
from provider_server import ProviderServer, Reply, openai_sse, shared_server
from tooluse import (
    AssistantMessage,
    ChatOptions,
    Prompt,
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
    OpenAIChatModel,
    ProviderContextLengthError,
    ProviderError,
    ProviderResponseError,
    ProviderTimeoutError,
    provider_safe_name,
)
from tooluse.models._openai import _StreamState
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


@pytest.fixture
def server() -> ProviderServer:
    return shared_server()


@pytest.fixture
async def make_model(server: ProviderServer) -> AsyncIterator[Callable[..., OpenAIChatModel]]:
    async with model_maker(
        OpenAIChatModel, "gpt-test", base_url=f"{server.url}/v1", api_key="sk-test", max_retries=0
    ) as make:
        yield make


# -- request encoding --------------------------------------------------------------------------


async def test_request_carries_messages_tools_and_parameters(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(Reply.json(openai_completion("ok")))
    model = make_model(extra_headers={"X-Team": "qa"})
    history = [
        SystemMessage(text="Be brief."),
        UserMessage(text="Weather in Paris?"),
        AssistantMessage(
            text=None, tool_calls=(ToolCall(id="call_1", name="get_weather", arguments=""),)
        ),
        ToolResponseMessage(
            responses=(ToolResponse(id="call_1", name="get_weather", data='{"temp": 21}'),)
        ),
    ]
    options = ChatOptions(
        tool_callbacks=(WEATHER,),
        tool_choice="required",
        parallel_tool_calls=False,
        temperature=0.2,
        top_p=0.9,
        max_tokens=64,
        stop=("END",),
        extra={"seed": 7},
    )

    await model.acall(Prompt(history, options))

    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["x-team"] == "qa"
    assert request.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather in a city",
                    "parameters": {k: v for k, v in WEATHER_SCHEMA.items() if k != "$schema"},
                },
            }
        ],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 64,
        "stop": ["END"],
        "seed": 7,
    }


async def test_images_of_a_round_s_results_follow_its_tool_messages_in_one_user_message(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(Reply.json(openai_completion("ok")))
    png, jpeg = ImagePart("image/png", "iVBORw=="), ImagePart("image/jpeg", "/9j/")
    history = [
        UserMessage(text="Compare the pages."),
        AssistantMessage(
            tool_calls=(ToolCall("call_1", "get_weather"), ToolCall("call_2", "get_weather"))
        ),
        ToolResponseMessage(
            (
                ToolResponse("call_1", "get_weather", '{"page": "a"}', images=[png]),
                ToolResponse("call_2", "get_weather", "", images=[jpeg]),
            )
        ),
        UserMessage(text="Which is newer?"),
    ]
    await make_model().acall(Prompt(history))

    follows = "(The image(s) of this result follow in the next user message.)"
    assert server.requests[0].body["messages"][2:] == [
        {"role": "tool", "tool_call_id": "call_1", "content": f'{{"page": "a"}}\n{follows}'},
        {"role": "tool", "tool_call_id": "call_2", "content": follows},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "The image(s) of the result of get_weather (call_1):"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
                {"type": "text", "text": "The image(s) of the result of get_weather (call_2):"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}},
            ],
        },
        {"role": "user", "content": "Which is newer?"},
    ]


async def test_default_options_apply_and_request_options_win(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(Reply.json(openai_completion("ok")))
    model = make_model(
        default_options=ChatOptions(temperature=0.1, max_tokens=10, extra={"seed": 1, "user": "u"}),
        max_tokens_field="max_completion_tokens",
    )
    await model.acall(ask(temperature=0.7, model="gpt-other", extra={"seed": 2}))
    body = server.requests[0].body
    assert body["model"] == "gpt-other"
    assert body["temperature"] == 0.7
    assert body["max_completion_tokens"] == 10
    assert "max_tokens" not in body
    assert (body["seed"], body["user"]) == (2, "u")
    assert "tools" not in body and "parallel_tool_calls" not in body


@pytest.mark.parametrize(
    ("base_url", "field", "sent_as"),
    [
        (None, None, "max_completion_tokens"),  # the SDK's default: OpenAI's API
        ("https://api.openai.com/v1", None, "max_completion_tokens"),
        ("https://my-resource.openai.azure.com/openai", None, "max_tokens"),
        ("https://api.deepseek.com", None, "max_tokens"),
        ("http://localhost:11434/v1", None, "max_tokens"),
        ("https://api.openai.com/v1", "max_tokens", "max_tokens"),
        ("http://localhost:8000/v1", "max_completion_tokens", "max_completion_tokens"),
    ],
)
def test_max_tokens_goes_as_max_completion_tokens_to_openais_own_api(
    base_url: str | None, field: Any, sent_as: str
) -> None:
    """OpenAI deprecated ``max_tokens`` for ``max_completion_tokens``, which its reasoning
    models require; compatible servers (and Azure's older API versions) know ``max_tokens``."""
    settings: dict[str, Any] = {} if field is None else {"max_tokens_field": field}
    model = OpenAIChatModel("o4-mini", base_url=base_url, api_key="k", **settings)
    model.close()
    params = model._request(ask(max_tokens=64)).params
    assert params[sent_as] == 64
    assert {"max_tokens", "max_completion_tokens"} & set(params) == {sent_as}


async def test_named_tool_choice_without_tools_is_rejected(
    make_model: Callable[..., OpenAIChatModel],
) -> None:
    with pytest.raises(ValueError, match="tool_choice='get_weather' needs tools"):
        await make_model().acall(ask(tool_choice="get_weather"))


# -- responses -----------------------------------------------------------------------------------


async def test_response_text_calls_usage_and_finish_reason(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(
        Reply.json(
            openai_completion(
                None,
                [
                    openai_call("call_a", "get_weather", '{"city": "Paris"}'),
                    openai_call("call_b", "get_weather", '{"city": "Rome"}'),
                ],
                finish_reason="tool_calls",
                usage=openai_usage(100, 20, cached_tokens=64, cache_write_tokens=8),
            )
        )
    )
    response = await make_model().acall(ask(tool_callbacks=(WEATHER,)))

    generation = response.generations[0]
    assert generation.message.text is None
    assert generation.message.tool_calls == (
        ToolCall(id="call_a", name="get_weather", arguments='{"city": "Paris"}'),
        ToolCall(id="call_b", name="get_weather", arguments='{"city": "Rome"}'),
    )
    assert generation.finish_reason == "tool_calls"
    assert response.usage == Usage(
        prompt_tokens=100,
        completion_tokens=20,
        total_tokens=120,
        cache_read_tokens=64,
        cache_write_tokens=8,
    )
    assert response.metadata == {"id": "chatcmpl-1", "model": "gpt-test", "provider": "openai"}


async def test_missing_arguments_and_ids_and_broken_json_do_not_crash(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(
        Reply.json(
            openai_completion(
                None,
                [
                    {"type": "function", "function": {"name": "get_weather"}},
                    {"type": "function", "function": {"name": "get_weather", "arguments": None}},
                    openai_call("call_c", "get_weather", '{"city": "Par'),
                ],
            )
        )
    )
    calls = (
        (await make_model().acall(ask(tool_callbacks=(WEATHER,)))).generations[0].message.tool_calls
    )
    assert [(c.name, c.arguments) for c in calls] == [
        ("get_weather", ""),
        ("get_weather", ""),
        ("get_weather", '{"city": "Par'),  # raw text: the tool layer tells the model what broke
    ]
    assert calls[0].id.startswith("call_") and calls[1].id.startswith("call_")
    assert len({c.id for c in calls}) == 3


async def test_ids_repeated_within_a_response_are_made_unique_keeping_the_first(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    # A server that numbers calls per tool name: each tool's first call is call_0.
    server.expect(
        Reply.json(
            openai_completion(
                None,
                [
                    openai_call("call_0", "get_weather", '{"city": "Paris"}'),
                    openai_call("call_0", "get_time", "{}"),
                    openai_call("call_0_2", "get_weather", '{"city": "Rome"}'),
                    openai_call("call_0", "get_weather", '{"city": "Oslo"}'),
                ],
            )
        )
    )
    tools = (WEATHER, stub_tool("get_time", {"type": "object"}))
    calls = (await make_model().acall(ask(tool_callbacks=tools))).generations[0].message.tool_calls
    assert [(c.id, c.name) for c in calls] == [
        ("call_0", "get_weather"),
        ("call_0_3", "get_time"),  # call_0_2 is the server's own id for a later call
        ("call_0_2", "get_weather"),
        ("call_0_4", "get_weather"),
    ]


async def test_deepseek_cache_hits_count_as_cache_reads(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    usage = {**openai_usage(50, 5), "prompt_cache_hit_tokens": 32, "prompt_cache_miss_tokens": 18}
    server.expect(Reply.json(openai_completion("hi", usage=usage)))
    response = await make_model().acall(ask())
    assert response.usage is not None and response.usage.cache_read_tokens == 32
    assert response.usage.cache_write_tokens is None


async def test_reasoning_tokens_are_in_the_response_metadata_plain_and_streamed(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    """``completion_tokens_details.reasoning_tokens`` (OpenAI's reasoning models, DeepSeek):
    counted in ``completion_tokens`` as billed, and named in the metadata as the Responses
    adapter does."""
    usage = {**openai_usage(50, 300), "completion_tokens_details": {"reasoning_tokens": 256}}
    server.expect(
        Reply.json(openai_completion("42", usage=usage)),
        openai_sse(
            [openai_chunk({"content": "42"}, finish_reason="stop"), openai_chunk(None, usage=usage)]
        ),
    )
    response = await make_model().acall(ask())
    assert response.usage is not None and response.usage.completion_tokens == 300
    assert response.metadata["reasoning_tokens"] == 256
    chunks = await collect(make_model(), ask())
    assert chunks[-1].usage is not None and chunks[-1].metadata["reasoning_tokens"] == 256
    assert merge_chunks(chunks).metadata["reasoning_tokens"] == 256


def test_call_runs_the_async_client_and_needs_no_event_loop(server: ProviderServer) -> None:
    server.expect(Reply.json(openai_completion("Sunny.")))
    model = OpenAIChatModel("gpt-test", base_url=f"{server.url}/v1", api_key="sk-test")
    try:
        assert model.call(ask()).text == "Sunny."
    finally:
        model.close()
    assert server.requests[0].headers["user-agent"].startswith("AsyncOpenAI/Python")


def test_call_uses_an_injected_async_client(server: ProviderServer) -> None:
    server.expect(Reply.json(openai_completion("Sunny.")))
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=f"{server.url}/v1")
    assert OpenAIChatModel("gpt-test", client=client).call(ask()).text == "Sunny."
    run_sync(client.close(), sync_name="close()", async_name="aclose()")
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


# -- tool names at the boundary ----------------------------------------------------------------


async def test_unsafe_names_are_aliased_on_the_wire_and_mapped_back(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    long_name = "mcp__acme_enterprise_knowledge_base__search_documents_by_semantic_similarity_v2"
    tools = (stub_tool("math.factorial"), stub_tool("查询天气"), stub_tool(long_name))
    dotted, cjk, long_alias = (provider_safe_name(t.definition.name) for t in tools)
    server.expect(
        Reply.json(
            openai_completion(
                None,
                [
                    openai_call("c1", dotted, "{}"),
                    openai_call("c2", cjk, "{}"),
                    openai_call("c3", long_alias, "{}"),
                ],
            )
        )
    )
    history = [
        UserMessage(text="5!"),
        AssistantMessage(tool_calls=(ToolCall(id="c0", name="math.factorial", arguments="{}"),)),
        ToolResponseMessage(responses=(ToolResponse(id="c0", name="math.factorial", data="120"),)),
    ]
    response = await make_model().acall(
        Prompt(history, ChatOptions(tool_callbacks=tools, tool_choice="math.factorial"))
    )

    body = server.requests[0].body
    sent_names = [tool["function"]["name"] for tool in body["tools"]]
    assert sent_names == [dotted, cjk, long_alias]
    assert all(len(name) <= 64 and name.isascii() for name in sent_names)
    assert dotted.startswith("math_factorial_")
    assert long_alias.startswith("mcp__acme_enterprise")
    assert body["messages"][1]["tool_calls"][0]["function"]["name"] == dotted
    assert body["tool_choice"] == {"type": "function", "function": {"name": dotted}}
    names = [c.name for c in response.generations[0].message.tool_calls]
    assert names == ["math.factorial", "查询天气", long_name]


async def test_a_name_the_model_invented_passes_through_unchanged(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(Reply.json(openai_completion(None, [openai_call("c1", "get_wether", "{}")])))
    response = await make_model().acall(ask(tool_callbacks=(WEATHER,)))
    assert response.generations[0].message.tool_calls[0].name == "get_wether"


# -- strict mode -------------------------------------------------------------------------------


async def test_strict_tools_send_strict_schemas_and_drop_the_nulls_they_force(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(
        Reply.json(
            openai_completion(
                None, [openai_call("c1", "get_weather", '{"city": "Oslo", "unit": null}')]
            )
        )
    )
    response = await make_model(strict_tools=True).acall(ask(tool_callbacks=(WEATHER,)))

    function = server.requests[0].body["tools"][0]["function"]
    assert function["strict"] is True
    assert function["parameters"] == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": ["string", "null"], "enum": ["c", "f", None], "default": "c"},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    }
    assert response.generations[0].message.tool_calls[0].arguments == '{"city": "Oslo"}'


async def test_a_schema_strict_mode_cannot_express_is_sent_plain_with_a_warning(
    server: ProviderServer,
    make_model: Callable[..., OpenAIChatModel],
    caplog: pytest.LogCaptureFixture,
) -> None:
    tags_schema = {
        "type": "object",
        "properties": {"tags": {"type": "object", "additionalProperties": {"type": "string"}}},
        "required": ["tags"],
    }
    tagger = stub_tool("set_tags", tags_schema)
    server.expect(
        Reply.json(openai_completion(None, [openai_call("c1", "set_tags", '{"tags": null}')]))
    )
    with caplog.at_level(logging.WARNING, logger="tooluse.models"):
        response = await make_model(strict_tools=True).acall(ask(tool_callbacks=(tagger, WEATHER)))

    tools = server.requests[0].body["tools"]
    assert (
        "strict" not in tools[0]["function"] and tools[0]["function"]["parameters"] == tags_schema
    )
    assert tools[1]["function"]["strict"] is True
    assert "'set_tags' is sent without strict mode" in caplog.text
    assert "#/properties/tags" in caplog.text
    assert response.generations[0].message.tool_calls[0].arguments == '{"tags": null}'


# -- streaming ---------------------------------------------------------------------------------


def fragmented_weather_stream() -> list[dict[str, Any]]:
    """OpenAI style: role first, id and type only on a call's first delta, name and arguments
    in fragments, two parallel calls, finish reason, then a usage-only chunk."""
    return [
        openai_chunk({"role": "assistant", "content": None}),
        openai_chunk({"content": "Checking "}),
        openai_chunk({"content": "both."}),
        openai_chunk(
            openai_call_delta(
                0, id="call_a", type="function", function={"name": "get_", "arguments": ""}
            )
        ),
        openai_chunk(openai_call_delta(0, function={"name": "weather"})),
        openai_chunk(openai_call_delta(0, function={"arguments": '{"ci'})),
        openai_chunk(openai_call_delta(0, function={"arguments": 'ty": "Paris"}'})),
        openai_chunk(
            openai_call_delta(1, id="call_b", type="function", function={"name": "get_weather"})
        ),
        openai_chunk(openai_call_delta(1, function={"arguments": '{"city": "Rome"}'})),
        openai_chunk({}, finish_reason="tool_calls"),
        openai_chunk(None, usage=openai_usage(80, 30, cached_tokens=16)),
    ]


async def test_stream_merges_fragmented_parallel_calls_and_reports_usage(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(openai_sse(fragmented_weather_stream()))
    chunks = await collect(make_model(), ask(tool_callbacks=(WEATHER,)))

    assert server.requests[0].body["stream"] is True
    assert server.requests[0].body["stream_options"] == {"include_usage": True}
    texts = [c.text for c in chunks if c.text]
    assert texts == ["Checking ", "both."]  # text is not held back
    call_chunks = [c for c in chunks if c.has_tool_calls()]
    assert len(call_chunks) == 1  # calls leave whole, each carrying its id
    merged = merge_chunks(chunks)
    message = merged.generations[0].message
    assert message.text == "Checking both."
    assert message.tool_calls == (
        ToolCall(id="call_a", name="get_weather", arguments='{"city": "Paris"}'),
        ToolCall(id="call_b", name="get_weather", arguments='{"city": "Rome"}'),
    )
    assert merged.generations[0].finish_reason == "tool_calls"
    assert merged.usage == Usage(
        prompt_tokens=80, completion_tokens=30, total_tokens=110, cache_read_tokens=16
    )
    assert chunks[-1].generations == () and chunks[-1].usage is not None


async def test_stream_quirks_of_compatible_servers(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    """Ollama/vLLM/Qwen/DeepSeek shapes in one stream: null content, every parallel call at
    index 0 with its own id, an id repeated on every delta, the name repeated after the
    arguments started, a call with no arguments at all, a delta without index, and no
    finish_reason (the calls are flushed when the stream ends)."""
    tools = (WEATHER, stub_tool("now"), stub_tool("math.factorial"))
    aliased = provider_safe_name("math.factorial")
    server.expect(
        openai_sse(
            [
                openai_chunk({"role": "assistant", "content": None}),
                openai_chunk(
                    {
                        "content": None,
                        **openai_call_delta(
                            0, id="a", function={"name": "get_weather", "arguments": '{"city":'}
                        ),
                    }
                ),
                openai_chunk(
                    openai_call_delta(
                        0, id="a", function={"name": "get_weather", "arguments": ' "Oslo"}'}
                    )
                ),
                openai_chunk(openai_call_delta(0, id="b", function={"name": "now"})),
                openai_chunk(
                    openai_call_delta(
                        None, id="c", function={"name": aliased, "arguments": '{"n": 5}'}
                    )
                ),
                openai_chunk(openai_call_delta(None, function={"arguments": ""})),
            ]
        )
    )
    chunks = await collect(make_model(), ask(tool_callbacks=tools))
    merged = merge_chunks(chunks)
    assert merged.generations[0].message.text is None
    assert [(c.id, c.name, c.arguments) for c in merged.generations[0].message.tool_calls] == [
        ("a", "get_weather", '{"city": "Oslo"}'),
        ("b", "now", "{}"),
        ("c", "math.factorial", '{"n": 5}'),
    ]


async def test_calls_without_index_or_id_are_not_merged_into_one(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    """Deltas with neither ``index`` nor ``id`` (Gemini-style indexless deltas from a server
    that gives no ids either) continue the last call, until one brings a name after that
    call's arguments: another tool's name, or the same tool's with new arguments after
    complete ones, starts another call. Two whole calls in one chunk are two calls too."""
    tools = (WEATHER, stub_tool("now"))

    def whole(name: str, arguments: str) -> dict[str, Any]:
        return {"function": {"name": name, "arguments": arguments}}

    server.expect(
        openai_sse(
            [
                openai_chunk({"tool_calls": [whole("get_weather", '{"city": "Oslo"}')]}),
                openai_chunk({"tool_calls": [whole("get_weather", '{"city": "Rome"}')]}),
                openai_chunk({"tool_calls": [whole("now", "{}"), whole("get_weather", "")]}),
                openai_chunk({"tool_calls": [{"function": {"arguments": '{"city": '}}]}),
                openai_chunk({"tool_calls": [whole("get_weather", '"Bern"}')]}),
                openai_chunk({}, finish_reason="stop"),
            ]
        )
    )
    merged = merge_chunks(await collect(make_model(), ask(tool_callbacks=tools)))
    calls = merged.generations[0].message.tool_calls
    assert [(c.name, c.arguments) for c in calls] == [
        ("get_weather", '{"city": "Oslo"}'),
        ("get_weather", '{"city": "Rome"}'),
        ("now", "{}"),
        ("get_weather", '{"city": "Bern"}'),  # the name repeated mid-arguments: the same call
    ]
    assert len({c.id for c in calls}) == 4


async def test_a_name_repeated_on_every_delta_after_an_empty_arguments_start_is_not_doubled(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    """The first delta is OpenAI's ``{"name": ..., "arguments": ""}``; some servers (llama.cpp
    before its fix, vLLM tool parsers, reportedly newer OpenAI models) then repeat the whole
    name on every delta: the empty ``arguments`` already marks the name complete."""
    server.expect(
        openai_sse(
            [
                openai_chunk(
                    openai_call_delta(
                        0,
                        id="call_a",
                        type="function",
                        function={"name": "get_weather", "arguments": ""},
                    )
                ),
                openai_chunk(
                    openai_call_delta(0, function={"name": "get_weather", "arguments": '{"city":'})
                ),
                openai_chunk(
                    openai_call_delta(0, function={"name": "get_weather", "arguments": ' "Oslo"}'})
                ),
                openai_chunk({}, finish_reason="tool_calls"),
            ]
        )
    )
    merged = merge_chunks(await collect(make_model(), ask(tool_callbacks=(WEATHER,))))
    assert merged.generations[0].message.tool_calls == (
        ToolCall(id="call_a", name="get_weather", arguments='{"city": "Oslo"}'),
    )


async def test_an_emoji_split_between_two_argument_deltas_is_whole_again(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    """A gateway that cuts deltas at UTF-16 code units (as openclaw's did) sends the halves of
    a surrogate pair as ``\\ud83d`` and ``\\ude00`` in two chunks; the joined arguments
    must hold the character, not two lone surrogates. Splits inside an escape of the
    arguments' own JSON text are just text and join back as they are."""
    server.expect(
        openai_sse(
            [
                openai_chunk(
                    openai_call_delta(
                        0,
                        id="call_a",
                        function={"name": "get_weather", "arguments": '{"city": "Z\\u00'},
                    )
                ),
                openai_chunk(openai_call_delta(0, function={"arguments": "fc \ud83d"})),
                openai_chunk(openai_call_delta(0, function={"arguments": '\ude00"}'})),
                openai_chunk({}, finish_reason="tool_calls"),
            ]
        )
    )
    merged = merge_chunks(await collect(make_model(), ask(tool_callbacks=(WEATHER,))))
    (call,) = merged.generations[0].message.tool_calls
    assert call.arguments == '{"city": "Z\\u00fc \U0001f600"}'
    assert json.loads(call.arguments) == {"city": "Zü \U0001f600"}


async def test_an_emoji_split_between_two_text_deltas_reaches_the_caller_whole(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    """As with arguments, for the text and reasoning the caller sees live: a high half ending
    a delta is held for the next one, and a half nothing completes is given as it came when
    the choice ends."""
    server.expect(
        openai_sse(
            [
                openai_chunk({"role": "assistant", "reasoning_content": "Think \ud83d"}),
                openai_chunk({"reasoning_content": "\ude00."}),
                openai_chunk({"content": "Smile \ud83d"}),
                openai_chunk({"content": "\ude00 and "}),
                openai_chunk({"content": "\ud83d"}),
                openai_chunk({}, finish_reason="stop"),
            ]
        )
    )
    chunks = await collect(make_model(), ask())
    assert [c.text for c in chunks if c.text] == ["Smile ", "\U0001f600 and ", "\ud83d"]
    reasoning = [p.text for c in chunks for g in c.generations for p in g.message.reasoning]
    assert reasoning == ["Think ", "\U0001f600."]
    assert merge_chunks(chunks).generations[0].finish_reason == "stop"


async def test_stream_without_ids_gets_unique_ids_and_keeps_broken_json_raw(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(
        openai_sse(
            [
                openai_chunk(
                    openai_call_delta(0, function={"name": "get_weather", "arguments": '{"city": '})
                ),
                openai_chunk(
                    openai_call_delta(
                        1, function={"name": "get_weather", "arguments": '{"city": "Rome"}'}
                    )
                ),
                openai_chunk({}, finish_reason="length"),
            ]
        )
    )
    merged = merge_chunks(await collect(make_model(), ask(tool_callbacks=(WEATHER,))))
    first, second = merged.generations[0].message.tool_calls
    assert first.arguments == '{"city":' and second.arguments == '{"city": "Rome"}'
    assert first.id != second.id and first.id.startswith("call_")
    assert merged.generations[0].finish_reason == "length"


async def test_streamed_ids_repeated_within_a_choice_are_made_unique_keeping_the_first(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(
        openai_sse(
            [
                openai_chunk(
                    openai_call_delta(
                        0, id="call_0", function={"name": "get_weather", "arguments": '{"city": '}
                    )
                ),
                openai_chunk(
                    openai_call_delta(
                        1, id="call_0", function={"name": "get_time", "arguments": "{}"}
                    )
                ),
                openai_chunk(openai_call_delta(0, function={"arguments": '"Paris"}'})),
                openai_chunk({}, finish_reason="tool_calls"),
            ]
        )
    )
    tools = (WEATHER, stub_tool("get_time", {"type": "object"}))
    merged = merge_chunks(await collect(make_model(), ask(tool_callbacks=tools)))
    calls = merged.generations[0].message.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_0", "get_weather", '{"city": "Paris"}'),
        ("call_0_2", "get_time", "{}"),
    ]


async def test_a_streamed_refusal_is_in_the_metadata_as_in_a_plain_response(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    refused = openai_completion(None)
    refused["choices"][0]["message"]["refusal"] = "I can't help with that."
    server.expect(
        Reply.json(refused),
        openai_sse(
            [
                openai_chunk({"role": "assistant", "content": None, "refusal": ""}),
                openai_chunk({"refusal": "I can't "}),
                openai_chunk({"refusal": "help with that."}),
                openai_chunk({}, finish_reason="stop"),
                openai_chunk(None, usage=openai_usage(9, 4)),
            ]
        ),
        # A server that never sends a finish_reason: the refusal comes with the stream's end.
        openai_sse([openai_chunk({"refusal": "No."})]),
    )
    model = make_model()
    plain = await model.acall(ask())
    streamed = merge_chunks(await collect(model, ask()))
    unfinished = merge_chunks(await collect(model, ask()))

    assert plain.generations[0].metadata["refusal"] == "I can't help with that."
    assert streamed.generations[0].metadata == plain.generations[0].metadata
    assert streamed.generations[0].message.text is None and streamed.usage is not None
    assert unfinished.generations[0].metadata == {"refusal": "No."}


async def test_arguments_sent_as_a_json_object_become_json_text(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    """llama.cpp's server (for a while by default, now behind ``--tool-args-object``) and
    Hugging Face TGI send ``function.arguments`` as a JSON object, not a string."""
    arguments = {"city": "Zürich"}
    server.expect(
        Reply.json(openai_completion(None, [openai_call("call_a", "get_weather", arguments)])),
        openai_sse(
            [
                openai_chunk(
                    openai_call_delta(
                        0, id="call_b", function={"name": "get_weather", "arguments": arguments}
                    )
                ),
                openai_chunk({}, finish_reason="tool_calls"),
            ]
        ),
    )
    model = make_model()
    plain = await model.acall(ask(tool_callbacks=(WEATHER,)))
    streamed = merge_chunks(await collect(model, ask(tool_callbacks=(WEATHER,))))

    assert plain.generations[0].message.tool_calls == (
        ToolCall(id="call_a", name="get_weather", arguments='{"city": "Zürich"}'),
    )
    assert streamed.generations[0].message.tool_calls == (
        ToolCall(id="call_b", name="get_weather", arguments='{"city": "Zürich"}'),
    )


async def test_stream_usage_can_be_switched_off_for_servers_that_reject_it(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(openai_sse([openai_chunk({"content": "hi"}, finish_reason="stop")]))
    chunks = await collect(make_model(stream_usage=False), ask())
    assert "stream_options" not in server.requests[0].body
    assert merge_chunks(chunks).text == "hi" and merge_chunks(chunks).usage is None


async def test_groq_usage_under_x_groq_is_reported_when_no_usage_chunk_comes(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    """Groq puts the stream's usage in ``x_groq.usage`` of the finishing chunk (and, asked
    with ``stream_options``, in a usage chunk too: then that one is the usage)."""
    groq_usage = {"queue_time": 0.07, "prompt_tokens": 23, "completion_tokens": 19}
    finishing = openai_chunk({}, finish_reason="stop")
    finishing["x_groq"] = {"id": "req_1", "usage": {**groq_usage, "total_tokens": 42}}
    server.expect(
        openai_sse([openai_chunk({"content": "hi"}), finishing]),
        openai_sse(
            [
                openai_chunk({"content": "hi"}),
                finishing,
                openai_chunk(None, usage=openai_usage(5, 6)),
            ]
        ),
    )
    model = make_model(stream_usage=False)
    chunks = await collect(model, ask())
    both = merge_chunks(await collect(model, ask()))

    assert merge_chunks(chunks).usage == Usage(
        prompt_tokens=23, completion_tokens=19, total_tokens=42
    )
    assert sum(1 for c in chunks if c.usage is not None) == 1
    assert both.usage == Usage(prompt_tokens=5, completion_tokens=6, total_tokens=11)


async def test_strict_stream_calls_leave_with_injected_nulls_dropped(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(
        openai_sse(
            [
                openai_chunk(
                    openai_call_delta(
                        0,
                        id="a",
                        function={"name": "get_weather", "arguments": '{"city": "Oslo", '},
                    )
                ),
                openai_chunk(openai_call_delta(0, function={"arguments": '"unit": null}'})),
                openai_chunk({}, finish_reason="tool_calls"),
            ]
        )
    )
    merged = merge_chunks(
        await collect(make_model(strict_tools=True), ask(tool_callbacks=(WEATHER,)))
    )
    assert merged.generations[0].message.tool_calls[0].arguments == '{"city": "Oslo"}'


# -- errors, retries, timeouts -----------------------------------------------------------------


async def test_a_4xx_is_a_provider_error_with_the_providers_message(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    error = {
        "error": {"message": "Invalid schema for function 'x'", "type": "invalid_request_error"}
    }
    server.expect(Reply.json(error, status=400))
    with pytest.raises(ProviderError) as raised:
        await make_model(max_retries=3).acall(ask())
    assert str(raised.value) == "openai: HTTP 400: Invalid schema for function 'x'"
    assert raised.value.status_code == 400 and not raised.value.retryable
    assert isinstance(raised.value.__cause__, openai.BadRequestError)
    assert len(server.requests) == 1  # 4xx is not retried


CONTEXT_OVERFLOWS = {
    "openai": {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 130017 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
    "vllm": {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "6616 tokens (568 in the messages, 6048 in the completion).",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
    "llama.cpp": {
        "error": {
            "code": 400,
            "message": "request (9412 tokens) exceeds the available context size (8192 tokens), "
            "try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 9412,
            "n_ctx": 8192,
        }
    },
    "dashscope": {
        "error": {
            "code": "invalid_parameter_error",
            "message": "<400> InternalError.Algo.InvalidParameter: Range of input length should "
            "be [1, 129024]",
            "param": None,
            "type": "invalid_request_error",
        }
    },
}


@pytest.mark.parametrize("server_kind", list(CONTEXT_OVERFLOWS))
async def test_a_request_over_the_context_window_is_a_context_length_error(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel], server_kind: str
) -> None:
    """Each server words it its own way; all of them are one error a caller can catch to
    shorten the history, and not worth retrying as it is."""
    server.expect(Reply.json(CONTEXT_OVERFLOWS[server_kind], status=400))
    with pytest.raises(ProviderContextLengthError) as raised:
        await make_model(max_retries=2).acall(ask())
    error = raised.value
    assert error.status_code == 400 and not error.retryable
    assert str(error).startswith("openai: HTTP 400: ") and error.provider_message in str(error)
    assert len(server.requests) == 1


async def test_the_providers_error_code_is_kept_and_an_exhausted_quota_is_not_retryable(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    quota = {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing "
            "details.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
    limited = {"error": {"message": "Rate limit reached", "type": "requests", "code": None}}
    server.expect(Reply.json(quota, status=429), Reply.json(limited, status=429))
    with pytest.raises(ProviderError) as raised:
        await make_model().acall(ask())
    assert raised.value.code == "insufficient_quota" and not raised.value.retryable
    with pytest.raises(ProviderError) as raised:
        await make_model().acall(ask())
    assert raised.value.code == "requests" and raised.value.retryable  # no code: its type


async def test_an_error_event_mid_stream_is_a_provider_response_error_after_the_text(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    """OpenAI (and vLLM, SGLang) report a failure after the stream started as a ``data:``
    line holding ``error``; the SDK raises a bare ``APIError`` with it."""
    failure = {"error": {"message": "The server had an error", "type": "server_error"}}
    server.expect(openai_sse([openai_chunk({"content": "Par"}), failure]))
    received: list[str | None] = []
    with pytest.raises(ProviderResponseError) as raised:
        async for chunk in make_model().stream(ask()):
            received.append(chunk.text)
    assert received == ["Par"]
    error = raised.value
    assert str(error) == "openai: response failed: server_error: The server had an error"
    assert error.code == "server_error" and error.retryable


async def test_429_is_retried_after_the_retry_after_delay(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    limited = {"error": {"message": "Rate limit reached", "type": "requests"}}
    server.expect(
        Reply.json(limited, status=429, headers={"retry-after": "0.3"}),
        Reply.json(openai_completion("done")),
    )
    response = await make_model(max_retries=2).acall(ask())
    assert response.text == "done"
    first, second = server.requests
    assert second.received_at - first.received_at >= 0.3
    assert second.headers["x-stainless-retry-count"] == "1"


async def test_5xx_retries_are_bounded(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    failing = Reply.json(
        {"error": {"message": "upstream overloaded"}}, status=503, headers={"retry-after-ms": "10"}
    )
    server.expect(failing, failing, failing, Reply.json(openai_completion("never reached")))
    with pytest.raises(ProviderError, match="HTTP 503: upstream overloaded") as raised:
        await make_model(max_retries=2).acall(ask())
    assert raised.value.retryable
    assert len(server.requests) == 3 and server.pending == 1


async def test_500_is_retried_with_the_sdks_own_backoff(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(
        Reply.json({"error": {"message": "boom"}}, status=500), Reply.json(openai_completion("ok"))
    )
    assert (await make_model(max_retries=1).acall(ask())).text == "ok"
    first, second = server.requests
    assert 0.3 <= second.received_at - first.received_at < 2  # 0.5 s minus up to 25 % jitter


async def test_a_slow_server_raises_a_timeout(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(Reply.json(openai_completion("late"), delay=1.0))
    with pytest.raises(ProviderTimeoutError, match="openai: request timed out"):
        await make_model(timeout=0.2).acall(ask())


async def test_a_connection_dropped_mid_stream_is_a_provider_error_after_the_text_so_far(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(
        openai_sse(
            [
                openai_chunk({"content": "Par"}),
                openai_chunk({"content": "is"}),
                openai_chunk({"content": "!"}),
            ],
            drop_after=2,
        )
    )
    received: list[str] = []
    with pytest.raises(ProviderError, match="connection lost after 2 stream chunks") as raised:
        async for chunk in make_model().stream(ask()):
            received.append(chunk.text)
    assert received == ["Par", "is"]
    assert raised.value.status_code is None and raised.value.retryable


async def test_a_stream_that_goes_quiet_raises_a_timeout(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    chunks = [openai_chunk({"content": "Hel"}), openai_chunk({"content": "lo"})]
    server.expect(openai_sse(chunks, stall_after=(1, 5.0)))
    # The first chunks must beat the read timeout even on a slow, busy machine (a fresh CI
    # box once took over 0.3 s); the stall after them must not.
    received: list[str] = []
    with pytest.raises(ProviderTimeoutError):
        async for chunk in make_model(timeout=1.5).stream(ask()):
            received.append(chunk.text)
    assert received == ["Hel"]


async def test_an_injected_client_is_used_and_left_open(server: ProviderServer) -> None:
    client = openai.AsyncOpenAI(api_key="sk-injected", base_url=f"{server.url}/v1", max_retries=0)
    model = OpenAIChatModel("gpt-test", client=client)
    server.expect(Reply.json(openai_completion("one")), Reply.json(openai_completion("two")))
    assert (await model.acall(ask())).text == "one"
    await model.aclose()
    again = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}]
    )
    assert again.choices[0].message.content == "two"
    assert server.requests[0].headers["authorization"] == "Bearer sk-injected"
    await client.close()


async def test_an_error_status_on_a_stream_request_is_a_provider_error(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(Reply.json({"error": {"message": "model not found"}}, status=404))
    with pytest.raises(ProviderError, match="HTTP 404: model not found"):
        await collect(make_model(), ask())


def test_constructor_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="needs a model name"):
        OpenAIChatModel(" ", api_key="k")
    with pytest.raises(ValueError, match="max_retries must be >= 0"):
        OpenAIChatModel("m", api_key="k", max_retries=-1)
    with pytest.raises(ValueError, match="timeout must be a positive"):
        OpenAIChatModel("m", api_key="k", timeout=0)


# -- property: any fragmentation of any calls merges back to exactly those calls --------------

call_specs = st.lists(
    st.tuples(
        st.sampled_from(["get_weather", "math.factorial", "查询天气", "x" * 70]),
        st.text(max_size=30),  # arguments, valid JSON or not
    ),
    min_size=1,
    max_size=4,
)


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


FRAGMENT_TOOLS = tuple(
    stub_tool(n) for n in ("get_weather", "math.factorial", "查询天气", "x" * 70)
)


@functools.cache
def fragment_model() -> OpenAIChatModel:
    # Never sends anything: only its request building is used.
    return OpenAIChatModel("m", api_key="k", base_url="http://127.0.0.1:9/v1")


@settings(deadline=None, max_examples=50)
@given(call_specs, st.lists(st.integers(0, 70), max_size=4), st.booleans(), st.booleans())
def test_any_fragmentation_of_the_deltas_merges_back_to_the_calls(
    calls: list[tuple[str, str]], cuts: list[int], repeat_ids: bool, with_finish: bool
) -> None:
    request = fragment_model()._request(ask(tool_callbacks=FRAGMENT_TOOLS))
    raw: list[dict[str, Any]] = []
    for index, (name, arguments) in enumerate(calls):
        call_id = f"call_{index}"
        alias = provider_safe_name(name)
        for number, piece in enumerate(split(alias, cuts)):
            fragment: dict[str, Any] = {"index": index, "function": {"name": piece}}
            if number == 0 or repeat_ids:
                fragment["id"] = call_id
            raw.append(openai_chunk({"tool_calls": [fragment]}))
        for piece in split(arguments, cuts):
            fragment = {"index": index, "function": {"arguments": piece}}
            if repeat_ids:
                fragment["id"] = call_id
            raw.append(openai_chunk({"tool_calls": [fragment]}))
    if with_finish:
        raw.append(openai_chunk({}, finish_reason="tool_calls"))
    state = _StreamState(request)
    chunks = [c for c in (state.add(ChatCompletionChunk.model_validate(r)) for r in raw) if c]
    final = state.finish()
    merged = merge_chunks([*chunks, *([final] if final else [])])
    expected = [
        (f"call_{i}", name, arguments.strip() or "{}") for i, (name, arguments) in enumerate(calls)
    ]
    got = [(c.id, c.name, c.arguments) for c in merged.generations[0].message.tool_calls]
    assert got == expected
