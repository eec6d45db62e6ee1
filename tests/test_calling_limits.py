"""Per-turn tool call limits: Spring AI's texts and counting, with SPEC's settings."""

from __future__ import annotations

from typing import Any

import pytest

from _calling_tools import FakeTool, prompt_with, tool_calls_response
from tooluse import (
    AssistantMessage,
    ToolCall,
    ToolCallingManager,
    ToolCallLimitExceeded,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.messages import Message

PER_TOOL = "Tool call limit ({n}) exceeded for tool '{name}'. No further calls to this tool are allowed in this turn."  # noqa: E501
TOTAL = "Total tool call limit ({n}) exceeded for this turn. No further tool calls are allowed."


def earlier_round(name: str, count: int) -> list[Message]:
    """An assistant message with ``count`` calls to ``name`` and their responses."""
    calls = tuple(ToolCall(id=f"h{name}{i}", name=name) for i in range(count))
    responses = tuple(ToolResponse(id=c.id, name=name, data="x") for c in calls)
    return [AssistantMessage(tool_calls=calls), ToolResponseMessage(responses=responses)]


async def test_per_tool_limit_raises_with_the_partial_results() -> None:
    a, b = FakeTool("a"), FakeTool("b")
    history = [UserMessage(text="q"), *earlier_round("a", 39)]
    response = tool_calls_response(("b", ""), ("a", ""), ("a", ""), ("b", ""))

    with pytest.raises(ToolCallLimitExceeded) as raised:
        # (the 39 earlier calls are identical: the identical-call guard is tested elsewhere)
        await ToolCallingManager(max_identical_calls=None).aexecute_tool_calls(
            prompt_with([a, b], messages=history), response
        )

    exc = raised.value
    assert str(exc) == "Tool call limit (40) exceeded for tool 'a'"
    assert (exc.tool_name, exc.limit) == ("a", 40)
    partial = exc.partial_result.conversation_history
    assert partial[: len(history) + 1] == (*history, response.generations[0].message)
    assert partial[-1] == ToolResponseMessage(
        responses=(
            ToolResponse(id="c0", name="b", data="b ok"),
            ToolResponse(id="c1", name="a", data="a ok"),
            ToolResponse(id="c2", name="a", data=PER_TOOL.format(n=40, name="a"), is_error=True),
        )
    )
    assert len(a.calls) == 1 and len(b.calls) == 1  # the call after the breach never ran

    generation = exc.build_generation()
    assert generation.message.text == PER_TOOL.format(n=40, name="a")
    assert generation.metadata == {
        "finish_reason": "toolCallLimitExceeded",
        "partial_tool_responses": [
            {"id": "c0", "name": "b", "data": "b ok", "is_error": False, "images": ()},
            {"id": "c1", "name": "a", "data": "a ok", "is_error": False, "images": ()},
        ],
    }


async def test_only_the_current_turn_counts() -> None:
    a = FakeTool("a")
    history = [UserMessage(text="old"), *earlier_round("a", 40), UserMessage(text="new")]
    result = await ToolCallingManager().aexecute_tool_calls(
        prompt_with([a], messages=history), tool_calls_response(("a", ""))
    )
    assert result.conversation_history[-1].responses[0].data == "a ok"
    # without any user message the whole history is the turn
    with pytest.raises(ToolCallLimitExceeded):
        await ToolCallingManager().aexecute_tool_calls(
            prompt_with([a], messages=earlier_round("a", 40)), tool_calls_response(("a", ""))
        )


async def test_total_limit_text_and_no_tool_name() -> None:
    manager = ToolCallingManager(max_total_tool_calls=3)
    tools = [FakeTool("a"), FakeTool("b")]
    history = [UserMessage(text="q"), *earlier_round("a", 2)]
    with pytest.raises(ToolCallLimitExceeded) as raised:
        await manager.aexecute_tool_calls(
            prompt_with(tools, messages=history), tool_calls_response(("b", ""), ("b", ""))
        )
    assert str(raised.value) == "Total tool call limit (3) exceeded for this turn"
    assert (raised.value.tool_name, raised.value.limit) == (None, 3)
    assert raised.value.breach_response.data == TOTAL.format(n=3)


async def test_return_error_answers_only_the_breaching_calls() -> None:
    a, b = FakeTool("a"), FakeTool("b")
    manager = ToolCallingManager(max_calls_per_tool=1, on_limit_exceeded="return_error")
    result = await manager.aexecute_tool_calls(
        prompt_with([a, b]), tool_calls_response(("a", ""), ("a", ""), ("b", ""), ("a", ""))
    )
    responses = result.conversation_history[-1].responses
    assert [(r.data, r.is_error) for r in responses] == [
        ("a ok", False),
        (PER_TOOL.format(n=1, name="a"), True),
        ("b ok", False),
        (PER_TOOL.format(n=1, name="a"), True),
    ]
    assert len(a.calls) == 1


@pytest.mark.parametrize(
    ("settings", "calls", "outcome"),
    [
        # a per-tool override replaces the default for that tool only
        ({"max_calls_per_tool": 1, "per_tool_limits": {"a": 3}}, ["a"] * 3 + ["b"] * 2,
         [False] * 3 + [False, True]),
        # an excluded tool has no limit of its own but counts toward the total
        ({"max_calls_per_tool": 1, "excluded_from_limits": ["a"], "max_total_tool_calls": 3},
         ["a", "a", "a", "a"], [False, False, False, True]),
        # a single name is one name, not its characters
        ({"max_calls_per_tool": 1, "excluded_from_limits": "ab"}, ["ab", "ab", "a"],
         [False, False, False]),
        # None is unlimited
        ({"max_calls_per_tool": None, "max_total_tool_calls": None}, ["a"] * 200, [False] * 200),
        # the per-tool limit is checked before the total
        ({"max_calls_per_tool": 1, "max_total_tool_calls": 1}, ["a", "a"], [False, "per-tool"]),
    ],
)  # fmt: skip
async def test_limit_settings(
    settings: dict[str, Any], calls: list[str], outcome: list[bool | str]
) -> None:
    manager = ToolCallingManager(
        on_limit_exceeded="return_error", max_identical_calls=None, **settings
    )
    tools = [FakeTool(name) for name in sorted(set(calls))]
    result = await manager.aexecute_tool_calls(
        prompt_with(tools), tool_calls_response(*[(name, "") for name in calls])
    )
    responses = result.conversation_history[-1].responses
    assert [r.is_error for r in responses] == [bool(o) for o in outcome]
    for response, expected in zip(responses, outcome, strict=True):
        if expected == "per-tool":
            assert response.data.startswith("Tool call limit (1) exceeded for tool 'a'")


async def test_unknown_tools_count_toward_the_limits() -> None:
    manager = ToolCallingManager(max_total_tool_calls=1)
    with pytest.raises(ToolCallLimitExceeded):
        await manager.aexecute_tool_calls(
            prompt_with([FakeTool("a")]), tool_calls_response(("nope", ""), ("a", ""))
        )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max_calls_per_tool": 0}, "max_calls_per_tool must be a positive integer or None"),
        ({"max_total_tool_calls": -1}, "max_total_tool_calls must be a positive integer or None"),
        ({"per_tool_limits": {"a": 0}}, "per_tool_limits['a'] must be a positive integer"),
        ({"max_calls_per_tool": True}, "max_calls_per_tool must be a positive integer"),
        (
            {"per_tool_limits": {"a": 2}, "excluded_from_limits": ["a"]},
            "Tools ['a'] are both excluded from limits and given a per-tool limit",
        ),
    ],
)
def test_bad_limit_settings(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        ToolCallingManager(**settings)
    assert message in str(raised.value)
