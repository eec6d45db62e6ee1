"""A QA turn's audit writes: each starts when its router round ends, the turn goes on (its
answer's model call) meanwhile, and the turn waits for them before it reports its end; a
write that fails fails the turn there, and one that a stopped turn left is logged if it
fails."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from _qa_helpers import CountingRetriever
from tooluse import ChatClient, ToolCallingAdvisor, ToolCallingManager, tool
from tooluse.calling import AuditRecord
from tooluse.calling._audit_later import AUDIT_WRITES, AuditWrites
from tooluse.messages import Prompt
from tooluse.qa import DoneEvent, QaPipeline
from tooluse.rag import Document
from tooluse.testing import FunctionModel, ScriptedModel, tool_call


@tool(read_only=True)
def order_status(order_id: str) -> dict[str, str]:
    """Live status of an order."""
    return {"order_id": order_id, "status": "shipped"}


class SlowAudit:
    """An audit sink whose writes end when the test says, or fail."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.stored: list[AuditRecord] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.failure = failure

    async def record(self, records: Sequence[AuditRecord]) -> None:
        self.started.set()
        await self.release.wait()
        if self.failure is not None:
            raise self.failure
        self.stored.extend(records)


def pipeline_with(audit: SlowAudit, answer_called: asyncio.Event) -> QaPipeline:
    def model(prompt: Prompt) -> object:
        if not prompt.options.tool_callbacks:  # the answer stage
            answer_called.set()
            return "Order A1 has shipped."
        return tool_call("order_status", {"order_id": "A1"}, id="c1")

    manager = ToolCallingManager(audit=audit)
    return QaPipeline(
        FunctionModel(model),
        retriever=CountingRetriever([Document(text="Returns: 30 days.", id="r")]),
        tools=[order_status],
        router_advisor=ToolCallingAdvisor(tool_calling_manager=manager),
        router_fetch_rounds=1,
    )


@pytest.mark.parametrize("live_tool_events", [True, False])
async def test_the_answer_goes_on_while_the_audit_write_runs_and_done_waits_for_it(
    live_tool_events: bool,
) -> None:
    audit, answer_called = SlowAudit(), asyncio.Event()
    pipeline = pipeline_with(audit, answer_called)
    events: list[object] = []

    async def run() -> None:
        async for event in pipeline.stream("Where is A1?", live_tool_events=live_tool_events):
            events.append(event)

    running = asyncio.create_task(run())
    await asyncio.wait_for(answer_called.wait(), 5)  # the answer stage ran: not held up
    assert audit.started.is_set() and audit.stored == []
    await asyncio.sleep(0.05)
    assert not any(isinstance(event, DoneEvent) for event in events)  # done waits
    audit.release.set()
    await asyncio.wait_for(running, 5)
    assert isinstance(events[-1], DoneEvent)
    assert [(r.tool, r.outcome) for r in audit.stored] == [("order_status", "ran")]


async def test_an_audit_write_that_fails_fails_the_turn_before_its_done() -> None:
    audit, answer_called = SlowAudit(RuntimeError("the audit log is gone")), asyncio.Event()
    audit.release.set()
    pipeline = pipeline_with(audit, answer_called)
    events: list[object] = []
    with pytest.raises(RuntimeError, match="the audit log is gone"):
        async for event in pipeline.stream("Where is A1?"):
            events.append(event)
    assert not any(isinstance(event, DoneEvent) for event in events)


async def test_a_write_left_by_a_stopped_turn_goes_on_and_its_failure_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    audit, answer_called = SlowAudit(RuntimeError("the audit log is gone")), asyncio.Event()
    pipeline = pipeline_with(audit, answer_called)
    stream = pipeline.stream("Where is A1?")
    async for event in stream:
        if getattr(event, "kind", None) == "route":
            break  # the client left after the route
    await stream.aclose()
    audit.release.set()
    for _ in range(20):
        await asyncio.sleep(0.01)
    assert "Audit records of a stopped run were not stored" in caplog.text


async def test_a_manager_outside_such_a_run_waits_for_its_write_in_the_round() -> None:
    audit = SlowAudit()
    manager = ToolCallingManager(audit=audit)
    model = ScriptedModel([tool_call("order_status", {"order_id": "A1"}), "Shipped."])
    loop = ToolCallingAdvisor(tool_calling_manager=manager)
    client = ChatClient(model, tools=[order_status], tool_calling_advisor=loop)
    call = asyncio.ensure_future(client.prompt("Where is A1?").acall())
    await asyncio.wait_for(audit.started.wait(), 5)
    await asyncio.sleep(0.05)
    assert len(model.requests) == 1  # the round waits for its write
    audit.release.set()
    assert (await asyncio.wait_for(call, 5)).content() == "Shipped."
    assert AUDIT_WRITES.get() is None


async def test_audit_writes_waited_for_raise_the_first_failure() -> None:
    writes = AuditWrites()

    async def fails(after: float, message: str) -> None:
        await asyncio.sleep(after)
        raise ValueError(message)

    writes.add(fails(0.02, "second"))
    writes.add(fails(0.01, "first to fail, second added"))
    writes.add(asyncio.sleep(0))
    with pytest.raises(ValueError, match="second"):  # in the order they were added
        await writes.wait()
    await writes.wait()  # nothing left
