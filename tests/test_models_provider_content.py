"""An Anthropic turn that searched the web (a server tool) and then called a client tool goes
back whole: every block as the API sent it, in its order, through the loop, a stream, chat
memory stored in SQLite and the memory's repair. Other providers get the message's fields.

Anthropic wants an assistant turn back unchanged in a tool loop: signed thinking blocks as
they came, and the server tool's call and results (``server_tool_use``,
``web_search_tool_result``) and the citations that point into them (``encrypted_index``), so
the model keeps what it found. The message's fields (text, tool calls, reasoning) cannot hold
those, nor the order; :class:`~tooluse.messages.ProviderContent` does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from provider_models import all_providers, ask, collect
from provider_payloads import (
    CITED_TEXT,
    DOCUMENT_CITATION,
    FETCH_CALL,
    FETCH_CITED_TEXT,
    FETCH_RESULT,
    SEARCH_CALL,
    SEARCH_RESULT,
    anthropic_message,
    anthropic_streamed,
    openai_completion,
    text_block,
    tool_use_block,
)
from provider_server import ProviderServer, Reply, anthropic_sse, shared_server
from tooluse import (
    Approve,
    AssistantMessage,
    ProviderContent,
    Reasoning,
    RunState,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.client import ChatClient
from tooluse.memory import (
    CONVERSATION_ID,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    SqliteChatMemoryRepository,
)
from tooluse.streaming import merge_chunks
from tooluse.tools import tool


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}"


@tool(name="get_weather", requires_approval=True)
def get_weather_once_approved(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}"


# Thinking, a sentence, a web search, more thinking (interleaved), a cited sentence, then a call
# of a client tool: the order the API sends them in, which is the order they must go back in.
TURN: list[dict[str, Any]] = [
    {"type": "thinking", "thinking": "Search first.", "signature": "sig-1"},
    text_block("Let me search. "),
    SEARCH_CALL,
    SEARCH_RESULT,
    {"type": "thinking", "thinking": "Now the forecast.", "signature": "sig-2"},
    CITED_TEXT,
    tool_use_block("toolu_1", "get_weather", {"city": "Paris"}),
]
CALL = ToolCall(id="toolu_1", name="get_weather", arguments='{"city": "Paris"}')
TURN_MESSAGE = AssistantMessage(
    text="Let me search. It is sunny.",
    tool_calls=(CALL,),
    reasoning=(
        Reasoning(text="Search first.", signature="sig-1"),
        Reasoning(text="Now the forecast.", signature="sig-2"),
    ),
    provider_content=ProviderContent(provider="anthropic", blocks=TURN),
)
SENT_BACK = {"role": "assistant", "content": TURN}


@pytest.fixture
def server() -> ProviderServer:
    return shared_server()


@pytest.fixture
async def models(server: ProviderServer) -> AsyncIterator[dict[str, Callable[..., Any]]]:
    async with all_providers(server.url) as models:
        yield models


def answered(text: str = "Sunny in Paris.") -> Reply:
    return Reply.json(anthropic_message(text_block(text)))


# -- the turn, as the API sent it, in the next request -------------------------------------------


async def test_the_loop_sends_the_turn_back_block_for_block_in_its_order(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(Reply.json(anthropic_message(*TURN, stop_reason="tool_use")), answered())
    client = ChatClient(models["anthropic"](), tools=[get_weather])
    response = await client.prompt("Weather in Paris?").acall()

    assert response.content() == "Sunny in Paris."
    _, assistant, results = server.requests[1].body["messages"]
    assert assistant == SENT_BACK
    assert results["content"][0]["tool_use_id"] == "toolu_1"


async def test_a_streamed_turn_goes_back_the_same(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    server.expect(
        anthropic_sse(anthropic_streamed(*TURN, stop_reason="tool_use")),
        anthropic_sse(anthropic_streamed(text_block("Sunny in Paris."))),
    )
    client = ChatClient(models["anthropic"](), tools=[get_weather])
    text = [piece async for piece in client.prompt("Weather in Paris?").stream().content()]

    assert "".join(text) == "Let me search. It is sunny.Sunny in Paris."
    assert server.requests[1].body["messages"][1] == SENT_BACK


# A web fetch's text cites the fetched document by character range. The response's citation
# carries ``file_id`` (the Files API document cited, null here); the request's citation types
# have no such field and the API refuses it back ("Extra inputs are not permitted"), so it is
# the one field of a kept turn that does not go back.
FETCH_TURN = [
    FETCH_CALL,
    FETCH_RESULT,
    FETCH_CITED_TEXT,
    tool_use_block("toolu_1", "get_weather", {"city": "Paris"}),
]
FETCH_TURN_SENT = [
    FETCH_CALL,
    FETCH_RESULT,
    {
        **FETCH_CITED_TEXT,
        "citations": [{k: v for k, v in DOCUMENT_CITATION.items() if k != "file_id"}],
    },
    FETCH_TURN[-1],
]


@pytest.mark.parametrize("streamed", [False, True], ids=["call", "stream"])
async def test_a_document_citation_goes_back_without_its_file_id(
    server: ProviderServer, models: dict[str, Callable[..., Any]], streamed: bool
) -> None:
    first = (
        anthropic_sse(anthropic_streamed(*FETCH_TURN, stop_reason="tool_use"))
        if streamed
        else Reply.json(anthropic_message(*FETCH_TURN, stop_reason="tool_use"))
    )
    server.expect(
        first,
        anthropic_sse(anthropic_streamed(text_block("Sunny in Paris.")))
        if streamed
        else answered(),
    )
    client = ChatClient(models["anthropic"](), tools=[get_weather])
    prompt = client.prompt("Weather in Paris?")
    if streamed:
        [chunk async for chunk in prompt.stream()]
    else:
        await prompt.acall()

    assert server.requests[1].body["messages"][1] == {
        "role": "assistant",
        "content": FETCH_TURN_SENT,
    }


async def test_the_message_holds_the_fields_and_the_blocks_in_each_way_of_calling(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    model = models["anthropic"]()
    server.expect(
        Reply.json(anthropic_message(*TURN, stop_reason="tool_use")),
        Reply.json(anthropic_message(*TURN, stop_reason="tool_use")),
        anthropic_sse(anthropic_streamed(*TURN, stop_reason="tool_use")),
    )
    called = await asyncio.to_thread(model.call, ask())  # the blocking client's path
    awaited = await model.acall(ask())
    streamed = merge_chunks(await collect(model, ask()))

    for response in (called, awaited, streamed):
        assert response.generations[0].message == TURN_MESSAGE


async def test_an_empty_text_block_is_not_sent_back(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    """A stream may open a text block that no delta fills; the API rejects empty text."""
    server.expect(
        anthropic_sse(anthropic_streamed(text_block(""), *TURN[2:], stop_reason="tool_use")),
        answered(),
    )
    client = ChatClient(models["anthropic"](), tools=[get_weather])
    [chunk async for chunk in client.prompt("Weather in Paris?").stream()]

    assert server.requests[1].body["messages"][1]["content"] == TURN[2:]


async def test_a_streamed_turn_paused_for_approval_keeps_it_once_and_resumes_with_it(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    """The caller's chunks hold the turn's blocks once (the pause's closing chunk does not
    repeat them), and the run state, through JSON, sends them back on resuming."""
    server.expect(anthropic_sse(anthropic_streamed(*TURN, stop_reason="tool_use")), answered())
    client = ChatClient(models["anthropic"](), tools=[get_weather_once_approved])
    stream = client.prompt("Weather in Paris?").stream()
    chunks = [chunk async for chunk in stream]

    assert merge_chunks(chunks).generations[0].message.provider_content == (
        TURN_MESSAGE.provider_content
    )
    assert stream.state is not None
    state = RunState.from_json(stream.state.to_json())
    await client.aresume(state, {"toolu_1": Approve()})
    assert server.requests[1].body["messages"][1] == SENT_BACK


@pytest.mark.parametrize("way", ["acall", "stream"])
async def test_a_turn_its_fields_give_back_exactly_has_no_provider_content(
    server: ProviderServer, models: dict[str, Callable[..., Any]], way: str
) -> None:
    """Most turns: thinking first, then text, then tool calls, nothing else. They are stored
    without a second copy of themselves."""
    plain = [TURN[0], text_block("Checking."), TURN[-1]]
    if way == "acall":
        server.expect(Reply.json(anthropic_message(*plain, stop_reason="tool_use")))
        response = await models["anthropic"]().acall(ask())
    else:
        server.expect(anthropic_sse(anthropic_streamed(*plain, stop_reason="tool_use")))
        response = merge_chunks(await collect(models["anthropic"](), ask()))

    message = response.generations[0].message
    assert message.provider_content is None
    assert (message.text, message.tool_calls) == ("Checking.", (CALL,))


# -- stored, repaired, changed, and sent elsewhere ----------------------------------------------


async def test_the_turn_stored_in_sqlite_memory_goes_back_whole_in_the_next_question(
    server: ProviderServer, models: dict[str, Callable[..., Any]], tmp_path: Path
) -> None:
    server.expect(
        Reply.json(anthropic_message(*TURN, stop_reason="tool_use")), answered(), answered("Bye.")
    )
    with SqliteChatMemoryRepository(tmp_path / "memory.db") as repository:
        memory = MessageChatMemoryAdvisor(
            MessageWindowChatMemory(repository=repository), inside_tool_loop=True
        )
        client = ChatClient(models["anthropic"](), tools=[get_weather], advisors=[memory])
        for question in ("Weather in Paris?", "Thanks!"):
            await client.prompt(question).context({CONVERSATION_ID: "c"}).acall()

    assert server.requests[2].body["messages"][1] == SENT_BACK
    with SqliteChatMemoryRepository(tmp_path / "memory.db") as reopened:
        assert reopened.find_by_conversation_id("c")[1] == TURN_MESSAGE


@pytest.mark.parametrize(
    "last_round",
    # A cited answer brings provider content of its own; a plain one does not (its fields
    # give its blocks), so its text follows the first round's blocks.
    [CITED_TEXT, text_block(" Sunny in Paris.")],
    ids=["cited", "plain"],
)
async def test_a_streamed_loop_stored_by_memory_outside_it_goes_back_without_its_ran_calls(
    server: ProviderServer,
    models: dict[str, Callable[..., Any]],
    caplog: pytest.LogCaptureFixture,
    last_round: dict[str, Any],
) -> None:
    # Memory outside the loop stores the streamed answer: every round's text and blocks, the
    # calls that ran inside the loop left out. It goes back as those blocks, citations kept.
    server.expect(
        anthropic_sse(anthropic_streamed(*TURN, stop_reason="tool_use")),
        anthropic_sse(anthropic_streamed(last_round)),
        answered("Bye."),
    )
    memory = MessageChatMemoryAdvisor(MessageWindowChatMemory())
    client = ChatClient(models["anthropic"](), tools=[get_weather], advisors=[memory])
    context = {CONVERSATION_ID: "c"}
    stream = client.prompt("Weather in Paris?").context(context).stream()
    [piece async for piece in stream.content()]
    with caplog.at_level(logging.WARNING, logger="tooluse.models._anthropic"):
        await client.prompt("Thanks!").context(context).acall()

    _, answer, _ = server.requests[2].body["messages"]
    assert answer == {"role": "assistant", "content": [*TURN[:-1], last_round]}
    assert caplog.records == []


async def test_a_call_the_memory_repair_answers_goes_back_with_the_whole_turn(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    """A conversation cut before the tool returned: the repair answers the call with an error
    result, and the turn still goes back as it came."""
    server.expect(answered())
    history = [UserMessage(text="Weather in Paris?"), TURN_MESSAGE, UserMessage(text="Well?")]
    await ChatClient(models["anthropic"]()).prompt().messages(history).acall()

    _, assistant, user = server.requests[0].body["messages"]
    assert assistant == SENT_BACK
    assert [block["type"] for block in user["content"]] == ["tool_result", "text"]


async def test_tool_use_blocks_carry_the_calls_as_the_message_has_them(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    """A call given another id (the repair does so to calls sharing one) goes back under it;
    the blocks around it are unchanged."""
    renamed = ToolCall(id="toolu_1_2", name="get_weather", arguments='{"city": "Lyon"}')
    message = TURN_MESSAGE.model_copy(update={"tool_calls": (renamed,)})
    server.expect(answered())
    history = [
        UserMessage(text="Weather in Paris?"),
        message,
        ToolResponseMessage(responses=(ToolResponse("toolu_1_2", "get_weather", "Sunny"),)),
    ]
    await models["anthropic"]().acall(ask().replace(messages=history))

    sent = server.requests[0].body["messages"][1]["content"]
    assert sent[:-1] == TURN[:-1]
    assert sent[-1] == tool_use_block("toolu_1_2", "get_weather", {"city": "Lyon"})


async def test_a_message_whose_text_was_changed_is_sent_from_its_fields_with_a_warning(
    server: ProviderServer,
    models: dict[str, Callable[..., Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    edited = TURN_MESSAGE.model_copy(update={"text": "Edited."})
    server.expect(answered())
    history = [
        UserMessage(text="Weather in Paris?"),
        edited,
        ToolResponseMessage(responses=(ToolResponse("toolu_1", "get_weather", "Sunny"),)),
    ]
    with caplog.at_level(logging.WARNING, logger="tooluse.models"):
        await models["anthropic"]().acall(ask().replace(messages=history))

    assert server.requests[0].body["messages"][1]["content"] == [
        TURN[0],
        TURN[4],
        text_block("Edited."),
        TURN[-1],
    ]
    assert "differ from those of its provider_content" in caplog.text


async def test_openai_gets_the_fields_of_a_turn_anthropic_made(
    server: ProviderServer, models: dict[str, Callable[..., Any]]
) -> None:
    """After a switch of models: the Anthropic blocks mean nothing to an OpenAI-compatible
    server (and OpenAI rejects unknown message fields)."""
    server.expect(Reply.json(openai_completion("Sunny in Paris.")))
    history = [
        UserMessage(text="Weather in Paris?"),
        TURN_MESSAGE,
        ToolResponseMessage(responses=(ToolResponse("toolu_1", "get_weather", "Sunny"),)),
    ]
    model = models["openai"](send_reasoning=False)  # reasoning has its own tests
    await model.acall(ask().replace(messages=history))

    assert server.requests[0].body["messages"][1] == {
        "role": "assistant",
        "content": "Let me search. It is sunny.",
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
