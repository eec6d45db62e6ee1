"""The tool loop (ToolCallingAdvisor) on the call path: rounds, return-direct, limits, usage,
hooks, the eligibility checker, conversation history and advisor ordering (Spring AI 1.8)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from _loop_tools import HookRecorder, RecordingTool
from tooluse import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    AssistantMessage,
    ChatClient,
    ChatResponse,
    SystemMessage,
    ToolCallingAdvisor,
    ToolCallingManager,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from tooluse.advisors import (
    AdvisorChain,
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
    LoopOutcome,
    Turn,
    TurnKey,
)
from tooluse.calling import ToolExecutionResult
from tooluse.testing import ScriptedModel, chat_response, tool_call


def usage(prompt: int, completion: int, total: int, **cache: int) -> Usage:
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total, **cache)


async def test_one_tool_round_then_an_answer() -> None:
    weather = RecordingTool("weather", lambda a, c: f"sunny in {a['city']}")
    model = ScriptedModel([tool_call("weather", {"city": "Paris"}), "It is sunny."])
    response = await ChatClient(model, tools=[weather]).prompt("Weather?").acall()
    assert response.content() == "It is sunny."
    assert len(model.requests) == 2
    assert [args for args, _ in weather.calls] == [{"city": "Paris"}]
    second = model.requests[1].messages
    assert isinstance(second[1], AssistantMessage) and isinstance(second[2], ToolResponseMessage)
    call, result = second[1].tool_calls[0], second[2].responses[0]
    assert (result.id, result.name, result.data) == (call.id, "weather", "sunny in Paris")
    assert response.chat_response().generations[0].finish_reason == "stop"


async def test_several_rounds_keep_the_whole_turn() -> None:
    tool = RecordingTool("step", lambda a, c: f"did {a['n']}")
    model = ScriptedModel(
        [
            tool_call("step", {"n": 1}),
            [tool_call("step", {"n": 2}), tool_call("step", {"n": 3})],
            "finished",
        ]
    )
    response = await ChatClient(model, tools=[tool]).prompt("go").acall()
    assert response.content() == "finished"
    assert [len(p.messages) for p in model.requests] == [1, 3, 5]
    last = model.requests[-1].messages[-1]
    assert isinstance(last, ToolResponseMessage)
    assert [r.data for r in last.responses] == ["did 2", "did 3"]
    assert [m.role for m in response.conversation_history] == [
        "user", "assistant", "tool", "assistant", "tool", "assistant",
    ]  # fmt: skip


async def test_return_direct_answers_with_the_tool_results_after_one_model_call() -> None:
    lookup = RecordingTool("lookup", lambda a, c: "the raw record", return_direct=True)
    model = ScriptedModel([tool_call("lookup")])
    response = await ChatClient(model, tools=[lookup]).prompt("find").acall()
    assert len(model.requests) == 1
    generation = response.chat_response().generations[0]
    assert generation.message.text == "the raw record"
    assert generation.finish_reason == ToolExecutionResult.FINISH_REASON == "returnDirect"
    assert generation.metadata["tool_name"] == "lookup"
    assert response.content() == "the raw record"


async def test_a_round_mixing_return_direct_and_normal_tools_goes_back_to_the_model() -> None:
    direct = RecordingTool("direct", return_direct=True)
    normal = RecordingTool("normal")
    model = ScriptedModel([[tool_call("direct"), tool_call("normal")], "combined"])
    response = await ChatClient(model, tools=[direct, normal]).prompt("go").acall()
    assert response.content() == "combined"
    assert len(model.requests) == 2


async def test_a_return_direct_round_with_an_unknown_tool_goes_back_to_the_model() -> None:
    # The error is for the model to correct, not an answer for the user.
    direct = RecordingTool("direct", return_direct=True)
    model = ScriptedModel([[tool_call("direct"), tool_call("drect")], "fixed it"])
    response = await ChatClient(model, tools=[direct]).prompt("go").acall()
    assert response.content() == "fixed it"
    results = model.requests[1].messages[-1]
    assert isinstance(results, ToolResponseMessage)
    assert results.responses[1].is_error and "Did you mean 'direct'?" in results.responses[1].data


async def test_a_limit_breach_ends_the_loop_with_the_limit_message() -> None:
    tool = RecordingTool("search")
    model = ScriptedModel([[tool_call("search"), tool_call("search")], "never asked"])
    advisor = ToolCallingAdvisor(tool_calling_manager=ToolCallingManager(max_calls_per_tool=1))
    client = ChatClient(model, tools=[tool], tool_calling_advisor=advisor)
    response = await client.prompt("go").acall()
    assert len(model.requests) == 1 and len(tool.calls) == 1
    generation = response.chat_response().generations[0]
    assert generation.finish_reason == "toolCallLimitExceeded"
    assert generation.message.text == (
        "Tool call limit (1) exceeded for tool 'search'. No further calls to this tool are "
        "allowed in this turn."
    )
    partial = generation.metadata["partial_tool_responses"]
    assert [(r["name"], r["data"]) for r in partial] == [("search", "search ok")]


async def test_usage_is_summed_over_rounds_and_stamped_on_the_final_response() -> None:
    model = ScriptedModel(
        [
            chat_response(
                tool_calls=[tool_call("t", id="a")],
                usage=usage(10, 20, 30, cache_read_tokens=100, cache_write_tokens=5),
            ),
            chat_response("done", usage=usage(1, 2, 3, cache_read_tokens=200)),
        ]
    )
    response = await ChatClient(model, tools=[RecordingTool("t")]).prompt("go").acall()
    assert response.chat_response().usage == usage(
        11, 22, 33, cache_read_tokens=300, cache_write_tokens=5
    )


async def test_rounds_without_usage_are_skipped_and_a_single_round_keeps_its_usage() -> None:
    model = ScriptedModel(
        [
            chat_response(tool_calls=[tool_call("t", id="a")]),
            chat_response("x", usage=usage(1, 2, 3)),
        ]
    )
    response = await ChatClient(model, tools=[RecordingTool("t")]).prompt("go").acall()
    assert response.chat_response().usage == usage(1, 2, 3)
    plain = await ChatClient(ScriptedModel(["hi"])).prompt("go").acall()
    assert plain.chat_response().usage is None


async def test_hooks_are_called_the_right_number_of_times() -> None:
    advisor = HookRecorder()
    model = ScriptedModel([tool_call("t"), tool_call("t"), "done"])
    client = ChatClient(model, tools=[RecordingTool("t")], advisors=[advisor])
    await client.prompt("go").acall()
    assert advisor.counts == {"init": 1, "before": 3, "after": 3, "next": 2, "final": 1}


class ToolSwappingAdvisor(ToolCallingAdvisor):
    """Offers a different single tool each round, as the tool-search advisor does."""

    def __init__(self, per_round: list[RecordingTool]) -> None:
        super().__init__()
        self.per_round = per_round
        self.round = 0

    async def do_before_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientRequest:
        tool = self.per_round[self.round]
        self.round += 1
        options = request.prompt.options.replace(tool_callbacks=[tool])
        return request.replace(prompt=request.prompt.replace(options=options))


async def test_the_manager_executes_with_the_options_the_hooks_left() -> None:
    first, second = RecordingTool("first"), RecordingTool("second")
    model = ScriptedModel([tool_call("first"), [tool_call("second"), tool_call("first")], "ok"])
    advisor = ToolSwappingAdvisor([first, second, second])
    await ChatClient(model, tools=[first, second], advisors=[advisor]).prompt("go").acall()
    assert [[c.definition.name for c in p.options.tool_callbacks] for p in model.requests] == [
        ["first"], ["second"], ["second"],
    ]  # fmt: skip
    assert len(first.calls) == 1 and len(second.calls) == 1
    # In round two only "second" was offered, so the call to "first" got an error result.
    responses = model.requests[2].messages[-1].responses  # type: ignore[union-attr]
    assert [r.is_error for r in responses] == [False, True]
    assert "Unknown tool 'first'" in responses[1].data


async def test_a_custom_checker_can_suppress_execution() -> None:
    tool = RecordingTool("t")
    model = ScriptedModel([tool_call("t")])
    advisor = ToolCallingAdvisor(eligibility_checker=lambda response: False)
    response = (
        await ChatClient(model, tools=[tool], tool_calling_advisor=advisor).prompt("go").acall()
    )
    assert tool.calls == [] and len(model.requests) == 1
    assert response.chat_response().has_tool_calls()


async def test_a_custom_checker_can_force_execution() -> None:
    """The checker decides: here only calls of the second generation make it execute, and
    the manager then runs the first generation that has calls (Spring's rule)."""
    tool = RecordingTool("t")
    two_generations = ChatResponse(
        generations=(
            chat_response("text only").generations[0],
            chat_response(tool_calls=[tool_call("t", id="x")]).generations[0],
        )
    )
    model = ScriptedModel([two_generations, "done"])
    advisor = ToolCallingAdvisor(
        eligibility_checker=lambda r: (
            len(r.generations) > 1 and r.generations[1].message.tool_calls != ()
        )
    )
    response = (
        await ChatClient(model, tools=[tool], tool_calling_advisor=advisor).prompt("go").acall()
    )
    assert response.content() == "done" and len(tool.calls) == 1
    forcing = ToolCallingAdvisor(eligibility_checker=lambda r: True)
    with pytest.raises(ValueError, match="No tool call requested by the chat model"):
        await (
            ChatClient(ScriptedModel(["plain"]), tool_calling_advisor=forcing).prompt("go").acall()
        )


async def test_without_conversation_history_the_loop_sends_system_and_last_results() -> None:
    model = ScriptedModel([tool_call("t"), tool_call("t"), "done"])
    advisor = ToolCallingAdvisor(conversation_history=False)
    inside_loop = RecordingAdvisor(order=0)  # where a memory advisor would replay the rest
    client = ChatClient(
        model,
        system="Be brief.",
        tools=[RecordingTool("t")],
        tool_calling_advisor=advisor,
        advisors=[inside_loop],
    )
    await client.prompt("go").acall()
    roles = [[m.role for m in r.prompt.messages] for r in inside_loop.requests]
    assert roles == [["system", "user"], ["system", "tool"], ["system", "tool"]]
    assert inside_loop.requests[2].prompt.messages[0] == SystemMessage(text="Be brief.")
    # With nothing replaying the history, the model boundary drops the orphaned results
    # rather than send a history every provider rejects.
    assert [[m.role for m in p.messages] for p in model.requests][1:] == [["system"], ["system"]]


async def test_without_conversation_history_the_manager_still_counts_the_whole_turn() -> None:
    model = ScriptedModel([tool_call("t"), tool_call("t"), "never"])
    advisor = ToolCallingAdvisor(
        conversation_history=False,
        tool_calling_manager=ToolCallingManager(max_calls_per_tool=1),
    )
    client = ChatClient(model, tools=[RecordingTool("t")], tool_calling_advisor=advisor)
    response = await client.prompt("go").acall()
    assert response.chat_response().generations[0].finish_reason == "toolCallLimitExceeded"


class RecordingAdvisor:
    """A memory-like advisor: records the requests it sees and the responses it returns."""

    def __init__(self, order: int) -> None:
        self.order = order
        self.name = f"recording {order}"
        self.requests: list[ChatClientRequest] = []
        self.responses: list[ChatResponse | None] = []

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        self.requests.append(request)
        response = await chain.next_call(request)
        self.responses.append(response.chat_response)
        return response


async def test_an_advisor_outside_the_loop_sees_the_first_request_and_the_final_answer() -> None:
    outer = RecordingAdvisor(HIGHEST_PRECEDENCE + 200)
    inner = RecordingAdvisor(HIGHEST_PRECEDENCE + 400)
    model = ScriptedModel([tool_call("t"), "done"])
    client = ChatClient(model, tools=[RecordingTool("t")], advisors=[inner, outer])
    await client.prompt("go").acall()
    assert [r.prompt.messages for r in outer.requests] == [(UserMessage(text="go"),)]
    assert [r.text for r in outer.responses if r] == ["done"]
    assert len(inner.requests) == 2  # inside the loop: once per model call
    assert inner.responses[0] is not None and inner.responses[0].has_tool_calls()


CALLS_SEEN = TurnKey[list[int]]("test: model calls seen")


class RoundCounter(ToolCallingAdvisor):
    """Keeps its own state for the turn in the request's turn, from hook to hook."""

    async def do_initialize_loop(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientRequest:
        request.turn[CALLS_SEEN] = []
        return request

    async def do_before_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientRequest:
        seen = request.turn[CALLS_SEEN]
        seen.append(len(seen) + 1)
        return request


class OutcomeReader(BaseAdvisor):
    """Outside the loop: reads the loop's outcome from its own request once the chain ended."""

    def __init__(self) -> None:
        super().__init__(name="outcome reader", order=HIGHEST_PRECEDENCE + 200)
        self.turns: list[Turn] = []
        self.outcomes: list[LoopOutcome | None] = []

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        response = await chain.next_call(request)
        self.turns.append(request.turn)
        self.outcomes.append(request.turn.outcome)
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        async for item in chain.next_stream(request):
            yield item
        self.turns.append(request.turn)
        self.outcomes.append(request.turn.outcome)


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_turn_carries_an_advisors_own_state_and_the_loops_outcome(streamed: bool) -> None:
    reader = OutcomeReader()
    model = ScriptedModel([tool_call("t", {}, id="c1"), "done"] * 2)
    client = ChatClient(
        model, tools=[RecordingTool("t")], advisors=[reader], tool_calling_advisor=RoundCounter()
    )
    for _ in range(2):
        if streamed:
            async for _chunk in client.prompt("go").stream():
                pass
        else:
            await client.prompt("go").acall()
    first, second = reader.outcomes
    assert first is not None and second is not None
    assert [type(m).__name__ for m in first.history] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
    ]
    assert first.rounds == first.history[1:]  # what the request added after its prompt
    assert first.answer.text == "done" and first.pause is None
    # Each request has a turn of its own: the state of one never leaks into the next.
    assert reader.turns[0] is not reader.turns[1]
    assert [turn[CALLS_SEEN] for turn in reader.turns] == [[1, 2], [1, 2]]
    with pytest.raises(KeyError, match="test: model calls seen"):
        Turn()[CALLS_SEEN]


@pytest.mark.parametrize("order", [HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE])
def test_the_order_must_be_inside_the_open_range(order: int) -> None:
    with pytest.raises(ValueError, match="strictly between HIGHEST_PRECEDENCE and LOWEST"):
        ToolCallingAdvisor(order=order)


def test_defaults_follow_spring() -> None:
    advisor = ToolCallingAdvisor()
    assert advisor.order == HIGHEST_PRECEDENCE + 300
    assert advisor.name == "Tool Calling Advisor"
    assert advisor.conversation_history is True


async def test_a_tool_that_raises_through_the_processor_ends_the_request() -> None:
    def boom(arguments: dict[str, Any], context: object) -> str:
        raise KeyboardInterrupt

    model = ScriptedModel([tool_call("boom"), "never"])
    with pytest.raises(KeyboardInterrupt):
        await ChatClient(model, tools=[RecordingTool("boom", boom)]).prompt("go").acall()


async def test_history_marks_tool_errors_for_the_model() -> None:
    def fails(arguments: dict[str, Any], context: object) -> str:
        raise RuntimeError("the service is down")

    model = ScriptedModel([tool_call("svc"), "sorry"])
    await ChatClient(model, tools=[RecordingTool("svc", fails)]).prompt("go").acall()
    result = model.requests[1].messages[-1].responses[0]  # type: ignore[union-attr]
    assert (result.data, result.is_error) == ("the service is down", True)
