"""What keeps a small model's router on track (QaPipeline's router_* options): it ends after
its fetching round, on a repeated call, drops calls with made-up arguments, and can read the
earlier turns as a note."""

from __future__ import annotations

import pytest

from _qa_helpers import CountingRetriever
from tooluse import tool
from tooluse.memory import MessageWindowChatMemory
from tooluse.messages import AssistantMessage, Prompt, ToolResponseMessage, UserMessage
from tooluse.qa import QaPipeline
from tooluse.rag import Document
from tooluse.testing import FunctionModel, ScriptedModel, tool_call

KNOWLEDGE = [Document(text="Returns: items can be returned within 30 days.", id="returns")]


@tool
def order_status(order_id: str) -> dict[str, str]:
    """Live status of an order, e.g. A1001."""
    return {"order_id": order_id, "status": "shipped"}


@tool
def weather(city: str) -> dict[str, object]:
    """Current weather in a city."""
    return {"city": city, "celsius": 21}


def pipeline(model: ScriptedModel | FunctionModel, **options: object) -> QaPipeline:
    return QaPipeline(
        model, retriever=CountingRetriever(KNOWLEDGE), tools=[order_status, weather], **options
    )


def calling_on(prompt: Prompt) -> object:
    """A router that calls the next tool whenever it is asked again."""
    if not prompt.options.tool_callbacks:
        return "Order A1 has shipped."
    if any(isinstance(m, ToolResponseMessage) for m in prompt.messages):
        return tool_call("weather", {"city": "A1"})
    return tool_call("order_status", {"order_id": "A1"})


async def test_the_router_ends_after_its_fetching_round() -> None:
    model = FunctionModel(calling_on)
    result = await pipeline(model, router_fetch_rounds=1).acall("Where is order A1?")
    assert [call.name for call in result.tool_calls] == ["order_status"]
    assert result.route == "tools" and result.answer == "Order A1 has shipped."
    assert len(model.requests) == 2  # the router once, the answer once
    unlimited = await pipeline(FunctionModel(calling_on)).acall("Where is order A1?")
    assert [call.name for call in unlimited.tool_calls][:2] == ["order_status", "weather"]


async def test_a_failed_round_does_not_count_as_fetching() -> None:
    model = ScriptedModel(
        [tool_call("order_status", {}), tool_call("order_status", {"order_id": "A1"}), "ok"]
    )
    result = await pipeline(model, router_fetch_rounds=1).acall("Where is order A1?")
    assert [r.is_error for r in result.tool_results] == [True, False]


async def test_a_repeated_call_ends_the_router_instead_of_looping_to_the_limit() -> None:
    def router(prompt: Prompt) -> object:
        if not prompt.options.tool_callbacks:
            return "Order A1 has shipped."
        return tool_call("order_status", {"order_id": "A1"})  # again and again

    model = FunctionModel(router)
    result = await pipeline(model).acall("Where is order A1?")  # no round limit
    assert len(result.tool_calls) == 1 and result.answer == "Order A1 has shipped."
    assert len(model.requests) == 3  # call, the repeat (dropped), the answer


@pytest.mark.parametrize(
    ("question", "called"),
    [
        ("How long do I have to return an item?", []),  # the id comes from the description
        ("Where is order a1001?", ["order_status"]),  # case aside, it is in the question
    ],
)
async def test_calls_with_made_up_arguments_are_dropped(question: str, called: list[str]) -> None:
    model = ScriptedModel([tool_call("order_status", {"order_id": "A1001"}), "answer"])
    options = {"router_grounded_arguments": True, "router_fetch_rounds": 1}
    result = await pipeline(model, **options).acall(question)
    assert [call.name for call in result.tool_calls] == called
    assert result.route == ("tools" if called else "knowledge")


async def test_made_up_arguments_are_called_without_the_option() -> None:
    model = ScriptedModel([tool_call("order_status", {"order_id": "A1001"}), "", "answer"])
    result = await pipeline(model).acall("How long do I have to return an item?")
    assert [call.name for call in result.tool_calls] == ["order_status"]


async def test_the_router_can_read_earlier_turns_as_a_note() -> None:
    memory = MessageWindowChatMemory()
    await memory.aadd("c", [UserMessage(text="Weather in Paris?"), AssistantMessage(text="21 C.")])
    model = ScriptedModel(["", "answer"])
    qa = QaPipeline(
        model,
        retriever=CountingRetriever(KNOWLEDGE),
        tools=[weather],
        memory=memory,
        router_history_as_text=True,
    )
    await qa.acall("And in London?", conversation_id="c")
    router = model.requests[0]
    assert not any(isinstance(m, AssistantMessage) for m in router.messages)
    question = router.messages[-1]
    assert isinstance(question, UserMessage)
    assert "User: Weather in Paris?\nAssistant: 21 C." in question.text
    assert question.text.endswith("The question: And in London?")
    answer = model.requests[1]  # the answer stage reads the history as messages
    assert any(isinstance(m, AssistantMessage) and m.text == "21 C." for m in answer.messages)
