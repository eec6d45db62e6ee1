"""Approval holds: calls that need a human wait; resuming runs or denies them by id."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from _calling_tools import FakeTool, prompt_with, tool_calls_response
from tooluse import (
    Approve,
    AssistantMessage,
    Deny,
    PendingToolCall,
    Prompt,
    ToolCall,
    ToolCallingManager,
    ToolCallLimitExceeded,
    ToolContext,
    ToolExecutionResult,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.messages import messages_from_json, messages_to_json


def echo(name: str, **metadata: Any) -> FakeTool:
    return FakeTool(name, lambda **kw: f"{name}{json.dumps(kw, sort_keys=True)}", **metadata)


async def pause(
    manager: ToolCallingManager, tools: list[FakeTool], *calls: tuple[str, str]
) -> tuple[Prompt, ToolExecutionResult]:
    prompt = prompt_with(tools, context={"user": "u1"})
    result = await manager.aexecute_tool_calls(prompt, tool_calls_response(*calls))
    return Prompt(result.conversation_history, prompt.options), result


async def test_held_calls_wait_and_the_others_run() -> None:
    send, look = echo("send", requires_approval=True), echo("look")
    _, result = await pause(
        ToolCallingManager(), [send, look], ("send", '{"to": "bob"}'), ("look", '{"q": 1}')
    )
    assert result.pending_tool_calls == (
        PendingToolCall("c0", "send", '{"to": "bob"}', "Tool 'send' requires approval"),
    )
    assert send.calls == [] and len(look.calls) == 1
    assistant, partial = result.conversation_history[-2:]
    assert isinstance(assistant, AssistantMessage) and len(assistant.tool_calls) == 2
    assert isinstance(partial, ToolResponseMessage)
    assert [r.id for r in partial.responses] == ["c1"]
    assert result.return_direct is False


async def test_all_calls_held_ends_the_history_with_the_assistant_message() -> None:
    send = echo("send", requires_approval=True)
    _, result = await pause(ToolCallingManager(), [send], ("send", "{}"), ("send", "{}"))
    assert isinstance(result.conversation_history[-1], AssistantMessage)
    assert [p.id for p in result.pending_tool_calls] == ["c0", "c1"]


async def test_approval_predicates_of_the_tool_and_of_the_manager() -> None:
    seen: list[tuple[ToolCall, ToolContext]] = []

    def big_amount(call: ToolCall, context: ToolContext) -> bool:
        seen.append((call, context))
        return bool(json.loads(call.arguments)["amount"] > 100)

    pay = echo("pay", requires_approval=big_amount)
    delete = echo("delete")
    manager = ToolCallingManager(requires_approval=lambda call, ctx: call.name == "delete")
    _, result = await pause(
        manager, [pay, delete], ("pay", '{"amount": 5}'), ("pay", '{"amount": 500}'), ("delete", "")
    )
    assert [(p.id, p.reason) for p in result.pending_tool_calls] == [
        ("c1", "The approval rule of tool 'pay' matched this call"),
        ("c2", "The tool calling manager's approval rule matched this call"),
    ]
    assert seen[0][1] == ToolContext({"user": "u1"})
    assert [r.id for r in result.conversation_history[-1].responses] == ["c0"]


async def test_resume_runs_approved_calls_gives_denials_and_keeps_call_order() -> None:
    send, look = echo("send", requires_approval=True), echo("look")
    manager = ToolCallingManager()
    paused, _ = await pause(
        manager,
        [send, look],
        ("send", '{"to": "bob"}'),
        ("look", "{}"),
        ("send", '{"to": "eve"}'),
        ("send", '{"to": "amy"}'),
    )
    result = await manager.aresume_tool_calls(
        paused,
        {  # given out of order: matched by id, never by position
            "c3": Approve(arguments={"to": "ann"}),
            "c2": Deny("Not to eve."),
            "c0": Approve(),
        },
    )
    final = result.conversation_history[-1]
    assert final == ToolResponseMessage(
        responses=(
            ToolResponse(id="c0", name="send", data='send{"to": "bob"}'),
            ToolResponse(id="c1", name="look", data="look{}"),
            ToolResponse(id="c2", name="send", data="Not to eve.", is_error=True),
            ToolResponse(id="c3", name="send", data='send{"to": "ann"}'),
        )
    )
    assert result.conversation_history[:-1] == paused.messages[:-1]  # partial message replaced
    assert len(look.calls) == 1  # already answered: never run again
    assert [args for args, _ in send.calls] == ['{"to": "bob"}', '{"to": "ann"}']
    assert send.calls[0][1] == ToolContext({"user": "u1"})
    assert result.pending_tool_calls == ()


def test_resume_from_json_state_in_a_new_manager_with_the_sync_forms() -> None:
    send = echo("send", requires_approval=True)
    prompt = prompt_with([send])
    first = ToolCallingManager().execute_tool_calls(prompt, tool_calls_response(("send", "{}")))
    stored = (
        messages_to_json(first.conversation_history),
        [p.to_dict() for p in first.pending_tool_calls],
    )

    history, pending = (
        messages_from_json(stored[0]),
        [PendingToolCall.from_dict(d) for d in stored[1]],
    )
    result = ToolCallingManager().resume_tool_calls(
        Prompt(history, prompt.options), {p.id: Approve() for p in pending}
    )
    assert result.conversation_history[-1].responses[0].data == "send{}"
    assert json.loads(json.dumps(stored[1])) == stored[1]


async def test_bad_decisions_are_rejected_with_the_ids() -> None:
    send, look = echo("send", requires_approval=True), echo("look")
    manager = ToolCallingManager()
    paused, _ = await pause(manager, [send, look], ("send", "{}"), ("look", "{}"), ("send", "{}"))
    with pytest.raises(
        ValueError, match=r"No decision was given for the pending tool calls \['c2'\]"
    ):
        await manager.aresume_tool_calls(paused, {"c0": Approve()})
    with pytest.raises(
        ValueError, match=r"not pending: \['c1'\]; the pending calls are \['c0', 'c2'\]"
    ):
        await manager.aresume_tool_calls(paused, {"c0": Approve(), "c1": Approve(), "c2": Deny()})
    with pytest.raises(ValueError, match=r"not pending: \['zz'\]"):
        await manager.aresume_tool_calls(paused, {"c0": Approve(), "c2": Deny(), "zz": Deny()})
    with pytest.raises(TypeError, match=r"Decisions must be Approve or Deny, got \{'c2': 'bool'\}"):
        await manager.aresume_tool_calls(paused, {"c0": Approve(), "c2": True})  # type: ignore[dict-item]
    assert send.calls == []


async def test_resume_needs_a_paused_round() -> None:
    manager = ToolCallingManager()
    tools = [echo("look")]
    done = await manager.aexecute_tool_calls(prompt_with(tools), tool_calls_response(("look", "")))
    options = prompt_with(tools).options

    with pytest.raises(
        ValueError, match="Every tool call of the last round already has a response"
    ):
        await manager.aresume_tool_calls(Prompt(done.conversation_history, options), {})
    with pytest.raises(ValueError, match="no assistant message with tool calls to resume"):
        await manager.aresume_tool_calls(Prompt([UserMessage(text="q")], options), {})
    moved_on = [*done.conversation_history, UserMessage(text="more")]
    with pytest.raises(ValueError, match="followed by other messages than its tool responses"):
        await manager.aresume_tool_calls(Prompt(moved_on, options), {})
    stray = [
        UserMessage(text="q"),
        AssistantMessage(tool_calls=(ToolCall(id="a", name="look"),)),
        ToolResponseMessage(responses=(ToolResponse(id="b", name="look", data=""),)),
    ]
    with pytest.raises(ValueError, match=r"Tool responses \['b'\] answer no call"):
        await manager.aresume_tool_calls(Prompt(stray, options), {"a": Approve()})


async def test_held_calls_need_unique_ids() -> None:
    send = echo("send", requires_approval=True)
    response = tool_calls_response(ToolCall(id="x", name="send"), ToolCall(id="x", name="send"))
    with pytest.raises(ValueError, match=r"unique, non-empty ids .* \['x', 'x'\]"):
        await ToolCallingManager().aexecute_tool_calls(prompt_with([send]), response)
    # without held calls duplicate ids are harmless
    result = await ToolCallingManager().aexecute_tool_calls(
        prompt_with([echo("look")]),
        tool_calls_response(ToolCall(id="x", name="look"), ToolCall(id="x", name="look")),
    )
    assert len(result.conversation_history[-1].responses) == 2


async def test_limits_apply_to_resumed_calls() -> None:
    send, look = echo("send", requires_approval=True), echo("look")
    paused_history = [
        UserMessage(text="q"),
        AssistantMessage(tool_calls=(ToolCall(id="a", name="send"), ToolCall(id="b", name="send"))),
        ToolResponseMessage(responses=(ToolResponse(id="a", name="send", data="sent"),)),
    ]
    options = prompt_with([send, look]).options
    lenient = ToolCallingManager(per_tool_limits={"send": 1}, on_limit_exceeded="return_error")
    result = await lenient.aresume_tool_calls(Prompt(paused_history, options), {"b": Approve()})
    assert (
        result.conversation_history[-1]
        .responses[1]
        .data.startswith("Tool call limit (1) exceeded for tool 'send'")
    )
    strict = ToolCallingManager(per_tool_limits={"send": 1})
    with pytest.raises(ToolCallLimitExceeded) as raised:
        await strict.aresume_tool_calls(Prompt(paused_history, options), {"b": Approve()})
    assert [r.id for r in raised.value.partial_result.conversation_history[-1].responses] == [
        "a",
        "b",
    ]
    assert send.calls == []


async def test_an_approved_call_keeps_the_limit_slot_it_had_when_the_round_paused() -> None:
    # limit 1: the first call is held within the limit, the second is refused for the limit;
    # approving the first must run it (the refusal of the second is not counted before it)
    delete = echo("delete", requires_approval=True)
    manager = ToolCallingManager(per_tool_limits={"delete": 1}, on_limit_exceeded="return_error")
    paused, first = await pause(
        manager, [delete], ("delete", '{"p": "a"}'), ("delete", '{"p": "b"}')
    )
    assert [call.id for call in first.pending_tool_calls] == ["c0"]
    resumed = await manager.aresume_tool_calls(paused, {"c0": Approve()})
    responses = resumed.conversation_history[-1].responses
    assert [(r.id, r.is_error) for r in responses] == [("c0", False), ("c1", True)]
    assert responses[0].data == 'delete{"p": "a"}'
    assert [arguments for arguments, _ in delete.calls] == ['{"p": "a"}']


async def test_return_direct_rule_spans_the_resumed_round(caplog: pytest.LogCaptureFixture) -> None:
    direct = echo("direct", return_direct=True)
    held_direct = echo("held_direct", return_direct=True, requires_approval=True)
    held_regular = echo("held_regular", requires_approval=True)
    manager = ToolCallingManager()
    tools = [direct, held_direct, held_regular]

    paused, first = await pause(manager, tools, ("direct", ""), ("held_direct", ""))
    assert first.return_direct is False  # a paused round never returns directly
    resumed = await manager.aresume_tool_calls(paused, {"c1": Approve()})
    assert resumed.return_direct is True

    paused, _ = await pause(manager, tools, ("direct", ""), ("held_regular", ""))
    with caplog.at_level(logging.WARNING, "tooluse.calling"):
        mixed = await manager.aresume_tool_calls(paused, {"c1": Approve()})
    assert mixed.return_direct is False
    assert "mixed return-direct and regular tools" in caplog.text

    paused, _ = await pause(manager, tools, ("direct", ""), ("held_regular", ""))
    denied = await manager.aresume_tool_calls(paused, {"c1": Deny()})
    assert denied.return_direct is False  # the denial is for the model, not the user
    assert denied.conversation_history[-1].responses[1].data == "The user denied this tool call."

    # A call refused before the pause (an unknown tool) keeps the resumed round from
    # returning directly too.
    paused, first = await pause(manager, tools, ("direct", ""), ("nope", ""), ("held_direct", ""))
    assert first.return_direct is False
    resumed = await manager.aresume_tool_calls(paused, {"c2": Approve()})
    assert resumed.return_direct is False


def test_decision_and_pending_value_errors() -> None:
    with pytest.raises(TypeError, match="takes a mapping of argument names to values, got str"):
        Approve(arguments='{"a": 1}')  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tool call 'c9' are not JSON-serialisable"):
        Approve(arguments={"when": object()}).encoded_arguments("c9")
    with pytest.raises(ValueError, match=r"lacks \['reason'\]"):
        PendingToolCall.from_dict({"id": "1", "name": "n", "arguments": ""})
    with pytest.raises(ValueError, match=r"fields \['id'\] must be strings"):
        PendingToolCall.from_dict({"id": 1, "name": "n", "arguments": "", "reason": ""})
    with pytest.raises(ValueError, match=r"unknown keys \['extra'\]"):
        PendingToolCall.from_dict(
            {"id": "1", "name": "n", "arguments": "", "reason": "", "extra": 0}
        )


async def test_unserialisable_edited_arguments_fail_before_anything_runs() -> None:
    send = echo("send", requires_approval=True)
    manager = ToolCallingManager()
    paused, _ = await pause(manager, [send], ("send", "{}"))
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        await manager.aresume_tool_calls(paused, {"c0": Approve(arguments={"x": {1, 2}})})
    assert send.calls == []


async def test_a_held_call_in_a_round_that_breaches_a_limit_is_answered_not_lost() -> None:
    # the breach ends the turn, so no one can approve the held call any more: it gets a result
    # saying it did not run, and nothing is left pending (once, it vanished from the history)
    send, look = echo("send", requires_approval=True), echo("look")
    manager = ToolCallingManager(per_tool_limits={"look": 1})
    with pytest.raises(ToolCallLimitExceeded) as raised:
        await pause(manager, [send, look], ("send", "{}"), ("look", "{}"), ("look", "{}"))
    partial = raised.value.partial_result
    assert partial.pending_tool_calls == ()
    responses = partial.conversation_history[-1].responses
    assert [(r.id, r.is_error) for r in responses] == [("c0", True), ("c1", False), ("c2", True)]
    assert "not run" in responses[0].data and "approval" in responses[0].data
    assert send.calls == []
    partial_responses = raised.value.build_generation().metadata["partial_tool_responses"]
    assert [r["id"] for r in partial_responses] == ["c0", "c1"]
