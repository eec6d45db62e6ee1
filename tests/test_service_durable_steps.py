"""The durable-run wrappers against a replaying engine of the port (``RunEngine``): a step
recorded in a first run gives its recorded result when the run is replayed, and what the
step did (a tool running, a memory write) is not done again. The engine here records each
step's result pickled, as DBOS does, so what a step returns must survive pickling."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from tooluse import tool, tool_callbacks
from tooluse.calling import ToolCallLimitExceeded, report_usage
from tooluse.calling._audit_later import AUDIT_WRITES, AuditWrites
from tooluse.memory import MessageWindowChatMemory
from tooluse.messages import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    Generation,
    Prompt,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from tooluse.qa._callbacks import ledger_tool_callbacks
from tooluse.qa._ledger import LEDGER_KEY, FetchLedger
from tooluse.service._durable import (
    RecordedChatMemory,
    RecordedChatModel,
    RecordedToolCallingManager,
    RunOutcome,
)
from tooluse.streaming import merge_chunks
from tooluse.testing import FunctionModel, tool_call

T = TypeVar("T")


class ReplayingRuns:
    """A run's steps recorded in order; :meth:`replay` runs the body again from its start,
    each recorded step giving its recorded result (or exception)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes, bool]] = []
        self.position = 0

    def replay(self) -> None:
        self.position = 0

    async def begin(self, run_id: str, request: dict[str, Any]) -> None:
        raise NotImplementedError("the wrappers never begin runs")

    async def outcome(self, run_id: str) -> RunOutcome | None:
        raise NotImplementedError("the wrappers never read outcomes")

    async def recover_dead_workers(self) -> list[str]:
        raise NotImplementedError("the wrappers never recover")

    async def step(self, name: str, compute: Callable[[], Awaitable[T]]) -> T:
        position, self.position = self.position, self.position + 1
        if position < len(self.records):
            recorded, data, failed = self.records[position]
            assert recorded == name, f"step {position} was {recorded!r}, now {name!r}"
            value = pickle.loads(data)
            if failed:
                raise value
            return value  # type: ignore[no-any-return]
        try:
            result = await compute()
        except Exception as exc:
            self.records.append((name, pickle.dumps(exc), True))
            raise
        self.records.append((name, pickle.dumps(result), False))
        return result


ran: list[str] = []


@tool(read_only=True)
def look_up_order(order_id: str) -> str:
    """The status of an order."""
    ran.append(order_id)
    return f"order {order_id}: shipped"


def round_of(*calls: Any, ledger: FetchLedger) -> tuple[Prompt, ChatResponse]:
    options = ChatOptions(
        tool_callbacks=ledger_tool_callbacks(look_up_order), tool_context={LEDGER_KEY: ledger}
    )
    prompt = Prompt([UserMessage(text="Where are my orders?")], options)
    response = ChatResponse([Generation(AssistantMessage(tool_calls=list(calls)))])
    return prompt, response


async def test_a_replayed_tool_round_runs_no_tool_and_gives_its_data_to_the_ledger() -> None:
    ran.clear()
    runs = ReplayingRuns()
    manager = RecordedToolCallingManager(runs)
    calls = [tool_call("look_up_order", {"order_id": "A1"}, id="c1")]
    first_ledger = FetchLedger()
    first = await manager.aexecute_tool_calls(*round_of(*calls, ledger=first_ledger))
    runs.replay()
    replayed_ledger = FetchLedger()
    replayed = await manager.aexecute_tool_calls(*round_of(*calls, ledger=replayed_ledger))
    assert ran == ["A1"]
    assert replayed == first
    assert isinstance(replayed.conversation_history[-1], ToolResponseMessage)
    assert replayed_ledger.records == first_ledger.records != ()


@tool(read_only=True)
def summarize_order(order_id: str) -> str:
    """A summary of an order, written by a model of the tool's own."""
    ran.append(order_id)
    report_usage(Usage(prompt_tokens=50, completion_tokens=5, total_tokens=55))
    return f"order {order_id}: on its way"


class _OlderRecord:
    """Pickles as ``record`` did before its last field was added (its state without it)."""

    def __init__(self, record: Any) -> None:
        self._record = record

    def __reduce__(self) -> tuple[Any, ...]:
        return _unpickled_as_then, (type(self._record), self._record.__getstate__()[:-1])


def _unpickled_as_then(cls: type[Any], state: list[Any]) -> Any:
    """What unpickling does with such a record: a new object, then its state set."""
    record = cls.__new__(cls)
    record.__setstate__(state)
    return record


