"""The identical-call guard: the same tool with the same arguments more than N times in one
turn is answered with an error for the model instead of running again."""

from __future__ import annotations

import pytest

from _calling_tools import FakeTool, prompt_with, tool_calls_response
from tooluse import (
    Approve,
    AssistantMessage,
    ChatClient,
    Prompt,
    ToolCall,
    ToolCallingAdvisor,
    ToolCallingManager,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    tool,
)
from tooluse.calling import DEFAULT_MAX_IDENTICAL_CALLS
from tooluse.testing import FunctionModel, ResponseLike, tool_call

REFUSED = "Tool 'note' was already called {n} times in this turn with these same arguments"


def round_of(*arguments: str, start: int = 0) -> list[AssistantMessage | ToolResponseMessage]:
    calls = tuple(
        ToolCall(id=f"e{start + i}", name="note", arguments=a) for i, a in enumerate(arguments)
    )
    responses = tuple(ToolResponse(id=c.id, name="note", data="ok") for c in calls)
    return [AssistantMessage(tool_calls=calls), ToolResponseMessage(responses=responses)]


async def test_the_call_past_the_limit_is_refused_and_other_arguments_still_run() -> None:
    note = FakeTool("note")
    # Two earlier calls in this turn, written with other spacing and key order.
    history = [UserMessage(text="q"), *round_of('{"a": 1, "b": 2}', '{"b":2,"a":1}')]
    response = tool_calls_response(
        ("note", '{"a":1,"b":2}'), ("note", '{"a": 1, "b": 2}'), ("note", '{"a": 2, "b": 2}')
    )
    result = await ToolCallingManager(max_identical_calls=3).aexecute_tool_calls(
        prompt_with([note], messages=history), response
    )
    responses = result.conversation_history[-1].responses  # type: ignore[union-attr]
    assert [r.is_error for r in responses] == [False, True, False]
    assert responses[1].data.startswith(REFUSED.format(n=3))
    assert [arguments for arguments, _ in note.calls] == ['{"a":1,"b":2}', '{"a": 2, "b": 2}']
    assert result.return_direct is False


async def test_an_earlier_turn_does_not_count_and_some_tools_are_exempt() -> None:
    note, poll, look = FakeTool("note"), FakeTool("poll"), FakeTool("look", read_only=True)
    earlier_turn = [UserMessage(text="q1"), *round_of("{}", "{}", "{}")]
    history = [*earlier_turn, AssistantMessage(text="done"), UserMessage(text="q2")]
    response = tool_calls_response(("note", "{}"), *[("poll", "{}"), ("look", "{}")] * 5)
    manager = ToolCallingManager(repeatable_tools=["poll"])
    result = await manager.aexecute_tool_calls(
        prompt_with([note, poll, look], messages=history), response
    )
    responses = result.conversation_history[-1].responses  # type: ignore[union-attr]
    assert not any(r.is_error for r in responses)
    # poll is named repeatable; look is read-only (a screenshot, a status: meant to repeat)
    assert (len(note.calls), len(poll.calls), len(look.calls)) == (1, 5, 5)
    assert DEFAULT_MAX_IDENTICAL_CALLS == 3  # the default guard was on


async def test_none_turns_the_guard_off_and_bad_limits_are_refused() -> None:
    note = FakeTool("note")
    response = tool_calls_response(*[("note", "")] * 6)
    await ToolCallingManager(max_identical_calls=None).aexecute_tool_calls(
        prompt_with([note]), response
    )
    assert len(note.calls) == 6
    with pytest.raises(ValueError, match="max_identical_calls must be a positive integer"):
        ToolCallingManager(max_identical_calls=0)


async def test_the_guard_holds_across_a_resume() -> None:
    """The calls of a turn are read from its history, so a resumed run (another process,
    another manager) counts the calls made before the pause."""
    send = FakeTool("send", requires_approval=True)
    manager = ToolCallingManager(max_identical_calls=1)
    prompt = prompt_with([send])
    paused = await manager.aexecute_tool_calls(
        prompt, tool_calls_response(("send", '{"to": "bob"}'))
    )
    resumed = await ToolCallingManager(max_identical_calls=1).aresume_tool_calls(
        Prompt(paused.conversation_history, prompt.options), {"c0": Approve()}
    )
    again = await manager.aexecute_tool_calls(
        Prompt(resumed.conversation_history, prompt.options),
        tool_calls_response(ToolCall(id="c9", name="send", arguments='{"to":"bob"}')),
    )
    assert len(send.calls) == 1
    assert again.pending_tool_calls == ()  # refused, not held for approval a second time
    last = again.conversation_history[-1].responses[-1]  # type: ignore[union-attr]
    assert last.is_error and "already called 1 times" in last.data


def test_a_model_in_a_loop_gets_the_error_and_the_tool_runs_n_times() -> None:
    ran: list[str] = []

    @tool
    def cancel_order(order_id: str) -> str:
        ran.append(order_id)
        return "cancelled"

    def looping(prompt: Prompt) -> ResponseLike:
        last = prompt.messages[-1]
        if isinstance(last, ToolResponseMessage) and last.responses[0].is_error:
            return "I stopped."
        return [tool_call("cancel_order", {"order_id": "A1"})]

    client = ChatClient(
        FunctionModel(looping),
        tools=[cancel_order],
        tool_calling_advisor=ToolCallingAdvisor(
            tool_calling_manager=ToolCallingManager(max_identical_calls=2)
        ),
    )
    assert client.prompt().user("cancel A1").call().content() == "I stopped."
    assert ran == ["A1", "A1"]
