"""A QA turn paused for approval, in memory: abandoned, resumed, paused again, superseded."""

from __future__ import annotations

import json

import pytest

from _qa_helpers import CountingMemory, CountingRetriever
from tooluse import Approve, Deny, tool
from tooluse.messages import (
    AssistantMessage,
    Message,
    Prompt,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.qa import (
    PAUSED_TURN_NOTE,
    RESUMING_TURN_NOTE,
    STOPPED_TURN_NOTE,
    DeltaEvent,
    QaPause,
    QaPipeline,
    StalePauseError,
)
from tooluse.testing import FunctionModel, ResponseLike, ScriptedModel, tool_call

CANCELLED: list[str] = []  # the orders cancel_order really cancelled, in order


@tool
def order_status(order_id: str) -> dict[str, str]:
    """Live status of an order."""
    return {"order_id": order_id, "status": "shipped"}


@tool(requires_approval=True)
def cancel_order(order_id: str) -> dict[str, object]:
    """Cancel an order."""
    CANCELLED.append(order_id)
    return {"order_id": order_id, "cancelled": True}


@pytest.fixture(autouse=True)
def _no_cancellations() -> None:
    CANCELLED.clear()


STATUS_AND_CANCEL = [
    tool_call("order_status", {"order_id": "A1"}, id="s"),
    tool_call("cancel_order", {"order_id": "A1"}, id="x"),
]


def pipeline_of(model: ScriptedModel | FunctionModel, memory: CountingMemory) -> QaPipeline:
    return QaPipeline(
        model, retriever=CountingRetriever(), tools=[order_status, cancel_order], memory=memory
    )


def without_system(messages: tuple[Message, ...] | list[Message]) -> list[Message]:
    return [m for m in messages if not isinstance(m, SystemMessage)]


def assert_plain_text(messages: list[Message]) -> None:
    """What a model without tool definitions can be sent: no call, no result."""
    assert not any(isinstance(m, ToolResponseMessage) for m in messages)
    assert not any(isinstance(m, AssistantMessage) and m.tool_calls for m in messages)


async def test_an_abandoned_pause_is_remembered_as_text_both_stages_read() -> None:
    memory = CountingMemory()
    model = ScriptedModel([STATUS_AND_CANCEL, "", "Within 30 days."])
    pipeline = pipeline_of(model, memory)

    paused = await pipeline.acall("Cancel order A1", conversation_id="u1")
    assert paused.pause is not None and CANCELLED == []
    # The user asks something else instead of deciding.
    result = await pipeline.acall("How long can I return things?", conversation_id="u1")
    assert result.answer == "Within 30 days."

    router, answer = model.requests[1], model.requests[2]
    for request in (router, answer):
        earlier = without_system(request.messages)[:-1]
        assert [type(m) for m in earlier] == [UserMessage, AssistantMessage]
        assert earlier[0].text == "Cancel order A1"
        account = earlier[1].text
        assert '"status":"shipped"' in account  # what the call that ran returned
        assert 'cancel_order {"order_id": "A1"}' in account  # the call that waited
        assert "not run" in account and "approval" in account
        assert_plain_text(earlier)
    assert without_system(router.messages)[-1].text == "How long can I return things?"
    assert [m.text for m in memory.get("u1")][2:] == [
        "How long can I return things?",
        "Within 30 days.",
    ]
    assert memory.get("u1")[:2] == without_system(answer.messages)[:2]
    assert account.startswith(PAUSED_TURN_NOTE)


async def test_a_resumed_turn_replaces_its_record_once() -> None:
    memory = CountingMemory()
    model = ScriptedModel([STATUS_AND_CANCEL, "", "A1 is cancelled."])
    pipeline = pipeline_of(model, memory)
    pause = (await pipeline.acall("Cancel order A1", conversation_id="u1")).pause
    assert pause is not None

    result = await pipeline.aresume(QaPause.from_json(pause.to_json()), {"x": Approve()})

    assert result.answer == "A1 is cancelled." and CANCELLED == ["A1"]
    answer = model.requests[-1]
    # The answer stage read neither the record nor the question twice.
    assert [type(m) for m in answer.messages] == [SystemMessage, UserMessage]
    assert "cancelled" in answer.messages[-1].text
    assert [(m.role, m.text) for m in memory.get("u1")] == [
        ("user", "Cancel order A1"),
        ("assistant", "A1 is cancelled."),
    ]
    # Resumed once: the record is gone, so a second resume is refused before anything runs.
    with pytest.raises(StalePauseError, match="no longer waiting"):
        await pipeline.aresume(pause, {"x": Approve()})
    assert CANCELLED == ["A1"]


async def test_a_denied_turn_replaces_its_record_too() -> None:
    memory = CountingMemory()
    model = ScriptedModel([STATUS_AND_CANCEL, "", "A1 stays; it has shipped."])
    pipeline = pipeline_of(model, memory)
    pause = (await pipeline.acall("Cancel order A1", conversation_id="u1")).pause
    assert pause is not None
    await pipeline.aresume(pause, {"x": Deny("No.")})
    assert [m.text for m in memory.get("u1")] == ["Cancel order A1", "A1 stays; it has shipped."]
    assert CANCELLED == []


async def test_a_pause_cannot_be_resumed_once_the_conversation_went_on() -> None:
    memory = CountingMemory()
    model = ScriptedModel([STATUS_AND_CANCEL, "", "Within 30 days."])
    pipeline = pipeline_of(model, memory)
    pause = (await pipeline.acall("Cancel order A1", conversation_id="u1")).pause
    assert pause is not None
    await pipeline.acall("How long can I return things?", conversation_id="u1")
    stored = memory.get("u1")

    with pytest.raises(StalePauseError, match="went on after the run paused"):
        await pipeline.aresume(pause, {"x": Approve()})

    assert CANCELLED == [] and len(model.requests) == 3  # no tool, no model call
    assert memory.get("u1") == stored


async def test_a_turn_paused_again_keeps_one_record_with_all_its_data() -> None:
    memory = CountingMemory()
    model = ScriptedModel(
        [
            STATUS_AND_CANCEL,
            tool_call("cancel_order", {"order_id": "B2"}, id="y"),  # after the first approval
            "",
            "A1 and B2 are cancelled.",
        ]
    )
    pipeline = pipeline_of(model, memory)
    first = (await pipeline.acall("Cancel A1, then B2", conversation_id="u1")).pause
    assert first is not None
    second = (await pipeline.aresume(first, {"x": Approve()})).pause
    assert second is not None and second.turn_id == first.turn_id

    stored = memory.get("u1")
    assert [m.role for m in stored] == ["user", "assistant"]
    account = stored[1].text
    assert '"cancelled":true' in account and '"status":"shipped"' in account
    assert 'Not run: cancel_order {"order_id": "B2"}' in account
    assert '"A1"}' not in account.split("Not run:")[1].split("\n")[0]  # A1 ran

    # The first pause's decisions were taken: it is not resumed twice.
    with pytest.raises(StalePauseError, match="no longer waiting"):
        await pipeline.aresume(first, {"x": Approve()})
    await pipeline.aresume(second, {"y": Approve()})
    assert [m.text for m in memory.get("u1")] == ["Cancel A1, then B2", "A1 and B2 are cancelled."]
    assert CANCELLED == ["A1", "B2"]


def failing_answer(prompt: Prompt) -> ResponseLike:
    """The router's script (status and cancel, then stop); the answer model is down."""
    if not prompt.options.tool_callbacks:
        raise ConnectionError("answer model unreachable")
    if isinstance(prompt.messages[-1], ToolResponseMessage):
        return ""
    return STATUS_AND_CANCEL


async def test_a_resumed_turn_that_fails_before_its_answer_records_what_ran() -> None:
    memory = CountingMemory()
    pipeline = pipeline_of(FunctionModel(failing_answer), memory)
    pause = (await pipeline.acall("Cancel order A1", conversation_id="u1")).pause
    assert pause is not None

    with pytest.raises(ConnectionError, match="answer model unreachable"):
        await pipeline.aresume(pause, {"x": Approve()})

    # The approved call ran: the record no longer says it waits, and holds its result.
    assert CANCELLED == ["A1"]
    question, account = memory.get("u1")
    assert question.text == "Cancel order A1"
    assert account.text.startswith(STOPPED_TURN_NOTE)
    assert '"cancelled":true' in account.text and "Not run" not in account.text
    assert (question.paused_turn, question.metadata) == (pause.turn_id, {})
    # A second try is refused: the approved call must not run twice.
    with pytest.raises(StalePauseError, match="no longer waiting"):
        await pipeline.aresume(pause, {"x": Approve()})
    assert CANCELLED == ["A1"]


async def test_a_resumed_turn_left_during_its_answer_records_what_ran() -> None:
    memory = CountingMemory()
    model = ScriptedModel([STATUS_AND_CANCEL, "", "A1 is cancelled, as you asked."], chunk_size=4)
    pipeline = pipeline_of(model, memory)
    pause = (await pipeline.acall("Cancel order A1", conversation_id="u1")).pause
    assert pause is not None

    stream = pipeline.resume_stream(pause, {"x": Approve()})
    async for event in stream:
        if isinstance(event, DeltaEvent):
            break  # the client went away while the answer streamed
    await stream.aclose()  # type: ignore[attr-defined]

    assert CANCELLED == ["A1"]
    assert memory.get("u1")[1].text.startswith(STOPPED_TURN_NOTE)


async def test_a_pause_written_before_turn_ids_still_resumes() -> None:
    memory = CountingMemory()
    model = ScriptedModel([STATUS_AND_CANCEL, "", "A1 is cancelled."])
    pipeline = pipeline_of(model, memory)
    pause = (await pipeline.acall("Cancel order A1", conversation_id="u1")).pause
    assert pause is not None
    memory.clear("u1")  # an older tooluse stored nothing at the pause
    old = json.loads(pause.to_json())
    del old["turn_id"]
    old["version"] = 1

    result = await pipeline.aresume(QaPause.from_json(json.dumps(old)), {"x": Approve()})

    assert result.answer == "A1 is cancelled."
    assert [m.text for m in memory.get("u1")] == ["Cancel order A1", "A1 is cancelled."]


async def test_a_run_without_a_conversation_stores_nothing_at_its_pause() -> None:
    model = ScriptedModel([STATUS_AND_CANCEL, "", "A1 is cancelled."])
    pipeline = QaPipeline(model, retriever=CountingRetriever(), tools=[order_status, cancel_order])
    history = [UserMessage(text="Hi"), AssistantMessage(text="Hello!")]
    pause = (await pipeline.acall("Cancel order A1", history=history)).pause
    assert pause is not None and pause.conversation_id is None
    result = await pipeline.aresume(pause, {"x": Approve()})
    assert result.answer == "A1 is cancelled."
    assert [m.text for m in model.requests[-1].messages[1:3]] == ["Hi", "Hello!"]


async def test_while_approved_calls_run_memory_says_they_may_have_run() -> None:
    # A process killed while an approved call ran (kill -9, a crash) left memory saying the
    # call was "Not run ... It runs only if it is asked for again and approved": asked again
    # and approved, it ran twice.
    memory = CountingMemory()
    seen_while_running: list[str] = []

    @tool(requires_approval=True)
    def cancel_order(order_id: str) -> dict[str, object]:
        """Cancel an order."""
        seen_while_running.extend(m.text or "" for m in memory.get("u1"))
        CANCELLED.append(order_id)
        return {"order_id": order_id, "cancelled": True}

    model = ScriptedModel([STATUS_AND_CANCEL, "", "A1 is cancelled."])
    pipeline = QaPipeline(
        model, retriever=CountingRetriever(), tools=[order_status, cancel_order], memory=memory
    )
    pause = (await pipeline.acall("Cancel order A1", conversation_id="u1")).pause
    assert pause is not None
    await pipeline.aresume(pause, {"x": Approve(arguments={"order_id": "A1"})})

    question, account = seen_while_running
    assert question == "Cancel order A1"
    assert account.startswith(RESUMING_TURN_NOTE)
    assert '\nOutcome unknown: it may have run: cancel_order {"order_id": "A1"}\n' in account
    assert "Not run" not in account and PAUSED_TURN_NOTE not in account
    # The pause can no longer be resumed from that record: the call must not run twice.
    with pytest.raises(StalePauseError, match="no longer waiting"):
        await pipeline.aresume(pause, {"x": Approve()})
    # The answered turn replaced the record.
    assert [m.text for m in memory.get("u1")] == ["Cancel order A1", "A1 is cancelled."]
    assert CANCELLED == ["A1"]
