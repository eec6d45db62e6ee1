"""``TurnMemory``: a running turn reads its conversation's memory once, and every write
reaches the store and is read back."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from _servers import run_sql
from _service_helpers import config, fake_llm, names, parse_sse, running, service
from tooluse.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
from tooluse.messages import AssistantMessage, Message, UserMessage
from tooluse.service import create_app
from tooluse.service._turn_memory import TurnMemory


class CountingMemory(MessageWindowChatMemory):
    """A window memory that counts its reads; ``gate`` (when set) holds each read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.gate: asyncio.Event | None = None

    async def aget(self, conversation_id: str) -> list[Message]:
        self.reads += 1
        if self.gate is not None:
            await self.gate.wait()
        return self.get(conversation_id)


def texts(messages: Sequence[Message]) -> list[str]:
    return [message.text for message in messages]


class Record:
    """A turn's other record (a HeldRecord): what each store saw, and on which thread."""

    def __init__(self, memory: MessageWindowChatMemory) -> None:
        self._memory = memory
        self.stored: list[tuple[str, int, list[str]]] = []

    def store(self) -> None:
        self.stored.append(("store", threading.get_ident(), texts(self._memory.get("c1"))))

    async def astore(self) -> None:
        self.stored.append(("astore", threading.get_ident(), texts(self._memory.get("c1"))))

    def write(self) -> None:
        return None  # stored on its own


async def test_a_turn_reads_its_conversation_once_and_each_reader_gets_its_own_list() -> None:
    store = CountingMemory()
    store.add("c1", [UserMessage(text="q1"), AssistantMessage(text="a1")])
    memory = TurnMemory(store)
    async with memory.turn("c1"):
        first = await memory.aget("c1")
        first.append(UserMessage(text="changed by its reader"))
        second = await memory.aget("c1")
        assert await memory.aget("c2") == []  # another conversation: not this turn's
        await memory.aget("c2")
    assert texts(second) == ["q1", "a1"]
    assert store.reads == 3  # c1 once, c2 twice


async def test_a_write_in_a_turn_is_read_back_from_the_store() -> None:
    store = CountingMemory()
    memory = TurnMemory(store)
    async with memory.turn("c1"):
        assert await memory.aget("c1") == []
        await memory.aadd("c1", [UserMessage(text="q1"), AssistantMessage(text="a1")])
        assert texts(await memory.aget("c1")) == ["q1", "a1"]
        memory.clear("c1")
        assert await memory.aget("c1") == []
    assert store.reads == 3


async def test_outside_a_turn_every_read_goes_to_the_store() -> None:
    store = CountingMemory()
    memory = TurnMemory(store)
    async with memory.turn("c1"):
        await memory.aget("c1")
    await memory.aget("c1")
    await memory.aget("c1")
    assert store.reads == 3


async def test_a_read_that_a_write_overtook_is_not_kept() -> None:
    store = CountingMemory()
    memory = TurnMemory(store)
    async with memory.turn("c1"):
        store.gate = asyncio.Event()
        reading = asyncio.create_task(memory.aget("c1"))
        await asyncio.sleep(0)  # the read has begun (before the write)
        store.gate.set()
        await memory.aadd("c1", UserMessage(text="q1"))
        await reading
        store.gate = None
        assert texts(await memory.aget("c1")) == ["q1"]


async def test_a_read_made_with_the_turn_s_start_is_what_the_turn_reads() -> None:
    store = CountingMemory()
    memory = TurnMemory(store)
    async with memory.turn("c1"):
        memory.remember_read("c1", [UserMessage(text="q1")])
        assert texts(await memory.aget("c1")) == ["q1"]
    memory.remember_read("c1", [UserMessage(text="not a turn's")])  # none runs: not kept
    assert await memory.aget("c1") == []
    assert store.reads == 1


class ThreadRecordingMemory(MessageWindowChatMemory):
    """A window memory that records the thread of each write; ``refuse`` (when set) fails
    them."""

    def __init__(self) -> None:
        super().__init__()
        self.write_threads: list[int] = []
        self.refuse: str | None = None

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        self.write_threads.append(threading.get_ident())
        if self.refuse is not None:
            raise OSError(self.refuse)
        super().add(conversation_id, messages)


async def test_a_turn_that_holds_its_writes_stores_them_with_its_records_in_one_hop() -> None:
    store = ThreadRecordingMemory()
    memory = TurnMemory(store)
    record = Record(store)
    async with memory.turn("c1", holds_writes=True):
        await memory.aadd("c1", [UserMessage(text="q1"), AssistantMessage(text="a1")])
        assert store.get("c1") == []  # held
        await memory.store_held("c1", then=record)
        assert texts(store.get("c1")) == ["q1", "a1"]
    # The records come after the write, in the thread that made it (not the loop's).
    assert record.stored == [("store", store.write_threads[0], ["q1", "a1"])]
    assert store.write_threads[0] != threading.get_ident()


