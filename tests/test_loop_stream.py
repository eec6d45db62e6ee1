"""The tool loop over a stream: tool rounds run, tool-call chunks stay hidden, fragments are
merged, usage is stamped, and the stream never ends while tool calls are pending."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _loop_tools import HookRecorder, RecordingTool
from tooluse import (
    AssistantMessage,
    ChatClient,
    ChatResponse,
    Generation,
    Prompt,
    Reasoning,
    ToolCall,
    ToolCallingAdvisor,
    ToolCallingManager,
    Usage,
)
from tooluse.client import StreamResponse
from tooluse.streaming import merge_chunks
from tooluse.testing import FunctionModel, ScriptedModel, chat_response, tool_call


def usage(prompt: int, completion: int, total: int) -> Usage:
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)


async def chunks_of(stream: StreamResponse) -> list[ChatResponse]:
    return [chunk async for chunk in stream]


async def test_a_streamed_tool_round_runs_the_tool_and_hides_its_chunks() -> None:
    weather = RecordingTool("weather", lambda a, c: f"sunny in {a['city']}")
    model = ScriptedModel(
        [tool_call("weather", {"city": "Paris, France"}), "It is sunny in Paris."], chunk_size=1
    )
    stream = ChatClient(model, tools=[weather]).prompt("Weather?").stream()
    chunks = await chunks_of(stream)
    assert all(not c.has_tool_calls() for c in chunks)
    assert "".join(c.text for c in chunks) == "It is sunny in Paris."
    # Arguments arrived one character per chunk and were merged before the call.
    assert [args for args, _ in weather.calls] == [{"city": "Paris, France"}]
    assert len(model.requests) == 2
    assert stream.chat_response().text == "It is sunny in Paris."


async def test_text_before_the_tool_calls_does_not_end_the_stream() -> None:
    model = ScriptedModel(
        [chat_response("Let me check.", [tool_call("t", id="a")]), "Checked: all fine."]
    )
    client = ChatClient(model, tools=[RecordingTool("t")])
    texts = [text async for text in client.prompt("go").stream().content()]
    assert "".join(texts) == "Let me check.Checked: all fine."
    assert len(model.requests) == 2


async def test_a_chunk_with_text_and_a_tool_fragment_keeps_its_text() -> None:
    mixed = ChatResponse(
        generations=(
            Generation(
                message=AssistantMessage(
                    text="Looking", tool_calls=(ToolCall(id="a", name="t", arguments="{}"),)
                )
            ),
        )
    )

    def stream_fn(prompt: Prompt) -> list[ChatResponse | str]:
        return [mixed] if len(prompt.messages) == 1 else ["done"]

    model = FunctionModel(lambda p: "unused", stream_fn=stream_fn)
    chunks = await chunks_of(ChatClient(model, tools=[RecordingTool("t")]).prompt("go").stream())
    assert [(c.text, c.has_tool_calls()) for c in chunks] == [("Looking", False), ("done", False)]


async def test_usage_is_summed_onto_the_last_round_chunks() -> None:
    model = ScriptedModel(
        [
            chat_response(tool_calls=[tool_call("t", id="a")], usage=usage(10, 20, 30)),
            chat_response("done", usage=usage(1, 2, 3)),
        ]
    )
    chunks = await chunks_of(ChatClient(model, tools=[RecordingTool("t")]).prompt("go").stream())
    with_usage = [c.usage for c in chunks if c.usage is not None]
    assert with_usage == [usage(11, 22, 33)]
    assert chunks[-1].usage == usage(11, 22, 33)


async def test_a_last_round_without_usage_gets_a_trailing_usage_chunk() -> None:
    model = ScriptedModel(
        [chat_response(tool_calls=[tool_call("t", id="a")], usage=usage(10, 20, 30)), "done"]
    )
    chunks = await chunks_of(ChatClient(model, tools=[RecordingTool("t")]).prompt("go").stream())
    assert chunks[-1].generations == () and chunks[-1].usage == usage(10, 20, 30)
    assert all(c.usage is None for c in chunks[:-1])


async def test_a_stream_with_no_usage_anywhere_gets_no_usage_chunk() -> None:
    chunks = await chunks_of(ChatClient(ScriptedModel(["hello"])).prompt("go").stream())
    assert [c.text for c in chunks] == ["hello"]


async def test_return_direct_streams_one_final_chunk() -> None:
    lookup = RecordingTool("lookup", lambda a, c: "raw record", return_direct=True)
    model = ScriptedModel(
        [chat_response(tool_calls=[tool_call("lookup", id="a")], usage=usage(4, 5, 9))]
    )
    chunks = await chunks_of(ChatClient(model, tools=[lookup]).prompt("go").stream())
    assert len(chunks) == 1
    assert chunks[0].text == "raw record"
    assert chunks[0].generations[0].finish_reason == "returnDirect"
    assert chunks[0].usage == usage(4, 5, 9)


async def test_a_limit_breach_streams_one_final_chunk() -> None:
    model = ScriptedModel([[tool_call("t"), tool_call("t")], "never"])
    advisor = ToolCallingAdvisor(tool_calling_manager=ToolCallingManager(max_calls_per_tool=1))
    client = ChatClient(model, tools=[RecordingTool("t")], tool_calling_advisor=advisor)
    chunks = await chunks_of(client.prompt("go").stream())
    assert len(chunks) == 1 and len(model.requests) == 1
    assert chunks[0].generations[0].finish_reason == "toolCallLimitExceeded"


async def test_a_limit_breach_after_earlier_rounds_carries_the_summed_usage() -> None:
    model = ScriptedModel(
        [
            chat_response(tool_calls=[tool_call("t", id="a")], usage=usage(10, 20, 30)),
            chat_response(tool_calls=[tool_call("t", id="b")], usage=usage(1, 2, 3)),
            "never",
        ]
    )
    advisor = ToolCallingAdvisor(tool_calling_manager=ToolCallingManager(max_calls_per_tool=1))
    client = ChatClient(model, tools=[RecordingTool("t")], tool_calling_advisor=advisor)
    chunks = await chunks_of(client.prompt("go").stream())
    assert len(chunks) == 1 and len(model.requests) == 2
    assert chunks[0].generations[0].finish_reason == "toolCallLimitExceeded"
    assert chunks[0].usage == usage(11, 22, 33)


def fragment(call_id: str, name: str = "", arguments: str = "") -> ChatResponse:
    return ChatResponse(
        generations=(
            Generation(
                message=AssistantMessage(
                    tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),)
                )
            ),
        )
    )


async def test_fragments_of_several_calls_over_many_chunks_are_merged_before_running() -> None:
    """As providers stream them: a name split in two, a call whose arguments never arrive
    (a no-argument tool), arguments cut mid-token, the usage in a chunk of its own."""
    clock = RecordingTool("get_time", lambda a, c: "noon")
    weather = RecordingTool("weather", lambda a, c: f"rain in {a['city']}")
    round_one = [
        chat_response("Checking"),
        fragment("a", "get_"),
        fragment("", "time"),
        fragment("b", "weather"),
        fragment("", arguments='{"ci'),
        fragment("", arguments='ty": "Os'),
        fragment("", arguments='lo"}'),
        ChatResponse(usage=usage(5, 6, 11)),
    ]

    def stream_fn(prompt: Prompt) -> list[ChatResponse | str]:
        return round_one if len(prompt.messages) == 1 else ["It is noon; rain in Oslo."]

    model = FunctionModel(lambda p: "unused", stream_fn=stream_fn)
    stream = ChatClient(model, tools=[clock, weather]).prompt("time and weather?").stream()
    chunks = await chunks_of(stream)
    assert [args for args, _ in clock.calls] == [{}]
    assert [args for args, _ in weather.calls] == [{"city": "Oslo"}]
    assert not any(c.has_tool_calls() for c in chunks)
    assert "".join(c.text for c in chunks) == "CheckingIt is noon; rain in Oslo."
    calls = model.requests[1].messages[1].tool_calls  # type: ignore[union-attr]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("a", "get_time", "{}"),
        ("b", "weather", '{"city": "Oslo"}'),
    ]
    assert stream.chat_response().usage == usage(5, 6, 11)


async def test_stream_hooks_see_merged_rounds() -> None:
    advisor = HookRecorder()
    model = ScriptedModel([tool_call("t", {"q": "long enough to split"}), "answer"], chunk_size=3)
    client = ChatClient(model, tools=[RecordingTool("t")], advisors=[advisor])
    chunks = await chunks_of(client.prompt("go").stream())
    assert advisor.counts == {
        "init": 1,
        "before": 2,
        "after": 2,
        "next": 1,
        "finalize_stream": 1,
        "emitted": len(chunks),
    }
    first = advisor.seen_after[0]
    assert first is not None
    assert first.generations[0].message.tool_calls[0].arguments == '{"q": "long enough to split"}'


async def test_a_stream_runs_once_and_its_result_waits_for_the_end() -> None:
    stream = ChatClient(ScriptedModel(["a"])).prompt("go").stream()
    with pytest.raises(RuntimeError, match="not been consumed"):
        stream.chat_response()
    await chunks_of(stream)
    with pytest.raises(RuntimeError, match="consumed once"):
        await chunks_of(stream)


async def test_stream_errors_from_the_model_propagate() -> None:
    def stream_fn(prompt: Prompt) -> Any:
        raise ConnectionError("provider went away")

    model = FunctionModel(lambda p: "x", stream_fn=stream_fn)
    with pytest.raises(ConnectionError, match="provider went away"):
        await chunks_of(ChatClient(model).prompt("go").stream())


async def test_calls_a_checker_leaves_unexecuted_reach_the_stream_whole() -> None:
    tool = RecordingTool("t")
    model = ScriptedModel(
        [chat_response("Calling.", [tool_call("t", {"x": "long argument"}, id="a")])],
        chunk_size=2,
    )
    advisor = ToolCallingAdvisor(eligibility_checker=lambda response: False)
    stream = ChatClient(model, tools=[tool], tool_calling_advisor=advisor).prompt("go").stream()
    chunks = await chunks_of(stream)
    assert tool.calls == []
    assert [c.has_tool_calls() for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1].generations[0].message.tool_calls == (
        ToolCall(id="a", name="t", arguments='{"x": "long argument"}'),
    )
    merged = stream.chat_response().generations[0].message
    assert merged.text == "Calling." and len(merged.tool_calls) == 1


@pytest.mark.parametrize("return_direct", [False, True])
async def test_a_streamed_turn_has_the_history_of_the_same_turn_called(return_direct: bool) -> None:
    def run() -> tuple[ScriptedModel, RecordingTool]:
        tool = RecordingTool("t", lambda a, c: "raw", return_direct=return_direct)
        script: list[Any] = [chat_response("Let me check.", [tool_call("t", id="a")]), "All fine."]
        return ScriptedModel(script), tool

    model, tool = run()
    called = await ChatClient(model, tools=[tool]).prompt("go").acall()
    model, tool = run()
    stream = ChatClient(model, tools=[tool]).prompt("go").stream()
    await chunks_of(stream)
    assert stream.conversation_history == called.conversation_history
    texts = [getattr(m, "text", None) for m in stream.conversation_history]
    assert texts == ["go", "Let me check.", None, "raw" if return_direct else "All fine."]


async def test_the_usage_of_a_round_a_checker_left_unexecuted_reaches_the_stream() -> None:
    # The usage rides on the round's last chunk, a tool-call fragment the loop hides.
    model = ScriptedModel(
        [
            chat_response(tool_calls=[tool_call("t", id="a")], usage=usage(10, 20, 30)),
            chat_response("Calling.", [tool_call("t", id="b")], usage=usage(1, 2, 3)),
        ]
    )
    advisor = ToolCallingAdvisor(eligibility_checker=lambda r: r.text == "")
    stream = ChatClient(model, tools=[RecordingTool("t")], tool_calling_advisor=advisor)
    chunks = await chunks_of(stream.prompt("go").stream())
    assert chunks[-1].usage == usage(11, 22, 33)
    assert merge_chunks(chunks).usage == usage(11, 22, 33)


def reasoning_chunk(text: str) -> ChatResponse:
    return ChatResponse(
        generations=(Generation(message=AssistantMessage(reasoning=(Reasoning(text=text),))),)
    )


@pytest.mark.parametrize("ending", ["approval", "unexecuted"])
async def test_the_final_chunk_of_a_round_does_not_repeat_its_streamed_reasoning(
    ending: str,
) -> None:
    def stream_fn(prompt: Prompt) -> list[ChatResponse | str]:
        return [reasoning_chunk("Delete "), reasoning_chunk("it."), fragment("a", "t", "{}")]

    model = FunctionModel(lambda p: "unused", stream_fn=stream_fn)
    tool = RecordingTool("t", requires_approval=ending == "approval")
    advisor = ToolCallingAdvisor(eligibility_checker=lambda r: ending == "approval")
    client = ChatClient(model, tools=[tool], tool_calling_advisor=advisor)
    stream = client.prompt("go").stream()
    chunks = await chunks_of(stream)
    assert chunks[-1].has_tool_calls()
    message = stream.chat_response().generations[0].message
    assert message.reasoning == (Reasoning(text="Delete it."),)
    assert [call.id for call in message.tool_calls] == ["a"]


round_calls = st.lists(
    st.fixed_dictionaries({"q": st.text(max_size=12), "n": st.integers()}), min_size=1, max_size=3
)


@settings(max_examples=40, deadline=None)
@given(
    rounds=st.lists(round_calls, min_size=1, max_size=3),
    answer=st.text(min_size=1, max_size=40),
    chunk_size=st.integers(min_value=1, max_value=12),
)
def test_a_stream_runs_the_same_loop_as_a_call(
    rounds: list[list[dict[str, Any]]], answer: str, chunk_size: int
) -> None:
    """Whatever the chunking, streaming runs the same tool calls with the same arguments,
    hides every tool-call chunk, and ends with the same answer and usage as a call."""

    def script() -> list[Any]:
        steps: list[Any] = [
            chat_response(
                tool_calls=[tool_call("t", arguments) for arguments in calls],
                usage=usage(1, 1, 2),
            )
            for calls in rounds
        ]
        return [*steps, chat_response(answer, usage=usage(3, 4, 7))]

    # read-only, so that the identical-call guard lets the rounds repeat a call at will
    called = RecordingTool("t", read_only=True)
    called_answer = ChatClient(ScriptedModel(script()), tools=[called]).prompt("go").call()
    streamed = RecordingTool("t", read_only=True)
    model = ScriptedModel(script(), chunk_size=chunk_size)
    stream = ChatClient(model, tools=[streamed]).prompt("go").stream()
    chunks = asyncio.run(chunks_of(stream))

    assert (
        [a for a, _ in streamed.calls]
        == [a for a, _ in called.calls]
        == [arguments for calls in rounds for arguments in calls]
    )
    assert not any(chunk.has_tool_calls() for chunk in chunks)
    assert "".join(chunk.text for chunk in chunks) == called_answer.content() == answer
    total = usage(len(rounds) + 3, len(rounds) + 4, 2 * len(rounds) + 7)
    assert stream.chat_response().usage == called_answer.chat_response().usage == total


async def test_two_complete_calls_sharing_an_id_run_apart_as_call_runs_them() -> None:
    def response(prompt: Prompt) -> ChatResponse | str:
        if len(prompt.messages) > 1:
            return "done"
        calls = [tool_call("echo", {"text": text}, id="same") for text in ("one", "two")]
        return chat_response(tool_calls=calls)

    for streamed in (False, True):
        echo = RecordingTool("echo", lambda arguments, context: arguments["text"])
        request = ChatClient(FunctionModel(response), tools=[echo]).prompt("echo twice")
        if streamed:
            text = "".join([text async for text in request.stream().content()])
        else:
            text = (await request.acall()).content()
        assert text == "done"
        assert [arguments for arguments, _ in echo.calls] == [{"text": "one"}, {"text": "two"}]
