"""What keeps a small model's router on track (QaPipeline's router_* options): it ends after
its fetching round, on a repeated call, drops calls with made-up arguments, and can read the
earlier turns as a note."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import pytest

from _qa_helpers import CountingRetriever
from tooluse import tool
from tooluse.memory import MessageWindowChatMemory
from tooluse.messages import (
    AssistantMessage,
    ChatResponse,
    Prompt,
    ToolCall,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from tooluse.qa import QaPipeline
from tooluse.rag import Document
from tooluse.testing import FunctionModel, ResponseLike, ScriptedModel, chat_response, tool_call

KNOWLEDGE = [Document(text="Returns: items can be returned within 30 days.", id="returns")]


@tool
def order_status(order_id: str) -> dict[str, str]:
    """Live status of an order, e.g. A1001."""
    return {"order_id": order_id, "status": "shipped"}


@tool
def weather(city: str) -> dict[str, object]:
    """Current weather in a city."""
    return {"city": city, "celsius": 21}


def pipeline(
    model: ScriptedModel | FunctionModel,
    tools: Sequence[object] = (order_status, weather),
    **options: object,
) -> QaPipeline:
    return QaPipeline(model, retriever=CountingRetriever(KNOWLEDGE), tools=list(tools), **options)


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
    def router(prompt: Prompt) -> object:  # the same call whenever asked, also when told
        if not prompt.options.tool_callbacks:
            return "answer"
        return tool_call("order_status", {"order_id": "A1001"})

    model = FunctionModel(router)
    options = {"router_grounded_arguments": True, "router_fetch_rounds": 1}
    result = await pipeline(model, **options).acall(question)
    assert [call.name for call in result.tool_calls] == called
    assert result.route == ("tools" if called else "knowledge")
    assert result.answer == "answer"


async def test_the_model_hears_why_a_made_up_call_was_dropped_and_decides_again() -> None:
    model = ScriptedModel(
        [
            tool_call("weather", {"city": "Shanghai"}),  # the wrong tool, a place nobody named
            tool_call("order_status", {"order_id": "B2002"}),
            "Order B2002 has shipped.",
        ]
    )
    options = {"router_grounded_arguments": True, "router_fetch_rounds": 1}
    result = await pipeline(model, **options).acall("我的订单 B2002 到哪了？")
    assert [(call.name, call.arguments) for call in result.tool_calls] == [
        ("order_status", '{"order_id": "B2002"}')
    ]
    retry = model.requests[1]
    assert isinstance(retry.messages[-1], ToolResponseMessage)
    [dropped] = retry.messages[-1].responses
    assert dropped.is_error and "The user gave no city" in dropped.data
    assert [c.definition.name for c in retry.options.tool_callbacks] == ["order_status"]
    assert len(model.requests) == 3  # the router twice, the answer once


@tool
def utc_now() -> str:
    """The current time in UTC."""
    return "2026-12-01T23:00:00Z"


@pytest.mark.parametrize(
    "second",
    [
        tool_call("utc_now", {}),  # nothing the user said: no evidence either
        tool_call("order_status", {"order_id": "A1001"}),  # made up again
    ],
)
async def test_asked_again_only_a_call_on_what_the_user_said_is_taken(second: object) -> None:
    model = ScriptedModel([tool_call("weather", {"city": "London"}), second, "answer"])
    qa = QaPipeline(
        model,
        retriever=CountingRetriever(KNOWLEDGE),
        tools=[order_status, weather, utc_now],
        router_grounded_arguments=True,
        router_fetch_rounds=1,
    )
    result = await qa.acall("What does METAR stand for?")
    assert result.tool_calls == () and result.route == "knowledge"


async def test_a_knowledge_question_ends_the_router_when_the_model_replies_empty() -> None:
    model = ScriptedModel([tool_call("order_status", {"order_id": "A1001"}), "", "answer"])
    options = {"router_grounded_arguments": True, "router_fetch_rounds": 1}
    result = await pipeline(model, **options).acall("Is shipping free?")
    assert result.tool_calls == () and result.route == "knowledge"


async def test_made_up_arguments_are_called_without_the_option() -> None:
    model = ScriptedModel([tool_call("order_status", {"order_id": "A1001"}), "", "answer"])
    result = await pipeline(model).acall("How long do I have to return an item?")
    assert [call.name for call in result.tool_calls] == ["order_status"]


async def test_the_router_can_read_earlier_turns_as_a_note() -> None:
    memory = MessageWindowChatMemory()
    await memory.aadd("c", [UserMessage(text="Weather in Paris?"), AssistantMessage(text="21 C.")])
    model = ScriptedModel(["", "answer"])
    qa = pipeline(model, [weather], memory=memory, router_history_as_text=True)
    await qa.acall("And in London?", conversation_id="c")
    router = model.requests[0]
    assert not any(isinstance(m, AssistantMessage) for m in router.messages)
    question = router.messages[-1]
    assert isinstance(question, UserMessage)
    assert "User: Weather in Paris?\nAssistant: 21 C." in question.text
    assert question.text.endswith("The question: And in London?")
    answer = model.requests[1]  # the answer stage reads the history as messages
    assert any(isinstance(m, AssistantMessage) and m.text == "21 C." for m in answer.messages)


@tool
def pickup_points(near: str, radius_km: float = 2.0) -> dict[str, object]:
    """Pickup points near a place."""
    return {"near": near, "points": []}


@tool
def book_slot(day: int, rooms: list[str], confirm: bool, size: Literal["s", "l"]) -> str:
    """Book rooms for a day of the month."""
    return "booked"


async def grounded_calls(question: str, call: object, *tools: object) -> list[str]:
    """The tools the router called, with grounded arguments, when its model made ``call``
    (and, told it was made up, nothing)."""
    model = ScriptedModel([call, "", "answer"])
    qa = QaPipeline(
        model,
        retriever=CountingRetriever(KNOWLEDGE),
        tools=list(tools),
        router_grounded_arguments=True,
        router_fetch_rounds=1,
    )
    return [c.name for c in (await qa.acall(question)).tool_calls]


@pytest.mark.parametrize(
    ("question", "arguments", "called"),
    [
        ("Book rooms A and B on the 12th, size large.", {"day": 12}, True),
        ("第十二天订 A 和 B 两间", {"day": 12}, True),  # a Chinese numeral
        ("Book rooms A and B on the 12th.", {"day": 14}, False),  # a made-up number
        ("Book room A on the 12th.", {"day": 12, "rooms": ["A", "C"]}, False),  # C: made up
        ("Book ＡＢ on the 12th.", {"day": 12, "rooms": ["ab"]}, True),  # full-width letters
    ],
)
async def test_made_up_numbers_and_list_items_are_dropped_too(
    question: str, arguments: dict[str, object], called: bool
) -> None:
    full = {"day": 12, "rooms": ["A", "B"], "confirm": True, "size": "l", **arguments}
    tools = await grounded_calls(question, tool_call("book_slot", full), book_slot)
    assert tools == (["book_slot"] if called else [])  # confirm and size: choices, never made up


async def test_an_optional_argument_is_not_checked() -> None:
    call = tool_call("pickup_points", {"near": "People's Square", "radius_km": 2})
    assert await grounded_calls("Lockers near People's Square?", call, pickup_points) == [
        "pickup_points"
    ]


@tool
def local_time(timezone: str = "UTC") -> str:
    """The current time in a time zone."""
    return f"12:00 in {timezone}"


@pytest.mark.parametrize(
    ("question", "call"),
    [
        ("什么是 GMT 时间？", tool_call("local_time", {"timezone": "GMT"})),
        ("What is CET?", tool_call("local_time", {"timezone": "CET"})),
        ("What does EST stand for?", tool_call("local_time", {"timezone": "est"})),
        ("时区是什么意思？", tool_call("local_time", {})),  # no argument: still about it
        ("What are parcel lockers?", tool_call("pickup_points", {"near": "parcel lockers"})),
    ],
)
async def test_a_call_on_the_term_a_definition_question_asks_about_is_not_run(
    question: str, call: ToolCall
) -> None:
    model = ScriptedModel([call, "answer"])
    qa = pipeline(
        model, [local_time, pickup_points], router_grounded_arguments=True, router_fetch_rounds=1
    )
    result = await qa.acall(question)
    assert result.tool_calls == () and result.route == "knowledge"
    assert result.answer == "answer"
    assert len(model.requests) == 2  # not asked again: a definition question needs no tool
    assert not model.requests[1].options.tool_callbacks  # the second request is the answer


@pytest.mark.parametrize(
    ("question", "call"),
    [
        ("What is the time in CET?", tool_call("local_time", {"timezone": "CET"})),
        ("What is CET now?", tool_call("local_time", {"timezone": "CET"})),
        ("现在 GMT 时间是什么？", tool_call("local_time", {"timezone": "GMT"})),
        ("What's the weather in Paris like?", tool_call("weather", {"city": "Paris"})),
        ("What is order A1's status?", tool_call("order_status", {"order_id": "A1"})),
        ("GMT 时间是多少？", tool_call("local_time", {"timezone": "GMT"})),
        ("What is a pickup point near Lujiazui?", tool_call("pickup_points", {"near": "Lujiazui"})),
    ],
)
async def test_a_question_for_a_value_in_the_same_words_is_fetched(
    question: str, call: ToolCall
) -> None:
    model = ScriptedModel([call, "answer"])
    tools = [local_time, weather, order_status, pickup_points]
    qa = pipeline(model, tools, router_grounded_arguments=True, router_fetch_rounds=1)
    result = await qa.acall(question)
    assert [c.name for c in result.tool_calls] == [call.name]


async def test_a_definition_question_still_fetches_what_is_not_its_term() -> None:
    """Asked what a state means, after naming the order: the order's status is not the term."""
    memory = MessageWindowChatMemory()
    await memory.aadd("c", [UserMessage(text="Where is order A1?"), AssistantMessage(text="Held.")])
    model = ScriptedModel([tool_call("order_status", {"order_id": "A1"}), "answer"])
    qa = pipeline(
        model, [order_status], memory=memory, router_grounded_arguments=True, router_fetch_rounds=1
    )
    result = await qa.acall("What does held mean?", conversation_id="c")
    assert [c.name for c in result.tool_calls] == ["order_status"]