async def test_a_held_write_is_stored_by_its_turn_only_when_the_turn_ends() -> None:
    store = ThreadRecordingMemory()
    memory = TurnMemory(store)
    async with memory.turn("c1", holds_writes=True):
        await memory.aadd("c1", UserMessage(text="q1"))
        # A read meanwhile (the page's) reads the store as it is: the turn is not answered.
        assert await memory.aget("c1") == []
        await memory.aadd("c1", AssistantMessage(text="a1"))
        assert store.write_threads == []
    assert texts(store.get("c1")) == ["q1", "a1"]
    # Both writes, in their order, in one hop to a thread.
    assert len(store.write_threads) == 2 and len(set(store.write_threads)) == 1
    with pytest.raises(RuntimeError, match="the run failed"):
        async with memory.turn("c1", holds_writes=True):
            await memory.aadd("c1", [UserMessage(text="q2"), AssistantMessage(text="a2")])
            raise RuntimeError("the run failed")  # after its write: the write is kept
    assert texts(store.get("c1")) == ["q1", "a1", "q2", "a2"]


async def test_a_held_write_that_fails_raises_and_the_records_after_it_are_not_stored() -> None:
    store = ThreadRecordingMemory()
    memory = TurnMemory(store)
    record = Record(store)
    async with memory.turn("c1", holds_writes=True):
        await memory.aadd("c1", [UserMessage(text="q1"), AssistantMessage(text="a1")])
        store.refuse = "the disk is full"
        with pytest.raises(OSError, match="the disk is full"):
            await memory.store_held("c1", then=record)
    assert record.stored == []
    assert len(store.write_threads) == 1  # not tried again when the turn ended
    assert store.get("c1") == []


async def test_a_question_in_a_conversation_that_goes_on_reads_its_memory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The withdrawal of waiting approvals and the read share one hop to a thread; the router
    # and the answer read what it read; the answer's write is read by the next question.
    reads: list[str] = []
    find = SqliteChatMemoryRepository.find_by_conversation_id

    def counted(self: SqliteChatMemoryRepository, conversation_id: str) -> list[Message]:
        reads.append(conversation_id)
        return find(self, conversation_id)

    monkeypatch.setattr(SqliteChatMemoryRepository, "find_by_conversation_id", counted)
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        for question in ("What's the weather in Paris?", "Any refund rules?"):
            response = await client.post(
                "/api/chat", json={"message": question, "conversation_id": "c1"}
            )
            assert parse_sse(response.text)[-1][0] == "done"
        conversation = (await client.get("/api/conversations/c1")).json()
    assert reads == ["c1"] * 3  # a read per question, and the page's
    assert [m["text"] for m in conversation["messages"]] == [
        "What's the weather in Paris?",
        "From live data.",
        "Any refund rules?",
        "From the knowledge base.",
    ]


# Makes the memory write of a turn fail after its question's row went in: the answer's row
# is refused, so the transaction has written half of the turn when it fails.
_REFUSE_ANSWERS = {
    "sqlite": (
        "CREATE TRIGGER refuse_answers BEFORE INSERT ON chat_memory_message "
        "WHEN NEW.role = 'assistant' BEGIN SELECT RAISE(ABORT, 'the disk is full'); END",
    ),
    "postgres": (
        "CREATE FUNCTION refuse_answers() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.role = 'assistant' THEN RAISE EXCEPTION 'the disk is full'; END IF; "
        "RETURN NEW; END $$",
        "CREATE TRIGGER refuse_answers BEFORE INSERT ON chat_memory_message "
        "FOR EACH ROW EXECUTE FUNCTION refuse_answers()",
    ),
}


async def test_a_turn_whose_memory_write_fails_stores_none_of_it_and_ends_in_an_error(
    store_location: str, tmp_path: Path
) -> None:
    engine = "postgres" if store_location.startswith("postgresql://") else "sqlite"
    shared = {"database_url": store_location} if engine == "postgres" else {}
    db = tmp_path / "unused.db" if engine == "postgres" else Path(store_location)
    app = create_app(config(db, model=fake_llm(), **shared))
    async with running(app) as client:

        async def ask(question: str) -> list[tuple[str, Any]]:
            response = await client.post(
                "/api/chat", json={"message": question, "conversation_id": "c1"}
            )
            return parse_sse(response.text)

        assert (await ask("Any refund rules?"))[-1][0] == "done"
        for statement in _REFUSE_ANSWERS[engine]:
            run_sql(store_location, statement)
        events = await ask("What's the weather in Paris?")
        conversation = (await client.get("/api/conversations/c1")).json()
    # The tool ran and was shown; the turn was not answered, and nothing of it is stored:
    # not its question, nor its display record.
    assert names(events) == ["tool_call", "tool_result", "route", "delta", "error"]
    assert "the disk is full" in events[-1][1]["message"]
    assert [(m["role"], m["text"]) for m in conversation["messages"]] == [
        ("user", "Any refund rules?"),
        ("assistant", "From the knowledge base."),
    ]
    assert run_sql(store_location, "SELECT question FROM qa_turn_display") == [
        ("Any refund rules?",)
    ]
