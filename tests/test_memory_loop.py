"""Chat memory with the whole client loop: tool rounds, outside and inside the loop."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _loop_tools import RecordingTool
from _memory_helpers import tool_pairing_problems
from tooluse import Approve, Deny, RunState, ToolCallingManager
from tooluse.advisors import ToolCallingAdvisor
from tooluse.client import CallResponse, ChatClient, StreamResponse
from tooluse.history import HELD_TOOL_CALL_RESULT
from tooluse.memory import (
    CONVERSATION_ID,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    SqliteChatMemoryRepository,
)
from tooluse.messages import (
    AssistantMessage,
    ChatResponse,
    Generation,
    Message,
    Prompt,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.testing import FunctionModel, ResponseLike, ScriptedModel, tool_call

WEATHER_CALL = ToolCall(id="w1", name="weather", arguments='{"city": "Paris"}')


def weather_turn() -> list[Message]:
    return [
        UserMessage(text="Weather in Paris?"),
        AssistantMessage(tool_calls=(WEATHER_CALL,)),
        ToolResponseMessage(responses=(ToolResponse(id="w1", name="weather", data="sunny"),)),
        AssistantMessage(text="Sunny in Paris."),
    ]


def held_record(*calls: ToolCall) -> ToolResponseMessage:
    return ToolResponseMessage(
        responses=tuple(
            ToolResponse(id=c.id, name=c.name, data=HELD_TOOL_CALL_RESULT, is_error=True)
            for c in calls
        ),
        held_for_approval=tuple(c.id for c in calls),
    )


def script() -> ScriptedModel:
    return ScriptedModel(
        [tool_call("weather", {"city": "Paris"}, id="w1"), "Sunny in Paris.", "You're welcome."]
    )


def weather_tool() -> RecordingTool:
    return RecordingTool("weather", lambda arguments, context: "sunny")


def ask(client: ChatClient, text: str) -> str:
    return client.prompt(text).context({CONVERSATION_ID: "c"}).call().content()


def test_memory_outside_the_loop_holds_only_questions_and_final_answers() -> None:
    memory = MessageWindowChatMemory()
    model = script()
    client = ChatClient(model, tools=[weather_tool()], advisors=[MessageChatMemoryAdvisor(memory)])
    assert ask(client, "Weather in Paris?") == "Sunny in Paris."
    assert memory.get("c") == [weather_turn()[0], weather_turn()[-1]]
    # Within the turn the loop still sends the model the whole round.
    assert list(model.requests[1].messages) == weather_turn()[:3]
    assert ask(client, "Thanks!") == "You're welcome."
    assert list(model.requests[2].messages) == [
        weather_turn()[0],
        weather_turn()[-1],
        UserMessage(text="Thanks!"),
    ]
    assert memory.get("c")[-2:] == [
        UserMessage(text="Thanks!"),
        AssistantMessage(text="You're welcome."),
    ]


@pytest.mark.parametrize("loop_history", [True, False])
def test_memory_inside_the_loop_stores_tool_traffic_without_duplicates(
    loop_history: bool,
) -> None:
    memory = MessageWindowChatMemory()
    model = script()
    client = ChatClient(
        model,
        tools=[weather_tool()],
        advisors=[MessageChatMemoryAdvisor(memory, inside_tool_loop=True)],
        tool_calling_advisor=ToolCallingAdvisor(conversation_history=loop_history),
    )
    assert ask(client, "Weather in Paris?") == "Sunny in Paris."
    assert memory.get("c") == weather_turn()
    assert list(model.requests[1].messages) == weather_turn()[:3]
    ask(client, "Thanks!")
    assert list(model.requests[2].messages) == [*weather_turn(), UserMessage(text="Thanks!")]
    assert memory.get("c") == [
        *weather_turn(),
        UserMessage(text="Thanks!"),
        AssistantMessage(text="You're welcome."),
    ]


async def test_streamed_answers_are_stored_after_the_tool_round() -> None:
    memory = MessageWindowChatMemory()
    client = ChatClient(
        script(), tools=[weather_tool()], advisors=[MessageChatMemoryAdvisor(memory)]
    )
    stream = client.prompt("Weather in Paris?").context({CONVERSATION_ID: "c"}).stream()
    text = "".join([piece async for piece in stream.content()])
    assert text == "Sunny in Paris."
    assert memory.get("c") == [weather_turn()[0], weather_turn()[-1]]


def test_memory_over_sqlite_survives_a_new_client(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with SqliteChatMemoryRepository(path) as repository:
        memory = MessageWindowChatMemory(repository=repository)
        client = ChatClient(
            script(), tools=[weather_tool()], advisors=[MessageChatMemoryAdvisor(memory)]
        )
        ask(client, "Weather in Paris?")
    with SqliteChatMemoryRepository(path) as reopened:
        model = ScriptedModel(["Again: sunny."])
        client = ChatClient(
            model,
            advisors=[MessageChatMemoryAdvisor(MessageWindowChatMemory(repository=reopened))],
        )
        ask(client, "And now?")
        assert list(model.requests[0].messages) == [
            weather_turn()[0],
            weather_turn()[-1],
            UserMessage(text="And now?"),
        ]


def test_a_missing_conversation_id_fails_before_the_model_is_called() -> None:
    model = ScriptedModel(["never"])
    client = ChatClient(model, advisors=[MessageChatMemoryAdvisor(MessageWindowChatMemory())])
    with pytest.raises(ValueError, match="needs a conversation id"):
        client.prompt("hi").call()
    assert model.requests == []


@pytest.mark.parametrize("inside", [False, True])
def test_a_run_paused_for_approval_is_remembered_once_when_resumed(inside: bool) -> None:
    memory = MessageWindowChatMemory()
    tool = RecordingTool("weather", lambda arguments, context: "sunny", requires_approval=True)
    model = script()
    client = ChatClient(
        model,
        tools=[tool],
        advisors=[MessageChatMemoryAdvisor(memory, inside_tool_loop=inside)],
    )
    paused = client.prompt("Weather in Paris?").context({CONVERSATION_ID: "c"}).call()
    assert paused.state is not None
    assert [call.id for call in paused.pending_tool_calls] == ["w1"]
    # The held round is recorded whole: a run never resumed leaves no call without a result.
    assert memory.get("c") == [*weather_turn()[:2], held_record(WEATHER_CALL)]
    resumed = client.resume(RunState.from_json(paused.state.to_json()), {"w1": Approve()})
    assert resumed.content() == "Sunny in Paris."
    assert memory.get("c") == weather_turn()  # the completed round replaced the record


# A round of two calls: one that runs at once and has a side effect, one held for approval.
# The user never decides and asks something else in the same conversation.


class OrderTools:
    """``place_order`` (runs at once; counts its runs) and ``refund`` (needs approval)."""

    def __init__(self) -> None:
        self.place_order = RecordingTool("place_order", lambda arguments, context: "order 42")
        self.refund = RecordingTool(
            "refund", lambda arguments, context: "refunded", requires_approval=True
        )

    @property
    def tools(self) -> list[RecordingTool]:
        return [self.place_order, self.refund]


ORDER_REQUEST = "Order, and refund the last one"
ORDER_ROUND = [tool_call("place_order", id="o1"), tool_call("refund", id="r1")]


def results_for(messages: Sequence[Message], call_id: str) -> list[ToolResponse]:
    return [
        response
        for message in messages
        if isinstance(message, ToolResponseMessage)
        for response in message.responses
        if response.id == call_id
    ]


def order_model() -> FunctionModel:
    """Opens with the round of two calls; later, like a real model, calls ``place_order``
    again when the history says its call has no result, and otherwise answers."""

    def respond(prompt: Prompt) -> ResponseLike:
        messages = prompt.messages
        if not isinstance(messages[-1], UserMessage):
            return "Done."
        if messages[-1].text == ORDER_REQUEST:
            return ORDER_ROUND
        placed = results_for(messages, "o1")
        if not placed or placed[-1].is_error:
            return [tool_call("place_order", id="o2")]
        return "Order 42 is placed; the refund was not approved."

    return FunctionModel(respond)


def order_client(
    memory: MessageWindowChatMemory,
    tools: OrderTools,
    model: FunctionModel,
    *,
    inside: bool,
    loop_history: bool = True,
) -> ChatClient:
    return ChatClient(
        model,
        tools=tools.tools,
        advisors=[MessageChatMemoryAdvisor(memory, inside_tool_loop=inside)],
        tool_calling_advisor=ToolCallingAdvisor(conversation_history=loop_history),
    )


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("inside", [False, True])
async def test_an_abandoned_approval_neither_loses_what_ran_nor_reports_what_did_not(
    inside: bool, streamed: bool
) -> None:
    memory, tools, model = MessageWindowChatMemory(), OrderTools(), order_model()
    client = order_client(memory, tools, model, inside=inside)
    request = client.prompt(ORDER_REQUEST).context({CONVERSATION_ID: "c"})
    if streamed:
        paused: CallResponse | StreamResponse = request.stream()
        async for _chunk in paused:  # it ends on the paused round
            pass
    else:
        paused = await request.acall()
    assert [call.id for call in paused.pending_tool_calls] == ["r1"]
    assert len(tools.place_order.calls) == 1
    # No decision: the user moves on in the same conversation.
    await client.prompt("Is my order placed?").context({CONVERSATION_ID: "c"}).acall()
    assert len(tools.place_order.calls) == 1
    assert tools.refund.calls == []
    sent = list(model.requests[-1].messages)
    assert tool_pairing_problems(sent) == []
    (placed,) = results_for(sent, "o1")
    assert (placed.data, placed.is_error) == ("order 42", False)
    (held,) = results_for(sent, "r1")
    assert held.is_error
    assert held.data == HELD_TOOL_CALL_RESULT
    assert dangling_calls(memory.get("c")) == []


@pytest.mark.parametrize(
    ("decision", "refund_result"),
    [
        (Approve(), ToolResponse(id="r1", name="refund", data="refunded")),
        (
            Deny("Not this one."),
            ToolResponse(id="r1", name="refund", data="Not this one.", is_error=True),
        ),
    ],
)
@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(("inside", "loop_history"), [(False, True), (True, True), (True, False)])
async def test_a_resumed_approval_runs_nothing_twice_and_stores_each_result_once(
    inside: bool,
    loop_history: bool,
    streamed: bool,
    decision: Approve | Deny,
    refund_result: ToolResponse,
) -> None:
    memory, tools, model = MessageWindowChatMemory(), OrderTools(), order_model()
    client = order_client(memory, tools, model, inside=inside, loop_history=loop_history)
    paused = await client.prompt(ORDER_REQUEST).context({CONVERSATION_ID: "c"}).acall()
    assert paused.state is not None
    state = RunState.from_json(paused.state.to_json())
    decisions = {"r1": decision}
    if streamed:
        stream = client.resume_stream(state, decisions)
        assert "".join([piece async for piece in stream.content()]) == "Done."
    else:
        assert (await client.aresume(state, decisions)).content() == "Done."
    round_results = ToolResponseMessage(
        responses=(
            ToolResponse(id="o1", name="place_order", data="order 42"),
            refund_result,
        )
    )
    assert memory.get("c") == [
        UserMessage(text=ORDER_REQUEST),
        AssistantMessage(tool_calls=tuple(ORDER_ROUND)),
        round_results,
        AssistantMessage(text="Done."),
    ]
    await client.prompt("Is my order placed?").context({CONVERSATION_ID: "c"}).acall()
    assert len(tools.place_order.calls) == 1
    assert len(tools.refund.calls) == (1 if isinstance(decision, Approve) else 0)
    sent = list(model.requests[-1].messages)
    assert tool_pairing_problems(sent) == []
    assert [m for m in sent if isinstance(m, ToolResponseMessage)] == [round_results]


class AppendOnlyMemory:
    """A ``ChatMemory`` of one's own that appends what it is given and nothing else."""

    def __init__(self) -> None:
        self.stored: dict[str, list[Message]] = {}

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        batch = list(messages) if isinstance(messages, Sequence) else [messages]
        self.stored.setdefault(conversation_id, []).extend(batch)

    def get(self, conversation_id: str) -> list[Message]:
        return list(self.stored.get(conversation_id, ()))

    def clear(self, conversation_id: str) -> None:
        self.stored.pop(conversation_id, None)

    async def aadd(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        self.add(conversation_id, messages)

    async def aget(self, conversation_id: str) -> list[Message]:
        return self.get(conversation_id)

    async def aclear(self, conversation_id: str) -> None:
        self.clear(conversation_id)


@pytest.mark.parametrize("inside", [False, True])
async def test_a_memory_that_only_appends_tells_the_model_what_a_resumed_approval_did(
    inside: bool,
) -> None:
    """Such a memory keeps the held round's record beside the completed round; the model must
    see the refund's real result, not the record's "not run" (it would refund again)."""
    memory, tools, model = AppendOnlyMemory(), OrderTools(), order_model()
    client = ChatClient(
        model,
        tools=tools.tools,
        advisors=[MessageChatMemoryAdvisor(memory, inside_tool_loop=inside)],
    )
    paused = await client.prompt(ORDER_REQUEST).context({CONVERSATION_ID: "c"}).acall()
    assert paused.state is not None
    assert (await client.aresume(paused.state, {"r1": Approve()})).content() == "Done."
    assert len(results_for(memory.get("c"), "r1")) == 2  # the record and the real result

    await client.prompt("Is my order refunded?").context({CONVERSATION_ID: "c"}).acall()
    sent = list(model.requests[-1].messages)
    assert tool_pairing_problems(sent) == []
    (refund,) = results_for(sent, "r1")
    assert (refund.data, refund.is_error) == ("refunded", False)
    assert len(tools.refund.calls) == 1


def dangling_calls(messages: list[Message]) -> list[str]:
    """Ids of tool calls that no later tool response answers."""
    answered = {
        response.id
        for message in messages
        if isinstance(message, ToolResponseMessage)
        for response in message.responses
    }
    return [
        call.id
        for message in messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
        if call.id not in answered
    ]


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_turn_ended_by_a_return_direct_tool_is_stored_whole_inside_the_loop(
    streamed: bool,
) -> None:
    # No model call follows a return-direct round: memory used to keep the call without its
    # result, and the next turn told the model the call had been interrupted.
    memory = MessageWindowChatMemory()
    tool = RecordingTool("weather", lambda arguments, context: "sunny", return_direct=True)
    model = ScriptedModel([tool_call("weather", {"city": "Paris"}, id="w1"), "Glad to help."])
    client = ChatClient(
        model, tools=[tool], advisors=[MessageChatMemoryAdvisor(memory, inside_tool_loop=True)]
    )
    request = client.prompt("Weather in Paris?").context({CONVERSATION_ID: "c"})
    if streamed:
        stream = request.stream()
        assert "".join([piece async for piece in stream.content()]) == "sunny"
    else:
        assert (await request.acall()).content() == "sunny"
    stored = memory.get("c")
    assert stored == [*weather_turn()[:3], AssistantMessage(text="sunny")]
    await client.prompt("Thanks!").context({CONVERSATION_ID: "c"}).acall()
    assert list(model.requests[1].messages) == [*stored, UserMessage(text="Thanks!")]


def test_a_turn_ended_by_a_call_limit_keeps_no_call_without_a_result_inside_the_loop() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedModel(
        [
            ChatResponse(
                generations=(
                    Generation(
                        message=AssistantMessage(
                            tool_calls=(
                                ToolCall(id="a", name="weather", arguments="{}"),
                                ToolCall(id="b", name="weather", arguments="{}"),
                            )
                        )
                    ),
                )
            )
        ]
    )
    client = ChatClient(
        model,
        tools=[weather_tool()],
        advisors=[MessageChatMemoryAdvisor(memory, inside_tool_loop=True)],
        tool_calling_advisor=ToolCallingAdvisor(
            tool_calling_manager=ToolCallingManager(per_tool_limits={"weather": 1})
        ),
    )
    response = client.prompt("Twice?").context({CONVERSATION_ID: "c"}).call()
    assert response.chat_response().generations[0].finish_reason == "toolCallLimitExceeded"
    stored = memory.get("c")
    assert dangling_calls(stored) == []
    assert stored[-1] == response.chat_response().generations[0].message


def test_a_resumed_run_that_ends_on_a_return_direct_tool_is_stored_whole_inside_the_loop() -> None:
    memory = MessageWindowChatMemory()
    tool = RecordingTool(
        "weather", lambda arguments, context: "sunny", requires_approval=True, return_direct=True
    )
    client = ChatClient(
        script(), tools=[tool], advisors=[MessageChatMemoryAdvisor(memory, inside_tool_loop=True)]
    )
    paused = client.prompt("Weather in Paris?").context({CONVERSATION_ID: "c"}).call()
    assert paused.state is not None
    assert memory.get("c") == [*weather_turn()[:2], held_record(WEATHER_CALL)]
    resumed = client.resume(RunState.from_json(paused.state.to_json()), {"w1": Approve()})
    assert resumed.content() == "sunny"
    assert memory.get("c") == [*weather_turn()[:3], AssistantMessage(text="sunny")]


# Property: whole conversations through the client. Questions and answers repeat their texts
# across turns (what the advisor's overlap detection could mistake for history already in
# the prompt); call ids are unique, as providers make them.

TURNS = st.lists(
    st.tuples(
        st.sampled_from(["again?", "hi"]),
        st.lists(st.integers(1, 3), max_size=3),  # tool rounds and the calls in each
        st.sampled_from(["ok", "hi"]),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=TURNS, inside=st.booleans(), loop_history=st.booleans(), streamed=st.booleans())
def test_memory_holds_each_turn_once_and_every_request_is_well_formed(
    turns: list[tuple[str, list[int], str]], inside: bool, loop_history: bool, streamed: bool
) -> None:
    if not inside and not loop_history:
        return  # outside the loop memory cannot stand in for the loop's history
    script: list[object] = []
    expected: list[Message] = []
    for question, rounds, answer in turns:
        expected.append(UserMessage(text=question))
        for width in rounds:
            number = len(script)
            ids = [f"c{number}-{n}" for n in range(width)]
            script.append([tool_call("weather", {}, id=i) for i in ids])
            if inside:
                expected.append(
                    AssistantMessage(
                        tool_calls=tuple(
                            ToolCall(id=i, name="weather", arguments="{}") for i in ids
                        )
                    )
                )
                expected.append(
                    ToolResponseMessage(
                        responses=tuple(
                            ToolResponse(id=i, name="weather", data="sunny") for i in ids
                        )
                    )
                )
        script.append(answer)
        expected.append(AssistantMessage(text=answer))
    memory = MessageWindowChatMemory(max_messages=1000)
    model = ScriptedModel(script)  # type: ignore[arg-type]
    client = ChatClient(
        model,
        tools=[weather_tool()],
        advisors=[MessageChatMemoryAdvisor(memory, inside_tool_loop=inside)],
        tool_calling_advisor=ToolCallingAdvisor(
            # the rounds repeat one call at will: not what the identical-call guard allows
            tool_calling_manager=ToolCallingManager(max_identical_calls=None),
            conversation_history=loop_history,
        ),
    )

    async def converse() -> None:
        for question, _, answer in turns:
            request = client.prompt(question).context({CONVERSATION_ID: "c"})
            if streamed:
                text = "".join([piece async for piece in request.stream().content()])
            else:
                text = (await request.acall()).content()
            assert text == answer

    asyncio.run(converse())
    assert memory.get("c") == expected
    for sent in model.requests:
        messages = list(sent.messages)
        assert tool_pairing_problems(messages) == []
        ids = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
        assert len(ids) == len(set(ids))
