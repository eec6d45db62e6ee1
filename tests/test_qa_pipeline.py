"""The two-stage router/answer pipeline (SPEC section 10, seed 001)."""

from __future__ import annotations

import asyncio
import json

import pytest

from _qa_helpers import CountingMemory, CountingRetriever
from tooluse import Approve, Deny, tool
from tooluse.memory import MessageWindowChatMemory
from tooluse.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.qa import (
    LEDGER_KEY,
    ROUTER_SYSTEM,
    ApprovalRequiredEvent,
    DeltaEvent,
    DoneEvent,
    QaPause,
    QaPipeline,
    RouteEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from tooluse.rag import Document
from tooluse.testing import FunctionModel, ScriptedModel, tool_call

KNOWLEDGE = [Document(text="Returns: items can be returned within 30 days.", id="returns")]


@tool
def order_status(order_id: str) -> dict[str, str]:
    """Live status of an order."""
    return {"order_id": order_id, "status": "shipped"}


@tool(requires_approval=True)
def cancel_order(order_id: str) -> dict[str, object]:
    """Cancel an order."""
    return {"order_id": order_id, "cancelled": True}


async def events_of(stream: object) -> list[object]:
    return [event async for event in stream]  # type: ignore[attr-defined]


def kinds(events: list[object]) -> list[str]:
    return [event.kind for event in events]  # type: ignore[attr-defined]


def squeeze(names: list[str]) -> list[str]:
    """Consecutive deltas as one, so sequences do not depend on the chunk size."""
    return [n for i, n in enumerate(names) if not (n == "delta" and i and names[i - 1] == "delta")]


async def test_tool_question_skips_retrieval_and_answers_from_the_fetched_data() -> None:
    model = ScriptedModel(
        [tool_call("order_status", {"order_id": "A1"}, id="c1"), "", "Order A1 has shipped."]
    )
    retriever = CountingRetriever(KNOWLEDGE)
    pipeline = QaPipeline(model, retriever=retriever, tools=[order_status])

    events = await events_of(pipeline.stream("Where is order A1?"))

    assert squeeze(kinds(events)) == ["tool_call", "tool_result", "route", "delta", "done"]
    assert events[0] == ToolCallEvent("c1", "order_status", '{"order_id": "A1"}')
    assert events[1] == ToolResultEvent(
        "c1", "order_status", '{"order_id":"A1","status":"shipped"}', False
    )
    assert events[2] == RouteEvent("tools", 1)
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.answer == "Order A1 has shipped."
    assert "".join(e.text for e in events if isinstance(e, DeltaEvent)) == done.answer
    assert done.documents == ()
    assert retriever.queries == []  # the gate: retrieval never ran
    # Three model calls: the router twice (tool round, then stop), the answer once.
    router_first, _, answer = model.requests
    assert [type(m) for m in router_first.messages] == [SystemMessage, UserMessage]
    assert router_first.messages[0].text == ROUTER_SYSTEM
    assert [c.definition.name for c in router_first.options.tool_callbacks] == ["order_status"]
    assert router_first.messages[1].text == "Where is order A1?"  # no documents
    assert answer.options.tool_callbacks == ()  # the answer stage has no tools
    augmented = answer.messages[-1].text
    assert '{"order_id":"A1","status":"shipped"}' in augmented
    assert "order_status" not in augmented  # internal names stay out of the prompt
    # The information block comes before the rules, the question last.
    assert augmented.index("shipped") < augmented.index("Rules") < augmented.index("Where is")


async def test_knowledge_question_retrieves_once_and_answers_from_the_documents() -> None:
    model = ScriptedModel(["", "Within 30 days."])
    retriever = CountingRetriever(KNOWLEDGE)
    pipeline = QaPipeline(model, retriever=retriever, tools=[order_status])

    events = await events_of(pipeline.stream("How long do I have to return an item?"))

    assert squeeze(kinds(events)) == ["route", "delta", "done"]
    assert events[0] == RouteEvent("knowledge", 0)
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert (done.answer, done.route, done.documents) == (
        "Within 30 days.",
        "knowledge",
        tuple(KNOWLEDGE),
    )
    assert len(retriever.queries) == 1
    assert retriever.queries[0].text == "How long do I have to return an item?"
    router, answer = model.requests
    assert "30 days" not in router.messages[-1].text  # the router never sees documents
    assert "[1] Returns: items can be returned within 30 days." in answer.messages[-1].text


async def test_memory_is_read_by_the_router_and_written_once_by_the_answer_stage() -> None:
    memory = CountingMemory()
    model = ScriptedModel(
        [
            tool_call("order_status", {"order_id": "A1"}),
            "",
            "A1 has shipped.",
            tool_call("order_status", {"order_id": "A1"}),
            "",
            "Still shipped.",
        ]
    )
    pipeline = QaPipeline(model, retriever=CountingRetriever(), tools=[order_status], memory=memory)

    first = await pipeline.acall("Where is order A1?", conversation_id="u1")
    assert first.answer == "A1 has shipped."
    assert len(memory.writes) == 1  # the router wrote nothing, the answer stage once
    assert memory.get("u1") == [
        UserMessage(text="Where is order A1?"),  # as asked, not as augmented
        AssistantMessage(text="A1 has shipped."),
    ]

    second = await pipeline.acall("And now?", conversation_id="u1")
    assert second.answer == "Still shipped."
    assert len(memory.writes) == 2
    router = model.requests[3]
    # The router reads the history (to resolve "it") ...
    assert [m.text for m in router.messages[1:]] == [
        "Where is order A1?",
        "A1 has shipped.",
        "And now?",
    ]
    # ... and the fetched data of the first turn never comes back in a later turn.
    assert all('shipped"' not in m.text for m in router.messages if isinstance(m, UserMessage))
    assert [m.text for m in memory.get("u1")][-2:] == ["And now?", "Still shipped."]


async def test_history_without_memory_is_sent_to_both_stages() -> None:
    model = ScriptedModel(["", "Yes."])
    pipeline = QaPipeline(model, retriever=CountingRetriever())
    history = [UserMessage(text="Hi"), AssistantMessage(text="Hello!")]
    result = await pipeline.acall("Can I return it?", history=history)
    assert result.answer == "Yes."
    for request in model.requests:
        assert [m.text for m in request.messages[1:3]] == ["Hi", "Hello!"]


async def test_the_answer_stage_gets_earlier_tool_traffic_as_text_only() -> None:
    """The answer stage has no tools, and Anthropic refuses a request that holds tool calls
    or results without tool definitions ("Requests which include tool_use or tool_result
    blocks must define tools"). Tool traffic in a given history, or in a memory another
    client wrote, reaches the router whole and the answer stage as its text only."""
    earlier = [
        UserMessage(text="Where is A1?"),
        AssistantMessage(
            text="Let me check.", tool_calls=(ToolCall(id="t1", name="order_status"),)
        ),
        ToolResponseMessage(responses=(ToolResponse(id="t1", name="order_status", data="x"),)),
        AssistantMessage(text="A1 has shipped."),
    ]
    memory = MessageWindowChatMemory()
    memory.add("u1", earlier)
    model = ScriptedModel(["", "Yes.", "", "Yes."])
    pipeline = QaPipeline(model, retriever=CountingRetriever(KNOWLEDGE), memory=memory)
    await pipeline.acall("Can I return it?", history=earlier)
    await pipeline.acall("Can I return it?", conversation_id="u1")
    for router, answer in (model.requests[0:2], model.requests[2:4]):
        assert router.messages[1:5] == tuple(earlier)
        assert [(m.role, getattr(m, "text", None)) for m in answer.messages[1:4]] == [
            ("user", "Where is A1?"),
            ("assistant", "Let me check."),
            ("assistant", "A1 has shipped."),
        ]
        assert not any(isinstance(m, ToolResponseMessage) for m in answer.messages)
        assert not any(isinstance(m, AssistantMessage) and m.tool_calls for m in answer.messages)


async def test_approval_pauses_the_router_and_resumes_from_json() -> None:
    model = ScriptedModel(
        [
            [
                tool_call("order_status", {"order_id": "A1"}, id="s"),
                tool_call("cancel_order", {"order_id": "A1"}, id="x"),
            ],
            "",
            "A1 was cancelled.",
        ]
    )
    memory = CountingMemory()
    pipeline = QaPipeline(
        model,
        retriever=CountingRetriever(KNOWLEDGE),
        tools=[order_status, cancel_order],
        memory=memory,
    )

    events = await events_of(pipeline.stream("Cancel order A1", conversation_id="u1"))
    assert kinds(events) == ["tool_call", "tool_call", "tool_result", "approval_required"]
    assert events[2] == ToolResultEvent(
        "s", "order_status", '{"order_id":"A1","status":"shipped"}', False
    )
    paused = events[-1]
    assert isinstance(paused, ApprovalRequiredEvent)
    assert [c.id for c in paused.pending_tool_calls] == ["x"]
    assert [r.tool for r in paused.pause.fetched] == ["order_status"]
    # The paused turn is stored as text (tests/test_qa_paused_turns.py has the details).
    assert [[m.role for m in batch] for batch in memory.writes] == [["user", "assistant"]]
    stored = paused.pause.to_json()
    assert LEDGER_KEY not in json.loads(stored)["router_state"]["tool_context"]

    # Another pipeline object (a restarted process) resumes the stored pause.
    restarted = QaPipeline(
        model,
        retriever=CountingRetriever(KNOWLEDGE),
        tools=[order_status, cancel_order],
        memory=memory,
    )
    resumed = await events_of(restarted.resume_stream(QaPause.from_json(stored), {"x": Approve()}))
    assert squeeze(kinds(resumed)) == ["tool_result", "route", "delta", "done"]
    assert resumed[0] == ToolResultEvent(
        "x", "cancel_order", '{"order_id":"A1","cancelled":true}', False
    )
    assert resumed[1] == RouteEvent("tools", 2)
    answer_prompt = model.requests[-1].messages[-1].text
    # Both fetches, in call order: the one before the pause and the approved one.
    assert answer_prompt.index('"status":"shipped"') < answer_prompt.index('"cancelled":true')
    # The pause's record, then before the approved call ran the record that it may have run
    # (tests/test_qa_paused_turns.py), then the answer.
    assert len(memory.writes) == 3
    # The answered turn took the record's place.
    assert [m.text for m in memory.get("u1")] == ["Cancel order A1", "A1 was cancelled."]


async def test_a_denied_call_fetches_nothing_and_the_answer_uses_the_knowledge_base() -> None:
    model = ScriptedModel(
        [tool_call("cancel_order", {"order_id": "A1"}, id="x"), "", "Not cancelled."]
    )
    retriever = CountingRetriever(KNOWLEDGE)
    pipeline = QaPipeline(model, retriever=retriever, tools=[cancel_order])
    paused = await pipeline.acall("Cancel A1")
    assert paused.pause is not None and paused.answer == "" and paused.route is None

    result = await pipeline.aresume(paused.pause, {"x": Deny("The user said no.")})
    assert result.route == "knowledge"
    assert result.tool_results == (ToolResultEvent("x", "cancel_order", "The user said no.", True),)
    assert len(retriever.queries) == 1


def test_the_sync_forms_pause_and_resume_without_an_event_loop() -> None:
    model = ScriptedModel(
        [tool_call("cancel_order", {"order_id": "A1"}, id="x"), "", "Not cancelled."]
    )
    pipeline = QaPipeline(model, retriever=CountingRetriever(KNOWLEDGE), tools=[cancel_order])
    paused = pipeline.call("Cancel A1")
    assert paused.pause is not None
    result = pipeline.resume(paused.pause, {"x": Deny("The user said no.")})
    assert result.route == "knowledge"
    assert result.answer == "Not cancelled."


async def test_resume_needs_one_decision_per_pending_call() -> None:
    model = ScriptedModel([tool_call("cancel_order", {"order_id": "A1"}, id="x")])
    pipeline = QaPipeline(model, retriever=CountingRetriever(), tools=[cancel_order])
    pause = (await pipeline.acall("Cancel A1")).pause
    assert pause is not None
    with pytest.raises(ValueError, match=r"missing \['x'\]"):
        pipeline.resume_stream(pause, {})
    with pytest.raises(ValueError, match=r"not pending \['y'\]"):
        pipeline.resume_stream(pause, {"x": Approve(), "y": Approve()})
    with pytest.raises(TypeError, match="Approve"):
        pipeline.resume_stream(pause, {"x": "yes"})  # type: ignore[dict-item]


async def test_a_failing_tool_records_nothing_and_its_error_is_traced() -> None:
    @tool
    def broken(order_id: str) -> str:
        """Always fails."""
        raise RuntimeError("backend down")

    model = ScriptedModel([tool_call("broken", {"order_id": "A1"}, id="b"), "", "Sorry."])
    retriever = CountingRetriever(KNOWLEDGE)
    result = await QaPipeline(model, retriever=retriever, tools=[broken]).acall("A1?")
    assert result.tool_results == (ToolResultEvent("b", "broken", "backend down", True),)
    assert result.route == "knowledge"  # an error is not data
    assert len(retriever.queries) == 1


async def test_router_errors_propagate() -> None:
    def fail(prompt: object) -> str:
        raise ConnectionError("provider unreachable")

    pipeline = QaPipeline(FunctionModel(fail), retriever=CountingRetriever())
    with pytest.raises(ConnectionError, match="provider unreachable"):
        await pipeline.acall("Hello?")


@pytest.mark.parametrize("live_tool_events", [True, False])
async def test_stopping_early_cancels_the_router(live_tool_events: bool) -> None:
    # Live, the consumer leaves at the first event (the router has a task of its own);
    # otherwise nothing comes before the router ends, and the consumer's task, the
    # router's too, is cancelled.
    started, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def slow(order_id: str) -> str:
        """A tool that never finishes."""
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    model = ScriptedModel([tool_call("slow", {"order_id": "A1"}, id="s")])
    pipeline = QaPipeline(model, retriever=CountingRetriever(), tools=[slow])
    stream = pipeline.stream("A1?", live_tool_events=live_tool_events)
    if live_tool_events:
        first = await anext(stream)  # type: ignore[call-overload]
        assert isinstance(first, ToolCallEvent)
        await started.wait()
        await stream.aclose()  # type: ignore[attr-defined]
    else:
        consumer = asyncio.ensure_future(events_of(stream))
        await started.wait()
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await consumer
    assert cancelled.is_set()


async def test_tool_events_after_the_router_are_those_it_reports_live_in_its_order() -> None:
    tasks: list[asyncio.Task[object] | None] = []

    @tool
    async def status(order_id: str) -> str:
        """Live status of an order."""
        tasks.append(asyncio.current_task())
        return f"{order_id} shipped"

    def script() -> list[object]:
        return [
            tool_call("status", {"order_id": "A1"}, id="c1"),
            tool_call("status", {"order_id": "B2"}, id="c2"),
            "",
            "Both shipped.",
        ]

    live = QaPipeline(ScriptedModel(script()), retriever=CountingRetriever(), tools=[status])
    expected = await events_of(live.stream("A1 and B2?"))
    at_once = QaPipeline(ScriptedModel(script()), retriever=CountingRetriever(), tools=[status])

    async def consume() -> list[object]:
        return await events_of(at_once.stream("A1 and B2?", live_tool_events=False))

    consumer = asyncio.ensure_future(consume())
    assert await consumer == expected
    assert squeeze(kinds(expected)) == [
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "route",
        "delta",
        "done",
    ]
    # Live, the router has a task of its own; otherwise it runs in the consumer's.
    assert tasks[0] is not None and tasks[0] is not consumer and tasks[2:] == [consumer] * 2


def test_bad_input_is_refused_before_any_model_call() -> None:
    model = ScriptedModel([])
    pipeline = QaPipeline(model, retriever=CountingRetriever())
    with pytest.raises(ValueError, match="non-blank string"):
        pipeline.stream("  ")
    with pytest.raises(ValueError, match="has no memory"):
        pipeline.stream("Hi", conversation_id="u1")
    with_memory = QaPipeline(model, retriever=CountingRetriever(), memory=MessageWindowChatMemory())
    with pytest.raises(ValueError, match="conversation_id"):
        with_memory.stream("Hi", conversation_id=" ")
    # An id no repository can store is refused here too, not by the router stage's memory
    # read in the middle of the stream (SQLite raised a UnicodeEncodeError there).
    for bad_id in ("u\x00", "u\ud800"):
        with pytest.raises(ValueError, match="conversation id must be text every repository"):
            with_memory.stream("Hi", conversation_id=bad_id)
    assert model.requests == []


def test_sync_call() -> None:
    model = ScriptedModel(["", "Hi there."])
    result = QaPipeline(model, retriever=CountingRetriever()).call("Hello")
    assert (result.answer, result.route) == ("Hi there.", "knowledge")
    assert "knowledge base has nothing" in model.requests[-1].messages[-1].text


async def test_concurrent_sync_tools_are_recorded_in_call_order() -> None:
    @tool
    def slow_first(n: int) -> str:
        """Sleeps, so it finishes last."""
        import time

        time.sleep(0.05)
        return "first"

    @tool
    def fast_second(n: int) -> str:
        """Returns at once."""
        return "second"

    model = ScriptedModel(
        [[tool_call("slow_first", {"n": 1}), tool_call("fast_second", {"n": 2})], "", "ok"]
    )
    await QaPipeline(model, retriever=CountingRetriever(), tools=[slow_first, fast_second]).acall(
        "x"
    )
    prompt = model.requests[-1].messages[-1].text
    assert prompt.index('"first"') < prompt.index('"second"')
    assert isinstance(model.requests[1].messages[-1], ToolResponseMessage)


# -- the trace when providers reuse call ids ----------------------------------------------------


def traced(events: list[object]) -> list[tuple[str, str, str]]:
    """(kind, id, arguments or result) of the tool events, in order."""
    out: list[tuple[str, str, str]] = []
    for event in events:
        if isinstance(event, ToolCallEvent):
            out.append(("call", event.id, event.arguments))
        elif isinstance(event, ToolResultEvent):
            out.append(("result", event.id, event.result))
    return out


def shipped(order_id: str) -> str:
    return json.dumps({"order_id": order_id, "status": "shipped"}, separators=(",", ":"))


async def test_call_ids_reused_across_rounds_are_all_traced() -> None:
    # Some OpenAI-compatible servers number calls per response: call_0 in every round.
    model = ScriptedModel(
        [
            tool_call("order_status", {"order_id": "A1"}, id="call_0"),
            tool_call("order_status", {"order_id": "B2"}, id="call_0"),
            "",
            "Both shipped.",
        ]
    )
    pipeline = QaPipeline(model, retriever=CountingRetriever(), tools=[order_status])
    events = await events_of(pipeline.stream("Where are A1 and B2?"))
    assert traced(events) == [
        ("call", "call_0", '{"order_id": "A1"}'),
        ("result", "call_0", shipped("A1")),
        ("call", "call_0", '{"order_id": "B2"}'),
        ("result", "call_0", shipped("B2")),
    ]
    assert events[4] == RouteEvent("tools", 2)  # the ledger had both all along


async def test_call_ids_repeated_within_a_round_are_all_traced() -> None:
    model = ScriptedModel(
        [
            [
                tool_call("order_status", {"order_id": "A1"}, id="call_0"),
                tool_call("order_status", {"order_id": "B2"}, id="call_0"),
            ],
            "",
            "Both shipped.",
        ]
    )
    events = await events_of(
        QaPipeline(model, retriever=CountingRetriever(), tools=[order_status]).stream("A1, B2?")
    )
    assert traced(events) == [
        ("call", "call_0", '{"order_id": "A1"}'),
        ("call", "call_0", '{"order_id": "B2"}'),
        ("result", "call_0", shipped("A1")),
        ("result", "call_0", shipped("B2")),
    ]


async def test_an_earlier_turns_calls_with_the_same_ids_are_not_traced() -> None:
    earlier = tool_call("order_status", {"order_id": "OLD"}, id="call_0")
    history = [
        UserMessage(text="Where is order OLD?"),
        AssistantMessage(tool_calls=(earlier,)),
        ToolResponseMessage(
            responses=(ToolResponse(id="call_0", name="order_status", data=shipped("OLD")),)
        ),
        AssistantMessage(text="OLD has shipped."),
    ]
    model = ScriptedModel(
        [tool_call("order_status", {"order_id": "A1"}, id="call_0"), "", "A1 has shipped."]
    )
    events = await events_of(
        QaPipeline(model, retriever=CountingRetriever(), tools=[order_status]).stream(
            "And A1?", history=history
        )
    )
    assert traced(events) == [
        ("call", "call_0", '{"order_id": "A1"}'),
        ("result", "call_0", shipped("A1")),
    ]


async def test_reused_call_ids_are_traced_across_an_approval_pause() -> None:
    model = ScriptedModel(
        [
            tool_call("order_status", {"order_id": "A1"}, id="call_0"),
            [
                tool_call("order_status", {"order_id": "A1"}, id="call_0"),
                tool_call("cancel_order", {"order_id": "A1"}, id="call_1"),
            ],
            "",
            "A1 was cancelled.",
        ]
    )
    pipeline = QaPipeline(model, retriever=CountingRetriever(), tools=[order_status, cancel_order])
    events = await events_of(pipeline.stream("Cancel A1 if it shipped"))
    assert traced(events) == [
        ("call", "call_0", '{"order_id": "A1"}'),
        ("result", "call_0", shipped("A1")),
        ("call", "call_0", '{"order_id": "A1"}'),
        ("call", "call_1", '{"order_id": "A1"}'),
        ("result", "call_0", shipped("A1")),
    ]
    paused = events[-1]
    assert isinstance(paused, ApprovalRequiredEvent)

    resumed = await events_of(
        pipeline.resume_stream(QaPause.from_json(paused.pause.to_json()), {"call_1": Approve()})
    )
    assert traced(resumed) == [("result", "call_1", '{"order_id":"A1","cancelled":true}')]
    assert squeeze(kinds(resumed))[-3:] == ["route", "delta", "done"]


async def test_reused_call_ids_are_traced_when_the_loop_ends_on_tools() -> None:
    @tool(return_direct=True)
    def final_status(order_id: str) -> str:
        """The status, given to the user as is."""
        return f"{order_id}: shipped"

    model = ScriptedModel(
        [
            tool_call("order_status", {"order_id": "A1"}, id="call_0"),
            tool_call("final_status", {"order_id": "A1"}, id="call_0"),
            "A1: shipped.",
        ]
    )
    pipeline = QaPipeline(model, retriever=CountingRetriever(), tools=[order_status, final_status])
    events = await events_of(pipeline.stream("A1?"))
    assert traced(events) == [
        ("call", "call_0", '{"order_id": "A1"}'),
        ("result", "call_0", shipped("A1")),
        ("call", "call_0", '{"order_id": "A1"}'),
        ("result", "call_0", '"A1: shipped"'),
    ]
