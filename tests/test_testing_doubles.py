"""The test doubles: ScriptedModel, FunctionModel, TestModel, and the tool-call assertions."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import AsyncIterator, Iterator

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _loop_tools import RecordingTool
from tooluse import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    Generation,
    Prompt,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from tooluse.models import ChatModel
from tooluse.streaming import merge_chunks
from tooluse.testing import (
    FunctionModel,
    ScriptedModel,
    ScriptExhaustedError,
    TestModel,
    assert_tool_called,
    assert_tool_not_called,
    called_tools,
    chat_response,
    tool_call,
)


def prompt(text: str = "hi", *tools: RecordingTool) -> Prompt:
    return Prompt([UserMessage(text=text)], ChatOptions(tool_callbacks=tools))


async def collect(stream: AsyncIterator[ChatResponse]) -> list[ChatResponse]:
    return [chunk async for chunk in stream]


# -- ScriptedModel ---------------------------------------------------------------------------


def test_scripted_model_replays_in_order_and_records_requests() -> None:
    first = chat_response("one", usage=Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3))
    model = ScriptedModel([first, "two"])
    assert isinstance(model, ChatModel)
    assert model.call(prompt("a")) is first
    assert model.call(prompt("b")).text == "two"
    assert [p.messages[0] for p in model.requests] == [
        UserMessage(text="a"),
        UserMessage(text="b"),
    ]
    assert model.remaining == 0


def test_scripted_model_short_forms_fill_in_call_ids() -> None:
    model = ScriptedModel(
        [
            tool_call("weather", {"city": "Paris"}),
            [tool_call("a"), tool_call("b", '{"x": 1}', id="mine")],
            "done",
        ]
    )
    one = model.call(prompt()).generations[0]
    assert one.message.tool_calls == (
        ToolCall(id="call_0_0", name="weather", arguments='{"city": "Paris"}'),
    )
    assert one.finish_reason == "tool_calls"
    two = model.call(prompt()).generations[0].message.tool_calls
    assert [(c.id, c.name, c.arguments) for c in two] == [
        ("call_1_0", "a", "{}"),
        ("mine", "b", '{"x": 1}'),
    ]
    three = model.call(prompt()).generations[0]
    assert (three.message.text, three.finish_reason) == ("done", "stop")


async def test_calls_without_ids_inside_a_chat_response_get_ids_so_they_stream_apart() -> None:
    response = ChatResponse(
        generations=(
            chat_response(tool_calls=[tool_call("a"), tool_call("b", id="mine")]).generations[0],
            chat_response(tool_calls=[tool_call("c")]).generations[0],
        )
    )
    model = ScriptedModel([response, response], chunk_size=1)
    called = await model.acall(prompt())
    ids = [[c.id for c in g.message.tool_calls] for g in called.generations]
    assert ids == [["call_0_0", "mine"], ["call_0_2"]]
    streamed = merge_chunks(await collect(model.stream(prompt())))
    names = [[(c.id, c.name) for c in g.message.tool_calls] for g in streamed.generations]
    assert names == [[("call_1_0", "a"), ("mine", "b")], [("call_1_2", "c")]]
    complete = chat_response(tool_calls=[tool_call("x", id="x1")])
    assert await ScriptedModel([complete]).acall(prompt()) is complete  # nothing to fill: as given


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (42, "got a int"),
        ([tool_call("a"), "text"], "the sequence holds a str"),
        ([], "An empty sequence is not a response"),
    ],
)
def test_scripted_model_rejects_what_is_not_a_response(item: object, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        ScriptedModel([item])  # type: ignore[list-item]


async def test_scripted_model_running_out_is_a_clear_error() -> None:
    model = ScriptedModel(["only"])
    await model.acall(prompt())
    with pytest.raises(
        ScriptExhaustedError, match=r"response #2 but only 1 were scripted.*'again'"
    ):
        await model.acall(prompt("again"))
    with pytest.raises(ScriptExhaustedError):
        await collect(model.stream(prompt()))
    assert len(model.requests) == 3  # failed requests are recorded too


async def test_scripted_stream_splits_text_and_arguments_by_the_fragment_rule() -> None:
    usage = Usage(prompt_tokens=5, completion_tokens=7, total_tokens=12)
    response = chat_response(
        "Let me look that up.",
        [
            ToolCall(id="c1", name="weather", arguments='{"city": "Paris", "days": 3}'),
            ToolCall(id="c2", name="time", arguments=""),
        ],
        usage=usage,
    )
    model = ScriptedModel([response], chunk_size=4)
    chunks = await collect(model.stream(prompt()))
    fragments = [c for chunk in chunks for c in chunk.generations[0].message.tool_calls]
    assert fragments[0] == ToolCall(id="c1", name="weather", arguments='{"ci')
    assert len(fragments) == 8  # 28 characters of arguments in pieces of 4, then c2
    assert all(f.id == "" and f.name == "" for f in fragments[1:7])
    assert fragments[7] == ToolCall(id="c2", name="time", arguments="")
    texts = [chunk.generations[0].message.text for chunk in chunks[:5]]
    assert texts == ["Let ", "me l", "ook ", "that", " up."]
    assert [chunk.usage for chunk in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1].usage == usage
    assert chunks[-1].generations[0].finish_reason == "tool_calls"
    merged = merge_chunks(chunks).generations[0].message
    assert merged.text == "Let me look that up."
    assert [c.arguments for c in merged.tool_calls] == ['{"city": "Paris", "days": 3}', "{}"]


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.text(max_size=30) | st.none(), min_size=1, max_size=3),
    arguments=st.lists(st.text(max_size=40), max_size=3),
    size=st.integers(min_value=1, max_value=9),
)
def test_streamed_chunks_merge_back_into_the_response(
    texts: list[str | None], arguments: list[str], size: int
) -> None:
    calls = tuple(
        ToolCall(id=f"id{i}", name=f"tool{i}", arguments=text) for i, text in enumerate(arguments)
    )
    generations = tuple(
        Generation(
            message=AssistantMessage(text=text or None, tool_calls=calls if i == 0 else ()),
            metadata={"finish_reason": f"reason{i}"},
        )
        for i, text in enumerate(texts)
    )
    response = ChatResponse(
        generations=generations,
        usage=Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2),
        metadata={"model": "m"},
    )
    chunks = asyncio.run(collect(ScriptedModel([response], chunk_size=size).stream(prompt())))
    merged = merge_chunks(chunks)
    assert merged.usage == response.usage and merged.metadata == response.metadata
    for original, back in zip(response.generations, merged.generations, strict=True):
        assert back.message.text == original.message.text
        assert back.metadata == original.metadata
        # The aggregator trims arguments and gives a call with none "{}".
        assert [
            (c.id, c.name, c.arguments.strip() or "{}") for c in original.message.tool_calls
        ] == [(c.id, c.name, c.arguments) for c in back.message.tool_calls]


@pytest.mark.parametrize("chunk_size", [0, -3, True, 2.5])
def test_chunk_size_must_be_a_positive_int_for_every_double(chunk_size: object) -> None:
    for make in (
        lambda: ScriptedModel([], chunk_size=chunk_size),  # type: ignore[arg-type]
        lambda: FunctionModel(lambda prompt: "x", chunk_size=chunk_size),  # type: ignore[arg-type]
        lambda: TestModel(chunk_size=chunk_size),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError, match="chunk_size must be at least 1 character"):
            make()


# -- FunctionModel ---------------------------------------------------------------------------


async def test_function_model_takes_sync_and_async_functions() -> None:
    def sync_fn(p: Prompt) -> str:
        return f"echo {p.messages[-1].text}"  # type: ignore[union-attr]

    async def async_fn(p: Prompt) -> ToolCall:
        await asyncio.sleep(0)
        return tool_call("lookup", {"q": p.messages[-1].text})  # type: ignore[union-attr]

    sync_model = FunctionModel(sync_fn)
    assert (await sync_model.acall(prompt("x"))).text == "echo x"
    async_model = FunctionModel(async_fn)
    call = (await async_model.acall(prompt("z"))).generations[0].message.tool_calls[0]
    assert (call.id, call.name, json.loads(call.arguments)) == ("call_0_0", "lookup", {"q": "z"})
    assert len(async_model.requests) == 1 and len(async_model.responses) == 1


async def test_function_model_keeps_the_last_requests_it_is_told_to() -> None:
    model = FunctionModel(lambda p: tool_call("lookup", {}), keep=2)
    for text in ("a", "b", "c"):
        await model.acall(prompt(text))
    assert [p.messages[-1].text for p in model.requests] == ["b", "c"]  # type: ignore[union-attr]
    assert len(model.responses) == 2 and model.request_count == 3
    # the call ids still count every request, not the kept ones
    assert model.responses[-1].generations[0].message.tool_calls[0].id == "call_2_0"
    silent = FunctionModel(lambda p: "x", keep=0)
    chunks = [chunk async for chunk in silent.stream(prompt())]
    assert chunks and silent.requests == [] and silent.responses == []
    assert silent.request_count == 1
    with pytest.raises(ValueError, match="keep must be a number of requests"):
        FunctionModel(lambda p: "x", keep=-1)


async def test_function_model_sync_call_of_async_fn_inside_a_loop_points_to_acall() -> None:
    async def fn(p: Prompt) -> str:
        return "x"

    with pytest.raises(RuntimeError, match=r"cannot run inside a running event loop.*acall"):
        FunctionModel(fn).call(prompt())


def test_function_model_sync_call_outside_a_loop() -> None:
    async def fn(p: Prompt) -> str:
        return "from async"

    def sync_fn(p: Prompt) -> str:
        return f"echo {p.messages[-1].text}"  # type: ignore[union-attr]

    assert FunctionModel(fn).call(prompt()).text == "from async"
    assert FunctionModel(sync_fn).call(prompt("y")).text == "echo y"


async def test_function_model_streams_chunks_from_stream_fn_or_by_cutting() -> None:
    def sync_chunks(p: Prompt) -> Iterator[str]:
        yield "a"
        yield "b"

    async def async_chunks(p: Prompt) -> AsyncIterator[str]:
        yield "c"

    cut = await collect(FunctionModel(lambda p: "abcdef", chunk_size=2).stream(prompt()))
    assert [c.text for c in cut] == ["ab", "cd", "ef"]
    given_sync = FunctionModel(lambda p: "unused", stream_fn=sync_chunks)
    assert [c.text for c in await collect(given_sync.stream(prompt()))] == ["a", "b"]
    given_async = FunctionModel(lambda p: "unused", stream_fn=async_chunks)
    assert [c.text for c in await collect(given_async.stream(prompt()))] == ["c"]
    assert len(given_async.requests) == 1


def test_function_model_rejects_non_callables() -> None:
    with pytest.raises(TypeError, match="needs a callable"):
        FunctionModel("not a function")  # type: ignore[arg-type]


# -- TestModel -------------------------------------------------------------------------------

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 3},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "date": {"type": "string", "format": "date"},
        "zip": {"type": "string", "pattern": r"^\d{5}$"},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}


def test_test_model_calls_each_tool_once_with_valid_arguments_then_summarises() -> None:
    weather = RecordingTool("weather", lambda a, c: '{"temp": 21}', schema=WEATHER_SCHEMA)
    clock = RecordingTool("clock", lambda a, c: "noon")
    model = TestModel()
    first = model.call(prompt("go", weather, clock))
    calls = first.generations[0].message.tool_calls
    assert [c.name for c in calls] == ["weather", "clock"]
    arguments = json.loads(calls[0].arguments)
    jsonschema.Draft202012Validator(
        WEATHER_SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    ).validate(arguments)
    assert set(arguments) == set(WEATHER_SCHEMA["properties"])  # type: ignore[arg-type]
    results = ToolResponseMessage(
        responses=(
            ToolResponse(id=calls[0].id, name="weather", data='{"temp": 21}'),
            ToolResponse(id=calls[1].id, name="clock", data="noon"),
        )
    )
    follow_up = Prompt(
        [UserMessage(text="go"), first.generations[0].message, results],
        ChatOptions(tool_callbacks=(weather, clock)),
    )
    answer = model.call(follow_up)
    assert not answer.has_tool_calls()
    assert json.loads(answer.text) == {"weather": {"temp": 21}, "clock": "noon"}
    # A new user message starts a new turn: the tools are called again.
    again = Prompt(
        [*follow_up.messages, answer.generations[0].message, UserMessage(text="more")],
        follow_up.options,
    )
    assert [c.name for c in model.call(again).generations[0].message.tool_calls] == [
        "weather",
        "clock",
    ]


async def test_test_model_call_tools_and_final_text_are_configurable() -> None:
    weather, clock = RecordingTool("weather"), RecordingTool("clock")
    model = TestModel(call_tools=["clock", "never_offered"], final_text="All good.")
    calls = (await model.acall(prompt("go", weather, clock))).generations[0].message.tool_calls
    assert [c.name for c in calls] == ["clock"]
    without_tools = await collect(TestModel(final_text="Fine.").stream(prompt("go")))
    assert merge_chunks(without_tools).text == "Fine."
    assert (await TestModel().acall(prompt("go"))).text == "success (no tool calls)"
    with pytest.raises(ValueError, match='takes "all" or a collection'):
        TestModel(call_tools="some")


def test_test_model_warns_when_none_of_its_call_tools_was_offered() -> None:
    weather = RecordingTool("weather")
    with pytest.warns(UserWarning, match=r"call_tools=\['wether'\].*offered: \['weather'\]"):
        answer = TestModel(call_tools=["wether"]).call(prompt("go", weather))
    assert answer.text == "success (no tool calls)"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TestModel(call_tools=["wether"]).call(prompt("go"))  # no tools offered: nothing to miss
        model = TestModel(call_tools=["weather", "clock"])
        first = model.call(prompt("go", weather))
        follow_up = Prompt(
            [
                UserMessage(text="go"),
                first.generations[0].message,
                ToolResponseMessage(
                    responses=(
                        ToolResponse(
                            id=first.generations[0].message.tool_calls[0].id,
                            name="weather",
                            data="sun",
                        ),
                    )
                ),
            ],
            prompt("go", weather).options,
        )
        assert model.call(follow_up).text == '{"weather": "sun"}'  # a named tool was called


# -- assertions ------------------------------------------------------------------------------


def test_assert_tool_called_reads_test_doubles_and_histories() -> None:
    model = ScriptedModel(
        [[tool_call("weather", {"city": "Paris"}), tool_call("weather", {"city": "Rome"})], "ok"]
    )
    model.call(prompt())
    model.call(prompt())
    assert len(assert_tool_called(model, "weather")) == 2
    assert_tool_called(model, "weather", {"city": "Rome"}, times=1)
    assert_tool_not_called(model, "clock")
    history = [UserMessage(text="q"), model.responses[0].generations[0].message]
    assert [c.name for c in called_tools(history)] == ["weather", "weather"]
    with pytest.raises(
        AssertionError,
        match=r"Expected a call to tool 'weather' with arguments "
        r"\{'city': 'Oslo'\}.*weather\(\{\"city\": \"Paris\"\}\)",
    ):
        assert_tool_called(history, "weather", {"city": "Oslo"})
    with pytest.raises(AssertionError, match="Expected 3 call"):
        assert_tool_called(model, "weather", times=3)
    with pytest.raises(AssertionError, match="found 2"):
        assert_tool_not_called(model, "weather")
    with pytest.raises(AssertionError, match="no tool was called"):
        assert_tool_called([], "weather")
    with pytest.raises(TypeError, match="called_tools takes"):
        called_tools(42)  # type: ignore[arg-type]