async def test_a_call_on_a_definitions_term_runs_without_the_option() -> None:
    model = ScriptedModel([tool_call("local_time", {"timezone": "GMT"}), "", "answer"])
    qa = QaPipeline(model, retriever=CountingRetriever(KNOWLEDGE), tools=[local_time])
    result = await qa.acall("什么是 GMT 时间？")
    assert [c.name for c in result.tool_calls] == ["local_time"]


def _used(tokens: int) -> Usage:
    return Usage(prompt_tokens=tokens, completion_tokens=1, total_tokens=tokens + 1)


@pytest.mark.parametrize(
    ("router", "question", "calls"),
    [
        # a call, then its repeat, which ends the router
        (
            [
                tool_call("order_status", {"order_id": "A1"}),
                tool_call("order_status", {"order_id": "A1"}),
            ],
            "Where is order A1?",
            ["order_status"],
        ),
        # a made-up call, then, told why, the right one (one round, two requests), then
        # the empty reply that ends the router
        (
            [
                tool_call("weather", {"city": "Shanghai"}),
                tool_call("order_status", {"order_id": "B2002"}),
                "",
            ],
            "Where is order B2002?",
            ["order_status"],
        ),
        # a made-up call, then a reply in words, which ends the router
        ([tool_call("order_status", {"order_id": "A1001"}), "no"], "Is shipping free?", []),
    ],
)
async def test_the_turns_usage_counts_every_router_request(
    router: list[ResponseLike], question: str, calls: list[str]
) -> None:
    """Each model response the guard replaces or drops was paid for: QaResult.usage, which
    the service reports, has its tokens (they were once left out)."""
    sizes = iter([100, 200, 300, 400, 500])

    def counted(response: ResponseLike) -> ChatResponse:
        text = response if isinstance(response, str) else None
        tool_calls = [response] if isinstance(response, ToolCall) else []
        return chat_response(text, tool_calls, usage=_used(next(sizes)))

    model = ScriptedModel([*map(counted, router), counted("the answer")])
    options = {"router_grounded_arguments": True}  # no round limit: the repeat is asked for
    result = await pipeline(model, **options).acall(question)
    assert [call.name for call in result.tool_calls] == calls
    assert len(model.requests) == len(router) + 1
    sent = [_used(size) for size in (100, 200, 300, 400, 500)[: len(model.requests)]]
    assert result.usage == sum(sent[1:], sent[0])


