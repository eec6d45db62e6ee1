"""MessageWindowChatMemory: Spring's window test vectors, our deviations, and properties."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _memory_helpers import answer, calls, results, system, tool_pairing_problems, user
from tooluse.history import HELD_TOOL_CALL_RESULT, held_round_record
from tooluse.memory import (
    CONVERSATION_ID,
    ChatMemory,
    InMemoryChatMemoryRepository,
    MessageWindowChatMemory,
)
from tooluse.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)


def window_after(max_messages: int, *batches: list[Message]) -> list[Message]:
    memory = MessageWindowChatMemory(max_messages=max_messages)
    for batch in batches:
        memory.add("c", batch)
    return memory.get("c")


def test_conversation_id_key_matches_spring() -> None:
    assert CONVERSATION_ID == "chat_memory_conversation_id"


def test_default_window_is_twenty_messages_in_memory() -> None:
    memory = MessageWindowChatMemory()
    assert memory.max_messages == 20
    assert isinstance(memory.repository, InMemoryChatMemoryRepository)
    assert isinstance(memory, ChatMemory)
    for n in range(30):
        memory.add("c", [user(f"q{n}"), answer(f"a{n}")])
    kept = memory.get("c")
    assert len(kept) == 20
    assert kept[0] == user("q20")


# Spring's MessageWindowChatMemoryTests vectors (spring-ai-behaviour.md section 1.11).
@pytest.mark.parametrize(
    ("max_messages", "batches", "expected"),
    [
        (2, [[user("U1"), answer("A1"), user("U2"), answer("A2"), user("U3")]], [user("U3")]),
        (
            3,
            [[user("Q1"), answer("A1"), user("Q2"), answer("A2"), user("Q3"), answer("A3")]],
            [user("Q3"), answer("A3")],
        ),
        (
            4,
            [[user("Q1"), calls("s1"), results("s1"), answer("Final"), user("Q2"), answer("A2")]],
            [user("Q2"), answer("A2")],
        ),
        (
            4,
            [[user("M1"), answer("R1"), user("M2"), answer("R2"), user("M3"), answer("R3")]],
            [user("M2"), answer("R2"), user("M3"), answer("R3")],
        ),
        (
            3,
            [[system("S"), user("U1"), answer("A1")], [user("U2"), answer("A2")]],
            [system("S"), user("U2"), answer("A2")],
        ),
        (
            3,
            [[system("S1"), system("S2"), user("U1"), answer("A1")], [user("U2"), answer("A2")]],
            [system("S1"), system("S2")],
        ),
        (2, [[system("S1"), system("S2")], [system("S3")]], [system("S3")]),
    ],
)
def test_spring_window_vectors(
    max_messages: int, batches: list[list[Message]], expected: list[Message]
) -> None:
    assert window_after(max_messages, *batches) == expected


def test_one_message_at_a_time_gives_the_same_window() -> None:
    memory = MessageWindowChatMemory(max_messages=2)
    for message in [user("U1"), answer("A1"), user("U2"), answer("A2"), user("U3")]:
        memory.add("c", message)
    assert memory.get("c") == [user("U3")]


def test_a_stored_system_message_sent_again_keeps_the_others() -> None:
    kept = window_after(10, [system("S1"), user("U1")], [system("S1"), user("U2")])
    assert kept == [system("S1"), user("U1"), system("S1"), user("U2")]


def test_a_changed_system_message_replaces_the_stored_ones() -> None:
    kept = window_after(10, [system("old"), user("U1"), answer("A1")], [system("new"), user("U2")])
    assert kept == [user("U1"), answer("A1"), system("new"), user("U2")]


def test_a_turn_larger_than_the_window_is_evicted_whole() -> None:
    turn = [user("Q"), calls("1"), results("1"), calls("2"), results("2"), answer("done")]
    assert window_after(3, turn) == []


def test_a_tool_result_whose_call_was_evicted_never_starts_the_window() -> None:
    # Spring keeps [result] here (its inside-the-loop duplication test ends that way).
    assert window_after(1, [user("Q"), calls("1")]) == []
    assert window_after(1, [user("Q"), calls("1")], [results("1")]) == []
    assert window_after(5, [results("1"), user("Q")]) == [user("Q")]


def test_tool_calls_and_results_survive_the_window_together() -> None:
    turn = [user("Q2"), calls("a", "b"), results("a", "b"), answer("A2")]
    kept = window_after(5, [user("Q1"), answer("A1")], turn)
    assert kept == turn


def test_the_completed_round_replaces_the_record_of_the_round_held_for_approval() -> None:
    paused = [user("Q"), calls("a", "b")]
    record = held_round_record(calls("a", "b"), results("a"))
    assert [r.data for r in record.responses] == ["result a", HELD_TOOL_CALL_RESULT]
    completed = [results("a", "b"), answer("A")]
    assert window_after(10, paused, [record], completed) == [*paused, *completed]
    # Results that do not answer every call of the record are no completion of it.
    assert window_after(10, paused, [record], [results("b")]) == [*paused, record, results("b")]
    # Resumed after the conversation moved on: the record is completed where it is.
    later = [user("Q2"), answer("A2")]
    assert window_after(10, paused, [record], later, completed) == [
        *paused,
        completed[0],
        *later,
        completed[1],
    ]


def test_a_resumed_turn_replaces_the_messages_of_its_pause_where_they_are() -> None:
    record = [
        UserMessage(text="Q", paused_turn="t1"),
        AssistantMessage(text="waits", paused_turn="t1"),
    ]
    resumed = [UserMessage(text="Q", paused_turn="t1"), answer("A")]
    earlier, later = [user("Q0"), answer("A0")], [user("Q2"), answer("A2")]
    assert window_after(10, earlier, record, resumed) == [*earlier, *resumed]
    assert window_after(10, earlier, record, later, resumed) == [*earlier, *resumed, *later]
    # Another turn's mark, or none at the start of the batch, replaces nothing.
    other = [UserMessage(text="Q", paused_turn="t2"), answer("A")]
    assert window_after(10, record, other) == [*record, *other]
    assert window_after(10, record, [answer("A"), *record]) == [*record, answer("A"), *record]
    # With its record gone (cut by the window), the resumed turn is appended.
    assert window_after(2, record, later, resumed) == resumed


def test_conversations_are_separate_and_clear_removes_one() -> None:
    memory = MessageWindowChatMemory(max_messages=5)
    memory.add("a", user("for a"))
    memory.add("b", user("for b"))
    memory.clear("a")
    assert memory.get("a") == []
    assert memory.get("b") == [user("for b")]


def test_empty_batch_changes_nothing() -> None:
    memory = MessageWindowChatMemory()
    memory.add("c", [])
    assert memory.get("c") == []
    assert memory.repository.find_conversation_ids() == []


async def test_async_forms_match_the_sync_ones() -> None:
    memory = MessageWindowChatMemory(max_messages=2)
    await memory.aadd("c", [user("U1"), answer("A1"), user("U2")])
    assert await memory.aget("c") == [user("U2")]
    await asyncio.gather(*(memory.aadd(f"c{n}", user("x")) for n in range(10)))
    assert len(memory.repository.find_conversation_ids()) == 11
    await memory.aclear("c")
    assert await memory.aget("c") == []


@pytest.mark.parametrize("bad", [0, -1])
def test_max_messages_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError, match="max_messages must be greater than 0"):
        MessageWindowChatMemory(max_messages=bad)


def test_max_messages_must_be_an_int() -> None:
    with pytest.raises(TypeError, match="max_messages must be an int"):
        MessageWindowChatMemory(max_messages=2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad_id", ["", "   ", "\n"])
def test_blank_conversation_ids_are_rejected(bad_id: str) -> None:
    memory = MessageWindowChatMemory()
    for operation in (
        lambda: memory.add(bad_id, user("x")),
        lambda: memory.get(bad_id),
        lambda: memory.clear(bad_id),
    ):
        with pytest.raises(ValueError, match="conversation id must not be blank"):
            operation()


def test_non_string_conversation_ids_are_rejected() -> None:
    with pytest.raises(TypeError, match="conversation id must be a str, got int"):
        MessageWindowChatMemory().get(42)  # type: ignore[arg-type]


def test_non_messages_are_rejected_with_their_position() -> None:
    memory = MessageWindowChatMemory()
    with pytest.raises(TypeError, match=r"messages\[1\] is not a message: 'oops'"):
        memory.add("c", [user("fine"), "oops"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="expected a message or a sequence of messages"):
        memory.add("c", "just text")  # type: ignore[arg-type]
    assert memory.get("c") == []


# Properties: conversations built from turns (a user message, rounds of tool calls each
# followed by their results, maybe a final answer), fed to memory in arbitrary batches.


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    for turn in range(draw(st.integers(1, 6))):
        if draw(st.booleans()) and draw(st.booleans()):
            messages.append(system(draw(st.sampled_from(["S1", "S2"]))))
        messages.append(user(f"U{turn}"))
        for round_ in range(draw(st.integers(0, 3))):
            ids = [f"t{turn}r{round_}c{n}" for n in range(draw(st.integers(1, 3)))]
            messages.append(calls(*ids))
            messages.append(results(*ids))
        if draw(st.booleans()):
            messages.append(answer(f"A{turn}"))
    return messages


@st.composite
def batched(draw: st.DrawFn) -> list[list[Message]]:
    messages = draw(conversations())
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(messages) - 1)), max_size=8)))
    bounds = [0, *cuts, len(messages)]
    return [messages[a:b] for a, b in itertools.pairwise(bounds) if a < b]


@settings(max_examples=200, deadline=None)
@given(batches=batched(), max_messages=st.integers(1, 12))
def test_no_window_starts_with_a_tool_result_or_splits_a_call_from_its_result(
    batches: list[list[Message]], max_messages: int
) -> None:
    memory = MessageWindowChatMemory(max_messages=max_messages)
    for batch in batches:
        memory.add("c", batch)
        window = memory.get("c")
        rest = [m for m in window if not isinstance(m, SystemMessage)]
        assert not rest or not isinstance(rest[0], ToolResponseMessage)
        # Only the newest message may be a call still waiting for its results (memory inside
        # the loop stores a round's calls before they are answered).
        last = window[-1] if window else None
        if isinstance(last, AssistantMessage) and last.tool_calls and last == batch[-1]:
            assert tool_pairing_problems(window[:-1]) == []
        else:
            assert tool_pairing_problems(window) == []
        assert len(rest) <= max_messages
