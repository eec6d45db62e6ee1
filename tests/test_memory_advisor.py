"""MessageChatMemoryAdvisor on the advisor chain (the full client loop: test_memory_loop.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from _memory_helpers import answer, calls, results, system, user
from tooluse.advisors import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    AdvisorChain,
    CallAdvisor,
    ChatClientRequest,
    StreamAdvisor,
)
from tooluse.memory import (
    CONVERSATION_ID,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    SqliteChatMemoryRepository,
)
from tooluse.messages import AssistantMessage, ChatResponse, Message, Prompt, UserMessage
from tooluse.streaming import merge_chunks
from tooluse.testing import FunctionModel, ScriptedModel, ScriptExhaustedError, tool_call


def request(*messages: Message, conversation: str | None = "c") -> ChatClientRequest:
    context = {} if conversation is None else {CONVERSATION_ID: conversation}
    return ChatClientRequest(Prompt(messages), context)


async def call(
    advisor: MessageChatMemoryAdvisor, model: ScriptedModel, *messages: Message
) -> ChatResponse | None:
    response = await AdvisorChain([advisor], model).next_call(request(*messages))
    return response.chat_response


def test_defaults_follow_spring() -> None:
    advisor = MessageChatMemoryAdvisor(MessageWindowChatMemory())
    assert advisor.order == HIGHEST_PRECEDENCE + 200
    assert not advisor.inside_tool_loop
    assert isinstance(advisor, CallAdvisor)
    assert isinstance(advisor, StreamAdvisor)
    inside = MessageChatMemoryAdvisor(MessageWindowChatMemory(), inside_tool_loop=True)
    assert inside.order > HIGHEST_PRECEDENCE + 300  # the tool-calling advisor's order


@pytest.mark.parametrize("order", [HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE])
def test_order_must_be_strictly_inside_the_range(order: int) -> None:
    with pytest.raises(ValueError, match="order must be strictly between"):
        MessageChatMemoryAdvisor(MessageWindowChatMemory(), order=order)


async def test_the_conversation_id_is_required() -> None:
    advisor = MessageChatMemoryAdvisor(MessageWindowChatMemory())
    chain = AdvisorChain([advisor], ScriptedModel(["never"]))
    with pytest.raises(ValueError, match=r"needs a conversation id.*chat_memory_conversation_id"):
        await chain.next_call(request(user("hi"), conversation=None))
    with pytest.raises(ValueError, match="conversation id must not be blank"):
        await chain.next_call(request(user("hi"), conversation=" "))


async def test_history_is_replayed_and_each_turn_stored() -> None:
    memory = MessageWindowChatMemory()
    advisor = MessageChatMemoryAdvisor(memory)
    model = ScriptedModel(["A1", "A2"])
    await call(advisor, model, system("S"), user("Q1"))
    assert memory.get("c") == [user("Q1"), answer("A1")]
    await call(advisor, model, system("S"), user("Q2"))
    assert list(model.requests[1].messages) == [
        system("S"),
        user("Q1"),
        answer("A1"),
        user("Q2"),
    ]
    assert memory.get("c") == [user("Q1"), answer("A1"), user("Q2"), answer("A2")]


async def test_history_already_in_the_prompt_is_not_added_again() -> None:
    memory = MessageWindowChatMemory()
    memory.add("c", [user("Q1"), answer("A1")])
    model = ScriptedModel(["A2"])
    await call(MessageChatMemoryAdvisor(memory), model, user("Q1"), answer("A1"), user("Q2"))
    assert list(model.requests[0].messages) == [user("Q1"), answer("A1"), user("Q2")]


async def test_only_the_part_of_memory_missing_from_the_prompt_is_added() -> None:
    memory = MessageWindowChatMemory()
    memory.add("c", [user("Q1"), answer("A1"), user("Q2"), calls("x")])
    model = ScriptedModel(["A2"])
    advisor = MessageChatMemoryAdvisor(memory, inside_tool_loop=True)
    await call(advisor, model, user("Q2"), calls("x"), results("x"))
    assert list(model.requests[0].messages) == [
        user("Q1"),
        answer("A1"),
        user("Q2"),
        calls("x"),
        results("x"),
    ]


async def test_a_resumed_turn_is_sent_without_the_record_of_its_pause() -> None:
    memory = MessageWindowChatMemory()
    memory.add("c", [user("Q0"), answer("A0")])
    memory.add(
        "c",
        [
            UserMessage(text="Q1", paused_turn="t1"),
            answer("waits").model_copy(update={"paused_turn": "t1"}),
        ],
    )
    model = ScriptedModel(["A1"])
    resumed = UserMessage(text="Q1", paused_turn="t1")
    await call(MessageChatMemoryAdvisor(memory), model, resumed)
    assert list(model.requests[0].messages) == [user("Q0"), answer("A0"), resumed]
    assert memory.get("c") == [user("Q0"), answer("A0"), resumed, answer("A1")]


async def test_the_prompts_system_message_wins_over_a_remembered_one() -> None:
    memory = MessageWindowChatMemory()
    memory.add("c", [system("old"), user("Q1"), answer("A1")])
    model = ScriptedModel(["A2", "A3"])
    advisor = MessageChatMemoryAdvisor(memory)
    await call(advisor, model, user("Q2"), system("new"))
    assert list(model.requests[0].messages) == [
        system("new"),
        user("Q1"),
        answer("A1"),
        user("Q2"),
    ]
    memory.clear("c")
    memory.add("c", [system("remembered"), user("Q1")])
    await call(advisor, model, user("Q2"))
    assert list(model.requests[1].messages) == [system("remembered"), user("Q1"), user("Q2")]


async def test_outside_the_loop_a_turn_without_a_final_answer_is_not_stored() -> None:
    memory = MessageWindowChatMemory()
    advisor = MessageChatMemoryAdvisor(memory)
    model = ScriptedModel([tool_call("t", id="x"), "done"])
    await call(advisor, model, user("Q"))
    assert memory.get("c") == []
    # The caller runs the tool itself and sends the round back: the turn completes.
    await call(advisor, model, user("Q"), calls("x"), results("x"))
    assert memory.get("c") == [user("Q"), answer("done")]


async def test_inside_the_loop_tool_traffic_is_stored() -> None:
    memory = MessageWindowChatMemory()
    advisor = MessageChatMemoryAdvisor(memory, inside_tool_loop=True)
    model = ScriptedModel([tool_call("lookup", {"q": 1}, id="x"), "done"])
    await call(advisor, model, user("Q"))
    await call(advisor, model, user("Q"), calls("x"), results("x"))
    assert memory.get("c") == [user("Q"), calls("x"), results("x"), answer("done")]


async def test_a_failed_request_leaves_memory_unchanged() -> None:
    memory = MessageWindowChatMemory()
    memory.add("c", [user("Q1"), answer("A1")])
    with pytest.raises(ScriptExhaustedError):
        await call(MessageChatMemoryAdvisor(memory), ScriptedModel([]), user("Q2"))
    assert memory.get("c") == [user("Q1"), answer("A1")]


async def test_streaming_replays_history_and_stores_the_whole_answer() -> None:
    memory = MessageWindowChatMemory()
    memory.add("c", [user("Q1"), answer("A1")])
    model = ScriptedModel(["a long streamed answer"], chunk_size=3)
    chain = AdvisorChain([MessageChatMemoryAdvisor(memory)], model)
    chunks = [item.chat_response async for item in chain.next_stream(request(user("Q2")))]
    assert len(chunks) > 3
    assert merge_chunks(c for c in chunks if c is not None).text == "a long streamed answer"
    assert list(model.requests[0].messages) == [user("Q1"), answer("A1"), user("Q2")]
    assert memory.get("c") == [
        user("Q1"),
        answer("A1"),
        user("Q2"),
        answer("a long streamed answer"),
    ]


async def test_concurrent_requests_on_one_conversation_keep_their_turns_whole(
    tmp_path: Path,
) -> None:
    with SqliteChatMemoryRepository(tmp_path / "memory.db") as repository:
        memory = MessageWindowChatMemory(max_messages=100, repository=repository)
        advisor = MessageChatMemoryAdvisor(memory)

        async def turn(n: int) -> None:
            async def reply(prompt: Prompt) -> str:
                await asyncio.sleep(0.01 * (n % 3))  # finish in another order than started
                return f"answer {n}"

            await AdvisorChain([advisor], FunctionModel(reply)).next_call(
                request(user(f"question {n}"))
            )

        await asyncio.gather(*(turn(n) for n in range(10)))
        stored = memory.get("c")
    assert len(stored) == 20
    for question, reply in zip(stored[::2], stored[1::2], strict=True):
        assert isinstance(question, UserMessage) and isinstance(reply, AssistantMessage)
        assert question.text.split()[-1] == (reply.text or "").split()[-1]


async def test_a_read_only_advisor_replays_but_never_writes() -> None:
    memory = MessageWindowChatMemory()
    memory.add("c", [user("Q1"), answer("A1")])
    model = ScriptedModel(["A2"])
    advisor = MessageChatMemoryAdvisor(memory, read_only=True)
    assert advisor.read_only
    await call(advisor, model, user("Q2"))
    assert list(model.requests[0].messages) == [user("Q1"), answer("A1"), user("Q2")]
    assert memory.get("c") == [user("Q1"), answer("A1")]