async def test_the_router_can_be_reminded_of_its_rule_after_the_question() -> None:
    memory = MessageWindowChatMemory()
    await memory.aadd("c", [UserMessage(text="Weather in Paris?"), AssistantMessage(text="21 C.")])
    # asked again after a made-up call: the reminder is still there
    model = ScriptedModel([tool_call("order_status", {"order_id": "Route"}), "", "answer"])
    qa = QaPipeline(
        model,
        retriever=CountingRetriever(KNOWLEDGE),
        tools=[order_status, weather],
        memory=memory,
        router_history_as_text=True,
        router_grounded_arguments=True,
        router_reminder="(Route it: tools only for live data.)",
    )
    result = await qa.acall("And in London?", conversation_id="c")
    for router in model.requests[:2]:
        question = next(m for m in reversed(router.messages) if isinstance(m, UserMessage))
        assert question.text.endswith(
            "The question: And in London?\n\n(Route it: tools only for live data.)"
        )
    # the reminder's words are not the user's: "Route" is made up
    assert result.tool_calls == () and result.route == "knowledge"
    answer = model.requests[2]
    assert not any("Route it" in (m.text or "") for m in answer.messages)
    stored = await memory.aget("c")
    assert [m.text for m in stored if isinstance(m, UserMessage)][-1] == "And in London?"
