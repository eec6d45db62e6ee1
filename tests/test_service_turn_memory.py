"""``TurnMemory``: a running turn reads its conversation's memory once, and every write
reaches the store and is read back."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from _service_helpers import fake_llm, parse_sse, service
from tooluse.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
from tooluse.messages import AssistantMessage, Message, UserMessage
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


async def test_a_turn_reads_its_conversation_once_and_each_reader_gets_its_own_list() -> None:
    store = CountingMemory()
    store.add("c1", [UserMessage(text="q1"), AssistantMessage(text="a1")])
    memory = TurnMemory(store)
    with memory.turn("c1"):
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
    with memory.turn("c1"):
        assert await memory.aget("c1") == []
        await memory.aadd("c1", [UserMessage(text="q1"), AssistantMessage(text="a1")])
        assert texts(await memory.aget("c1")) == ["q1", "a1"]
        memory.clear("c1")
        assert await memory.aget("c1") == []
    assert store.reads == 3


async def test_outside_a_turn_every_read_goes_to_the_store() -> None:
    store = CountingMemory()
    memory = TurnMemory(store)
    with memory.turn("c1"):
        await memory.aget("c1")
    await memory.aget("c1")
    await memory.aget("c1")
    assert store.reads == 3


async def test_a_read_that_a_write_overtook_is_not_kept() -> None:
    store = CountingMemory()
    memory = TurnMemory(store)
    with memory.turn("c1"):
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
    with memory.turn("c1"):
        memory.remember_read("c1", [UserMessage(text="q1")])
        assert texts(await memory.aget("c1")) == ["q1"]
    memory.remember_read("c1", [UserMessage(text="not a turn's")])  # none runs: not kept
    assert await memory.aget("c1") == []
    assert store.reads == 1


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
