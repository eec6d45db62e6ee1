"""repair_tool_pairs: the pass the loop runs before each model request."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _loop_tools import RecordingTool
from _memory_helpers import answer, calls, results, system, tool_pairing_problems, user
from tooluse.client import ChatClient
from tooluse.history import held_round_record
from tooluse.memory import UNANSWERED_TOOL_CALL_RESULT, repair_tool_pairs
from tooluse.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    ProviderContent,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
)
from tooluse.testing import ScriptedModel, tool_call

PICTURE = ImagePart("image/png", "iVBORw==")


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


def test_a_held_round_record_gives_way_to_the_completed_round_stored_after_it() -> None:
    """What a memory that only appends keeps of a resumed approval, also when other turns
    were stored between the pause and the resume: the completed round takes the record's
    place and its answer stays where it was stored."""
    record = held_round_record(calls("a", "b"), results("a"))
    completed = results("a", "b")
    history = [user("Q"), calls("a", "b"), record, user("Q2"), answer("A2"), completed, answer("A")]

    assert repair_tool_pairs(history) == [
        user("Q"),
        calls("a", "b"),
        completed,
        user("Q2"),
        answer("A2"),
        answer("A"),
    ]


def test_calls_of_one_round_sharing_an_id_get_ids_of_their_own_and_keep_their_results(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Providers reject repeated call ids (OpenAI, Anthropic) or unequal numbers of calls and
    # results (Mistral); keeping one result per id was rejected too, and lost a result.
    shared = [
        AssistantMessage(
            tool_calls=(
                ToolCall(id="x", name="lookup", arguments='{"q": 1}'),
                ToolCall(id="x_2", name="lookup", arguments='{"q": 2}'),
                ToolCall(id="x", name="lookup", arguments='{"q": 3}'),
            )
        ),
        ToolResponseMessage(
            responses=(
                ToolResponse(id="x", name="lookup", data="one"),
                ToolResponse(id="x_2", name="lookup", data="two"),
                ToolResponse(id="x", name="lookup", data="three", images=[PICTURE]),
            )
        ),
    ]
    with caplog.at_level(logging.WARNING):
        repaired = repair_tool_pairs([user("Q"), *shared, answer("A")])
    assert "gave 1 tool call(s) sharing an id" in caplog.text
    call_message, results_message = repaired[1], repaired[2]
    assert isinstance(call_message, AssistantMessage)
    assert isinstance(results_message, ToolResponseMessage)
    assert [(c.id, c.arguments) for c in call_message.tool_calls] == [
        ("x", '{"q": 1}'),
        ("x_2", '{"q": 2}'),
        ("x_3", '{"q": 3}'),
    ]
    assert [(r.id, r.data) for r in results_message.responses] == [
        ("x", "one"),
        ("x_2", "two"),
        ("x_3", "three"),
    ]
    assert results_message.responses[2].images == (PICTURE,)  # renamed, images kept
    assert repair_tool_pairs(repaired) == repaired


def test_a_call_sharing_an_id_left_without_a_result_is_answered_under_its_own_id() -> None:
    assert repair_tool_pairs([user("Q"), calls("x", "x"), results("x")]) == [
        user("Q"),
        calls("x", "x_2"),
        results("x"),
        error_results("x_2"),
    ]


def test_the_loop_sends_both_results_of_a_round_whose_calls_share_an_id() -> None:
    lookup = RecordingTool("lookup", lambda arguments, context: f"found {arguments['q']}")
    model = ScriptedModel(
        [[tool_call("lookup", {"q": 1}, id="x"), tool_call("lookup", {"q": 2}, id="x")], "done"]
    )
    assert ChatClient(model, tools=[lookup]).prompt("Q").call().content() == "done"
    *_, call_message, results_message = model.requests[1].messages
    assert isinstance(call_message, AssistantMessage)
    assert isinstance(results_message, ToolResponseMessage)
    assert [call.id for call in call_message.tool_calls] == ["x", "x_2"]
    assert [(r.id, r.data) for r in results_message.responses] == [
        ("x", "found 1"),
        ("x_2", "found 2"),
    ]


# Properties over arbitrary, mostly broken, histories.
def without_call_ids(message: Message) -> Message:
    if not isinstance(message, AssistantMessage):
        return message
    calls = tuple(call.model_copy(update={"id": ""}) for call in message.tool_calls)
    return message.model_copy(update={"tool_calls": calls})


_IDS = st.sampled_from(["a", "b", "c"])
_messages = st.lists(
    st.one_of(
        st.builds(user, st.sampled_from(["Q1", "Q2"])),
        st.builds(answer, st.sampled_from(["A1", "A2"])),
        st.builds(system, st.just("S")),
        st.lists(_IDS, min_size=1, max_size=3).map(lambda ids: calls(*ids)),
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
    for message in repaired:
        if isinstance(message, AssistantMessage):
            ids = [call.id for call in message.tool_calls]
            assert len(ids) == len(set(ids))
    # Only the ids of calls sharing an id with another call of their round may change.
    not_tool = [without_call_ids(m) for m in history if not isinstance(m, ToolResponseMessage)]
    assert [
        without_call_ids(m) for m in repaired if not isinstance(m, ToolResponseMessage)
    ] == not_tool
    original_results = {
        r.data for m in history if isinstance(m, ToolResponseMessage) for r in m.responses
    }
    for message in repaired:
        if isinstance(message, ToolResponseMessage):
            for response in message.responses:
                assert response.data in original_results or (
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


def test_the_repair_keeps_a_turns_provider_content() -> None:
    """The blocks a provider wants back unchanged (Anthropic's server tool calls and results)
    stay on the turn, whether the repair answers its calls or gives them ids of their own."""
    content = ProviderContent(provider="anthropic", blocks=[{"type": "server_tool_use", "id": "s"}])
    unanswered = calls("a").model_copy(update={"provider_content": content})
    sharing = calls("b", "b").model_copy(update={"provider_content": content})
    repaired = repair_tool_pairs([user("Q"), unanswered, user("Q2"), sharing, results("b", "b")])

    turns = [m for m in repaired if isinstance(m, AssistantMessage)]
    assert [[call.id for call in turn.tool_calls] for turn in turns] == [["a"], ["b", "b_2"]]
    assert [turn.provider_content for turn in turns] == [content, content]
