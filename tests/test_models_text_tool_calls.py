"""Tool calls a server left in the text (OpenAIChatModel(text_tool_calls=True)): recovered when
the whole text is calls to offered tools, left alone otherwise, in a stream too."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provider_models import ask, collect, model_maker
from provider_payloads import openai_chunk, openai_completion, openai_usage, stub_tool
from provider_server import ProviderServer, Reply, openai_sse, shared_server
from tooluse.models import OpenAIChatModel
from tooluse.models._text_tool_calls import text_tool_calls
from tooluse.streaming import merge_chunks

OFFERED = frozenset({"get_weather", "get_order_status"})
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
WEATHER = stub_tool("get_weather", SCHEMA, "Current weather in a city")
FENCED = '```json\n{"name": "get_weather", "arguments": {"city": "北京"}}\n```'


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        (FENCED, [("get_weather", '{"city": "北京"}')]),
        (
            '  {"name": "get_weather", "arguments": {"city": "Paris"}}\n',
            [("get_weather", '{"city": "Paris"}')],
        ),
        # arguments as JSON text, as the API sends them; no arguments at all
        (
            '```\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}\n```',
            [("get_weather", '{"city": "Oslo"}')],
        ),
        ('{"name": "get_order_status"}', [("get_order_status", "{}")]),
        # two calls: two blocks, or one list
        (
            f"{FENCED}\n\n```json\n" + '{"name": "get_order_status", "arguments": {}}\n```',
            [
                ("get_weather", '{"city": "北京"}'),
                ("get_order_status", "{}"),
            ],
        ),
        (
            '[{"name": "get_weather", "arguments": {"city": "A"}}, {"name": "get_order_status"}]',
            [
                ("get_weather", '{"city": "A"}'),
                ("get_order_status", "{}"),
            ],
        ),
    ],
)
def test_text_that_is_only_calls_gives_the_calls(text: str, calls: list[tuple[str, str]]) -> None:
    assert text_tool_calls(text, OFFERED) == calls


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "The weather in Paris is sunny.",
        f"Here is the call:\n{FENCED}",  # words around the call: an answer, not a call
        f"{FENCED}\nThat is what I would call.",
        '```json\n{"name": "delete_everything", "arguments": {}}\n```',  # not offered
        '```json\n{"name": "get_weather", "arguments": {"city": "A"}}',  # fence never closed
        '{"name": "get_weather", "arguments": ["Paris"]}',  # arguments not an object
        '{"name": "get_weather", "arguments": {}, "reason": "asked"}',  # another key
        '{"city": "Paris"}',
        "```python\nprint('hi')\n```",
        "[]",
        '{"name": "get_weather", "arguments": "not json"}',
    ],
)
def test_anything_else_is_the_answer(text: str) -> None:
    assert text_tool_calls(text, OFFERED) is None


@given(st.text())
def test_any_text_gives_calls_to_offered_tools_or_none(text: str) -> None:
    calls = text_tool_calls(text, OFFERED)
    assert calls is None or (
        calls
        and all(name in OFFERED and isinstance(json.loads(args), dict) for name, args in calls)
    )


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4), st.booleans())
def test_any_arguments_object_comes_back_as_sent(arguments: dict[str, Any], fenced: bool) -> None:
    call = json.dumps({"name": "get_weather", "arguments": arguments}, ensure_ascii=False)
    text = f"```json\n{call}\n```" if fenced else call
    assert text_tool_calls(text, OFFERED) == [
        ("get_weather", json.dumps(arguments, ensure_ascii=False))
    ]


@given(JSON_VALUES)
def test_json_that_is_not_a_call_is_the_answer(value: Any) -> None:
    assert text_tool_calls(json.dumps(value), OFFERED) is None


@given(st.text(min_size=1).filter(lambda t: not t.isspace()), st.sampled_from([FENCED]))
def test_a_call_cut_short_or_padded_with_words_is_the_answer(words: str, call: str) -> None:
    assert text_tool_calls(call[: len(call) // 2], OFFERED) is None
    padded = text_tool_calls(f"{words} {call}", OFFERED)
    assert padded is None or words.lstrip().startswith(("{", "[", "`"))


# -- the adapter --------------------------------------------------------------------------------


@pytest.fixture
def server() -> ProviderServer:
    return shared_server()


@pytest.fixture
async def make_model(server: ProviderServer) -> AsyncIterator[Callable[..., OpenAIChatModel]]:
    async with model_maker(
        OpenAIChatModel, "local-test", base_url=f"{server.url}/v1", api_key="k", max_retries=0
    ) as make:
        yield make


async def test_a_call_left_in_the_text_comes_back_as_a_call(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(Reply.json(openai_completion(FENCED)), Reply.json(openai_completion(FENCED)))
    recovered = await make_model(text_tool_calls=True).acall(ask(tool_callbacks=(WEATHER,)))
    generation = recovered.generations[0]
    assert generation.message.text is None and generation.finish_reason == "tool_calls"
    [call] = generation.message.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "北京"})
    assert call.id  # results are matched by id
    plain = await make_model().acall(ask(tool_callbacks=(WEATHER,)))  # the option is off
    assert plain.generations[0].message.text == FENCED
    assert not plain.generations[0].message.tool_calls


async def test_without_tools_offered_the_text_stays(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(Reply.json(openai_completion(FENCED)))
    response = await make_model(text_tool_calls=True).acall(ask())
    assert response.generations[0].message.text == FENCED


def _text_stream(pieces: list[str]) -> Reply:
    return openai_sse(
        [
            openai_chunk({"role": "assistant", "content": ""}),
            *(openai_chunk({"content": piece}) for piece in pieces),
            openai_chunk({}, finish_reason="stop"),
            openai_chunk(None, usage=openai_usage(10, 5)),
        ]
    )


async def test_a_streamed_call_in_the_text_comes_back_as_one_whole_call(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    pieces = [FENCED[i : i + 7] for i in range(0, len(FENCED), 7)]
    server.expect(_text_stream(pieces))
    chunks = await collect(make_model(text_tool_calls=True), ask(tool_callbacks=(WEATHER,)))
    assert not any(g.message.text for chunk in chunks for g in chunk.generations)
    merged = merge_chunks(chunks)
    [call] = merged.generations[0].message.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "北京"})
    assert merged.usage is not None and merged.usage.total_tokens == 15


async def test_a_streamed_answer_is_not_held_back(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    pieces = ["The ", "weather ", "is ", "sunny."]
    server.expect(_text_stream(pieces))
    chunks = await collect(make_model(text_tool_calls=True), ask(tool_callbacks=(WEATHER,)))
    texts = [g.message.text for chunk in chunks for g in chunk.generations if g.message.text]
    assert texts == pieces  # piece by piece, as they came
    assert not merge_chunks(chunks).generations[0].message.tool_calls


async def test_a_streamed_json_answer_that_is_no_call_is_given_whole(
    server: ProviderServer, make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.expect(_text_stream(['{"city": ', '"Paris"}']))
    chunks = await collect(make_model(text_tool_calls=True), ask(tool_callbacks=(WEATHER,)))
    merged = merge_chunks(chunks)
    assert merged.generations[0].message.text == '{"city": "Paris"}'
    assert not merged.generations[0].message.tool_calls