async def test_a_replayed_round_gives_its_tools_usage_and_an_older_record_none() -> None:
    ran.clear()
    runs = ReplayingRuns()
    manager = RecordedToolCallingManager(runs)
    options = ChatOptions(tool_callbacks=tool_callbacks(summarize_order))
    prompt = Prompt([UserMessage(text="Summarize my order")], options)
    calls = [tool_call("summarize_order", {"order_id": "A1"}, id="c1")]
    response = ChatResponse([Generation(AssistantMessage(tool_calls=calls))])
    first = await manager.aexecute_tool_calls(prompt, response)
    assert first.usage == Usage(prompt_tokens=50, completion_tokens=5, total_tokens=55)
    runs.replay()
    assert await manager.aexecute_tool_calls(prompt, response) == first
    assert ran == ["A1"]
    # A round recorded by a version whose records had no usage (a run in flight across an
    # upgrade): its pickled state lacks the field, and the round replays without usage.
    name, data, failed = runs.records[0]
    recorded = pickle.loads(data)
    runs.records[0] = (name, pickle.dumps(_OlderRecord(recorded)), failed)
    runs.replay()
    replayed = await manager.aexecute_tool_calls(prompt, response)
    assert replayed.usage is None
    assert replayed.conversation_history == first.conversation_history


async def test_a_replayed_round_that_broke_a_limit_breaks_it_again() -> None:
    ran.clear()
    runs = ReplayingRuns()
    manager = RecordedToolCallingManager(runs, max_calls_per_tool=1)
    calls = [tool_call("look_up_order", {"order_id": f"A{n}"}, id=f"c{n}") for n in (1, 2)]
    with pytest.raises(ToolCallLimitExceeded) as first:
        await manager.aexecute_tool_calls(*round_of(*calls, ledger=FetchLedger()))
    runs.replay()
    with pytest.raises(ToolCallLimitExceeded) as replayed:
        await manager.aexecute_tool_calls(*round_of(*calls, ledger=FetchLedger()))
    assert ran == ["A1"]
    assert (replayed.value.tool_name, replayed.value.limit) == ("look_up_order", 1)
    assert replayed.value.partial_result == first.value.partial_result
    assert replayed.value.build_generation() == first.value.build_generation()


async def test_a_replayed_model_call_and_stream_give_the_recorded_response() -> None:
    asked: list[str] = []

    def respond(prompt: Prompt) -> str:
        asked.append(prompt.messages[-1].text)  # type: ignore[union-attr]
        return f"answer {len(asked)}"

    runs = ReplayingRuns()
    model = RecordedChatModel(FunctionModel(respond, chunk_size=3), runs)
    prompt = Prompt([UserMessage(text="hello")])
    called = await model.acall(prompt)
    streamed = [chunk async for chunk in model.stream(prompt)]
    assert len(streamed) > 1  # the live stream's chunks, as they came
    runs.replay()
    assert await model.acall(prompt) == called
    replayed = [chunk async for chunk in model.stream(prompt)]
    assert len(replayed) == 1  # the recorded response, whole
    assert replayed[0].text == merge_chunks(streamed).text == "answer 2"
    assert asked == ["hello", "hello"]


async def test_a_replayed_memory_write_is_not_written_twice() -> None:
    runs = ReplayingRuns()
    memory = RecordedChatMemory(MessageWindowChatMemory(), runs)
    await memory.aadd("c1", UserMessage(text="hi"))
    runs.replay()
    await memory.aadd("c1", UserMessage(text="hi"))
    assert await memory.aget("c1") == [UserMessage(text="hi")]


class _StoredAudit:
    def __init__(self) -> None:
        self.records: list[Any] = []

    async def record(self, records: Any) -> None:
        await asyncio.sleep(0.01)
        self.records.extend(records)


async def test_a_recorded_rounds_audit_write_is_part_of_its_step() -> None:
    # In a QA turn a round's audit write is waited for when the turn ends; in a durable
    # run the round is a step, replayed without running, so its write ends within it.
    audit = _StoredAudit()
    manager = RecordedToolCallingManager(ReplayingRuns(), audit=audit)
    calls = [tool_call("look_up_order", {"order_id": "A1"}, id="c1")]
    later = AuditWrites()
    token = AUDIT_WRITES.set(later)
    try:
        await manager.aexecute_tool_calls(*round_of(*calls, ledger=FetchLedger()))
    finally:
        AUDIT_WRITES.reset(token)
    assert [record.call_id for record in audit.records] == ["c1"]
    await later.wait()  # nothing was left to it
