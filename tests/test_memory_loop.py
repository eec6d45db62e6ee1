"""Chat memory with the whole client loop: tool rounds, outside and inside the loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from _loop_tools import RecordingTool
from tooluse import Approve, RunState
from tooluse.advisors import ToolCallingAdvisor
from tooluse.client import ChatClient
from tooluse.memory import (
    CONVERSATION_ID,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    SqliteChatMemoryRepository,
)
from tooluse.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.testing import ScriptedModel, tool_call

WEATHER_CALL = ToolCall(id="w1", name="weather", arguments='{"city": "Paris"}')


def weather_turn() -> list[Message]:
    return [
        UserMessage(text="Weather in Paris?"),
        AssistantMessage(tool_calls=(WEATHER_CALL,)),
        ToolResponseMessage(responses=(ToolResponse(id="w1", name="weather", data="sunny"),)),
        AssistantMessage(text="Sunny in Paris."),
    ]


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
    assert memory.get("c") == (weather_turn()[:2] if inside else [])
    resumed = client.resume(RunState.from_json(paused.state.to_json()), {"w1": Approve()})
    assert resumed.content() == "Sunny in Paris."
    assert memory.get("c") == (
        weather_turn() if inside else [weather_turn()[0], weather_turn()[-1]]
    )
