"""repair_tool_pairs: the pass the loop runs before each model request."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _memory_helpers import answer, calls, results, system, tool_pairing_problems, user
from tooluse.memory import UNANSWERED_TOOL_CALL_RESULT, repair_tool_pairs
from tooluse.messages import (
    AssistantMessage,
    Message,
    ToolResponse,
    ToolResponseMessage,
)


def error_results(*ids: str) -> ToolResponseMessage:
    return ToolResponseMessage(
        responses=tuple(
            ToolResponse(id=i, name="lookup", data=UNANSWERED_TOOL_CALL_RESULT, is_error=True)
            for i in ids
        )
    )


def test_a_well_formed_history_comes_back_unchanged(caplog: pytest.LogCaptureFixture) -> None:
    history: list[Message] = [
        system("S"),
        user("Q"),
        calls("a", "b"),
        results("a"),
        results("b"),
        calls("c"),
        results("c"),
        answer("done"),
    ]
    with caplog.at_level(logging.WARNING):
        assert repair_tool_pairs(history) == history
    assert caplog.records == []


def test_orphan_results_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        repaired = repair_tool_pairs([results("x"), user("Q"), answer("A")])
    assert repaired == [user("Q"), answer("A")]
    assert "dropped 1 orphan tool result(s)" in caplog.text


def test_a_result_for_another_call_is_dropped_and_the_call_answered() -> None:
    assert repair_tool_pairs([user("Q"), calls("a"), results("zzz"), answer("A")]) == [
        user("Q"),
        calls("a"),
        error_results("a"),
        answer("A"),
    ]


def test_only_the_orphans_of_a_mixed_tool_message_are_dropped() -> None:
    mixed = ToolResponseMessage(
        responses=(*results("a").responses, *results("ghost").responses),
        metadata={"kept": True},
    )
    repaired = repair_tool_pairs([user("Q"), calls("a"), mixed])
    assert repaired == [
        user("Q"),
        calls("a"),
        ToolResponseMessage(responses=results("a").responses, metadata={"kept": True}),
    ]


def test_unanswered_calls_get_an_error_result_after_their_group(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        repaired = repair_tool_pairs([user("Q"), calls("a", "b"), results("a"), user("Q2")])
    assert repaired == [user("Q"), calls("a", "b"), results("a"), error_results("b"), user("Q2")]
    assert "answered 1 unanswered tool call(s)" in caplog.text
    answer_for_b = repaired[3]
    assert isinstance(answer_for_b, ToolResponseMessage)
    assert answer_for_b.responses[0].is_error


def test_a_trailing_call_is_answered_too() -> None:
    assert repair_tool_pairs([user("Q"), calls("a")]) == [user("Q"), calls("a"), error_results("a")]


def test_a_result_separated_from_its_call_is_not_trusted() -> None:
    assert repair_tool_pairs([user("Q"), calls("a"), user("more"), results("a")]) == [
        user("Q"),
        calls("a"),
        error_results("a"),
        user("more"),
    ]


def test_a_second_result_for_one_call_is_dropped() -> None:
    assert repair_tool_pairs([user("Q"), calls("a"), results("a"), results("a")]) == [
        user("Q"),
        calls("a"),
        results("a"),
    ]


# Properties over arbitrary, mostly broken, histories.
_IDS = st.sampled_from(["a", "b", "c"])
_messages = st.lists(
    st.one_of(
        st.builds(user, st.sampled_from(["Q1", "Q2"])),
        st.builds(answer, st.sampled_from(["A1", "A2"])),
        st.builds(system, st.just("S")),
        st.lists(_IDS, min_size=1, max_size=3, unique=True).map(lambda ids: calls(*ids)),
        st.lists(_IDS, min_size=1, max_size=3).map(lambda ids: results(*ids)),
    ),
    max_size=14,
)


@settings(max_examples=200, deadline=None)
@given(_messages)
def test_repaired_histories_are_well_formed_and_lose_no_other_message(
    history: list[Message],
) -> None:
    repaired = repair_tool_pairs(history)
    assert tool_pairing_problems(repaired) == []
    assert repair_tool_pairs(repaired) == repaired
    not_tool = [m for m in history if not isinstance(m, ToolResponseMessage)]
    assert [m for m in repaired if not isinstance(m, ToolResponseMessage)] == not_tool
    original_results = {
        (r.id, r.data) for m in history if isinstance(m, ToolResponseMessage) for r in m.responses
    }
    for message in repaired:
        if isinstance(message, ToolResponseMessage):
            for response in message.responses:
                assert (response.id, response.data) in original_results or (
                    response.is_error and response.data == UNANSWERED_TOOL_CALL_RESULT
                )


@settings(max_examples=200, deadline=None)
@given(_messages)
def test_repair_never_answers_a_call_that_had_its_result(history: list[Message]) -> None:
    repaired = repair_tool_pairs(history)
    for index, message in enumerate(repaired):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            group = []
            for follower in repaired[index + 1 :]:
                if not isinstance(follower, ToolResponseMessage):
                    break
                group.extend(follower.responses)
            assert [r.id for r in group if r.is_error] == [
                r.id for r in group if r.data == UNANSWERED_TOOL_CALL_RESULT
            ]
            assert sorted(r.id for r in group) == sorted(c.id for c in message.tool_calls)
