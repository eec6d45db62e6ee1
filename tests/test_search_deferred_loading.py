"""Tool search with the provider's deferred loading (Anthropic ``defer_loading`` and
``tool_reference`` results): ToolSearchToolCallingAdvisor(defer_loading=True) over the real
loop, the real ``anthropic`` SDK and a local server speaking the Messages wire format."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from provider_models import ask, model_maker
from provider_payloads import (
    anthropic_block_start,
    anthropic_block_stop,
    anthropic_json_delta,
    anthropic_message,
    anthropic_message_delta,
    anthropic_message_start,
    anthropic_text_delta,
    responses_body,
    responses_call,
    responses_events,
    responses_message,
    responses_tool_search,
    stub_tool,
    text_block,
    tool_use_block,
)
from provider_server import (
    ProviderServer,
    Reply,
    anthropic_sse,
    openai_responses_sse,
    shared_server,
)
from tooluse import (
    Approve,
    AssistantMessage,
    ChatOptions,
    Prompt,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.calling import PendingToolCall
from tooluse.client import ChatClient, RunState
from tooluse.memory import (
    CONVERSATION_ID,
    InMemoryChatMemoryRepository,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
)
from tooluse.messages import DeferredTools
from tooluse.models import AnthropicChatModel, OpenAIResponsesChatModel, ProviderError
from tooluse.search import RegexToolIndex, ToolSearchToolCallingAdvisor
from tooluse.testing import ScriptedModel, tool_call
from tooluse.tools import tool

ran: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    ran.append(city)
    return f"sunny in {city}"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email to a contact."""
    return "sent"


@tool
def book_flight(destination: str) -> str:
    """Book a flight to a destination."""
    return "booked"


@tool(requires_approval=True)
def wire_money(account: str) -> str:
    """Wire money to an account."""
    return "wired"


TOOLS = [get_weather, send_email, book_flight]


@pytest.fixture
def server() -> ProviderServer:
    ran.clear()
    return shared_server()


@pytest.fixture
async def make_model(server: ProviderServer) -> AsyncIterator[Callable[..., AnthropicChatModel]]:
    async with model_maker(
        AnthropicChatModel, "claude-test", base_url=server.url, api_key="k", max_retries=0
    ) as make:
        yield make


def deferring_client(model: Any, **advisor_options: Any) -> ChatClient:
    advisor = ToolSearchToolCallingAdvisor(
        tool_index=RegexToolIndex(), defer_loading=True, **advisor_options
    )
    return ChatClient(model, tools=TOOLS, tool_calling_advisor=advisor)


def script_search_then_weather(server: ProviderServer, answer: str = "Sunny.") -> None:
    server.expect(
        Reply.json(
            anthropic_message(
                tool_use_block("toolu_s", "toolSearchTool", {"query": "weather"}),
                stop_reason="tool_use",
            )
        ),
        Reply.json(
            anthropic_message(
                tool_use_block("toolu_w", "get_weather", {"city": "Paris"}), stop_reason="tool_use"
            )
        ),
        Reply.json(anthropic_message(text_block(answer))),
    )


def tool_results(body: dict[str, Any]) -> dict[str, Any]:
    """Each tool_result's content in the request, by tool_use_id."""
    return {
        block["tool_use_id"]: block.get("content")
        for turn in body["messages"]
        if isinstance(turn["content"], list)
        for block in turn["content"]
        if block["type"] == "tool_result"
    }


async def test_every_call_sends_the_catalogue_deferred_and_a_search_result_loads_the_found_tool(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    script_search_then_weather(server)
    client = deferring_client(make_model())

    answer = (
        await client.prompt().user("weather in Paris?").context({CONVERSATION_ID: "c1"}).acall()
    )

    assert answer.content() == "Sunny." and ran == ["Paris"]
    bodies = [r.body for r in server.requests]
    assert len(bodies) == 3
    tools = bodies[0]["tools"]
    assert [(t["name"], t.get("defer_loading")) for t in tools] == [
        ("toolSearchTool", None),
        ("get_weather", True),
        ("send_email", True),
        ("book_flight", True),
    ]
    # The same tool list on every call of the turn: the prompt cache's prefix never changes.
    assert all(body["tools"] == tools for body in bodies)
    assert tool_results(bodies[1]) == {
        "toolu_s": [{"type": "tool_reference", "tool_name": "get_weather"}]
    }
    assert tool_results(bodies[2])["toolu_w"] == '"sunny in Paris"'


async def test_the_next_turn_replays_the_search_as_references_and_keeps_the_tool_list(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    # Inside the loop, memory replays the earlier turn's tool traffic, the search included.
    memory = MessageChatMemoryAdvisor(
        MessageWindowChatMemory(repository=InMemoryChatMemoryRepository()), inside_tool_loop=True
    )
    client = deferring_client(make_model())
    script_search_then_weather(server)
    context = {CONVERSATION_ID: "c1"}
    await client.prompt().user("weather in Paris?").advisors(memory).context(context).acall()
    server.expect(
        Reply.json(
            anthropic_message(
                tool_use_block("toolu_r", "get_weather", {"city": "Rome"}), stop_reason="tool_use"
            )
        ),
        Reply.json(anthropic_message(text_block("Sunny in Rome too."))),
    )

    answer = await client.prompt().user("and in Rome?").advisors(memory).context(context).acall()

    assert answer.content() == "Sunny in Rome too." and ran == ["Paris", "Rome"]
    first_turn, second_turn = server.requests[0].body, server.requests[3].body
    assert second_turn["tools"] == first_turn["tools"]
    assert tool_results(second_turn)["toolu_s"] == [
        {"type": "tool_reference", "tool_name": "get_weather"}
    ]


async def test_a_loop_sending_only_the_last_results_still_loads_through_the_memory(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    # conversation_history=False: the memory inside the loop replays the turn's search, so
    # the found tool stays loaded on the later calls (nothing is re-deferred).
    memory = MessageChatMemoryAdvisor(
        MessageWindowChatMemory(repository=InMemoryChatMemoryRepository()), inside_tool_loop=True
    )
    client = deferring_client(make_model(), conversation_history=False)
    script_search_then_weather(server)

    await client.prompt().user("weather?").advisors(memory).context({CONVERSATION_ID: "c"}).acall()

    bodies = [r.body for r in server.requests]
    assert all(body["tools"] == bodies[0]["tools"] for body in bodies)
    reference = [{"type": "tool_reference", "tool_name": "get_weather"}]
    assert tool_results(bodies[2]) == {"toolu_s": reference, "toolu_w": '"sunny in Paris"'}


async def test_a_streamed_turn_defers_the_same_way(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    usage = {"input_tokens": 5, "output_tokens": 0}
    search = tool_use_block("toolu_s", "toolSearchTool", {})
    server.expect(
        anthropic_sse(
            [
                anthropic_message_start(usage),
                anthropic_block_start(0, search),
                anthropic_json_delta(0, '{"query": "weather"}'),
                anthropic_block_stop(0),
                anthropic_message_delta("tool_use", 3),
            ]
        ),
        anthropic_sse(
            [
                anthropic_message_start(usage),
                anthropic_block_start(0, text_block("")),
                anthropic_text_delta(0, "Found it."),
                anthropic_block_stop(0),
                anthropic_message_delta("end_turn", 3),
            ]
        ),
    )
    client = deferring_client(make_model())

    stream = client.prompt().user("weather?").context({CONVERSATION_ID: "c1"}).stream()
    text = "".join([chunk async for chunk in stream.content()])

    assert text == "Found it."
    first, second = (r.body for r in server.requests)
    assert second["stream"] is True and second["tools"] == first["tools"]
    assert tool_results(second)["toolu_s"] == [
        {"type": "tool_reference", "tool_name": "get_weather"}
    ]


async def test_a_preselected_tool_is_loaded_from_the_start_and_the_rest_deferred(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    server.expect(Reply.json(anthropic_message(text_block("ok"))))
    client = deferring_client(make_model(), preselect=1)

    await client.prompt().user("send an email").context({CONVERSATION_ID: "c1"}).acall()

    tools = server.requests[0].body["tools"]
    assert [(t["name"], t.get("defer_loading")) for t in tools] == [
        ("toolSearchTool", None),
        ("send_email", None),
        ("get_weather", True),
        ("book_flight", True),
    ]


async def test_a_tool_that_ran_before_a_search_found_it_stays_loaded(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    # Preselected (loaded) and called in the first turn, found by a search in the second: it
    # stays loaded, so its earlier call never names a tool that only a later result loads
    # (OpenAI refuses such a call: "Missing namespace for function_call") and the tool list
    # does not change.
    memory = MessageChatMemoryAdvisor(
        MessageWindowChatMemory(repository=InMemoryChatMemoryRepository()), inside_tool_loop=True
    )
    client = deferring_client(make_model(), preselect=1)
    context = {CONVERSATION_ID: "c1"}
    server.expect(
        Reply.json(
            anthropic_message(
                tool_use_block("toolu_e", "send_email", {"to": "a", "body": "b"}),
                stop_reason="tool_use",
            )
        ),
        Reply.json(anthropic_message(text_block("Sent."))),
        Reply.json(
            anthropic_message(
                tool_use_block("toolu_s", "toolSearchTool", {"query": "email"}),
                stop_reason="tool_use",
            )
        ),
        Reply.json(anthropic_message(text_block("Found it."))),
        Reply.json(anthropic_message(text_block("Done."))),
    )
    for question in ("send an email", "which tool sends email?", "thanks"):
        await client.prompt().user(question).advisors(memory).context(context).acall()

    tools = [r.body["tools"] for r in server.requests]
    assert [(t["name"], t.get("defer_loading")) for t in tools[0]] == [
        ("toolSearchTool", None),
        ("send_email", None),
        ("get_weather", True),
        ("book_flight", True),
    ]
    assert all(later == tools[0] for later in tools)


def test_a_model_that_cannot_defer_gets_the_found_tools_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"query": "weather"}, id="s1"),
            tool_call("get_weather", {"city": "Paris"}, id="w1"),
            "It is sunny.",
            "Again.",
        ]
    )
    client = deferring_client(model)
    with caplog.at_level(logging.WARNING, logger="tooluse.search._advisor"):
        for _ in range(2):
            client.prompt().user("weather in Paris?").context({CONVERSATION_ID: "c1"}).call()

    offered = [[c.definition.name for c in p.options.tool_callbacks] for p in model.requests]
    assert offered[:3] == [
        ["toolSearchTool"],
        ["toolSearchTool", "get_weather"],
        ["toolSearchTool", "get_weather"],
    ]
    assert all(p.options.deferred_tools is None for p in model.requests)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "ScriptedModel cannot defer tools" in warnings[0]


def test_deferred_tools_given_to_a_model_that_cannot_load_them_is_an_error() -> None:
    client = ChatClient(ScriptedModel(["unused"]), tools=TOOLS)
    options = ChatOptions(deferred_tools=DeferredTools(["send_email"], ["get_weather"]))
    with pytest.raises(ValueError, match="ScriptedModel cannot defer tools"):
        client.prompt().user("hi").options(options).call()


def test_defer_loading_cannot_drop_earlier_rounds() -> None:
    with pytest.raises(ValueError, match="accumulate=False"):
        ToolSearchToolCallingAdvisor(defer_loading=True, accumulate=False)


def test_deferred_tools_needs_a_loader_that_is_not_deferred() -> None:
    with pytest.raises(ValueError, match="at least one loader"):
        DeferredTools(["a"], [])
    with pytest.raises(ValueError, match=r"cannot itself be deferred.*'search'"):
        DeferredTools(["a", "search"], ["search"])


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (ToolResponse("1", "search", '["a", "x", "b", "a"]'), ["a", "b"]),
        (ToolResponse("1", "search", '["a"]', is_error=True), []),
        (ToolResponse("1", "other", '["a"]'), []),
        (ToolResponse("1", "search", '{"a": 1}'), []),
        (ToolResponse("1", "search", "a, b"), []),
        (ToolResponse("1", "search", "[1, null]"), []),
    ],
)
def test_a_result_references_the_deferred_tools_a_loader_names(
    response: ToolResponse, expected: list[str]
) -> None:
    assert DeferredTools(["a", "b"], ["search"]).referenced(response) == expected


async def test_the_adapter_refuses_a_request_whose_tools_are_all_deferred(
    make_model: Callable[..., AnthropicChatModel],
) -> None:
    prompt = ask(
        tool_callbacks=(stub_tool("a"), stub_tool("b")),
        deferred_tools=DeferredTools(["a", "b"], ["search"]),
    )
    with pytest.raises(ValueError, match="every tool of the request is deferred"):
        await make_model().acall(prompt)


async def test_a_reference_to_a_tool_the_request_does_not_offer_is_sent_as_text(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    server.expect(Reply.json(anthropic_message(text_block("ok"))))
    search = ToolResponseMessage([ToolResponse("toolu_s", "search", '["gone"]')])
    prompt = Prompt(
        [UserMessage("hi"), AssistantMessage(tool_calls=[ToolCall("toolu_s", "search")]), search],
        ChatOptions(
            tool_callbacks=(stub_tool("search"), stub_tool("a")),
            deferred_tools=DeferredTools(["a", "gone"], ["search"]),
        ),
    )

    await make_model().acall(prompt)

    assert tool_results(server.requests[0].body) == {"toolu_s": '["gone"]'}


async def test_deferred_tools_set_by_hand_survive_a_pause_stored_as_json(
    server: ProviderServer, make_model: Callable[..., AnthropicChatModel]
) -> None:
    server.expect(
        Reply.json(
            anthropic_message(
                tool_use_block("toolu_w", "wire_money", {"account": "x"}), stop_reason="tool_use"
            )
        ),
        Reply.json(anthropic_message(text_block("Wired."))),
    )
    deferred = DeferredTools(["wire_money", "book_flight"], ["toolSearchTool"])
    client = ChatClient(
        make_model(), tools=[get_weather, wire_money, book_flight], options=ChatOptions()
    )
    paused = await client.prompt().user("wire it").options(deferred_tools=deferred).acall()
    assert paused.state is not None

    state = RunState.from_json(paused.state.to_json())
    answer = await client.aresume(state, {"toolu_w": Approve()})

    assert answer.content() == "Wired."
    first, resumed = (r.body for r in server.requests)
    assert resumed["tools"] == first["tools"]
    assert [t.get("defer_loading") for t in resumed["tools"]] == [None, True, True]


@pytest.mark.parametrize(
    "stored",
    [["wire_money"], {"names": ["wire_money"]}, {"names": [1], "loaders": ["toolSearchTool"]}],
)
def test_a_run_state_with_broken_deferred_tools_is_refused(stored: object) -> None:
    state = RunState(
        messages=(UserMessage(text="wire it"),),
        history=(),
        pending_tool_calls=(PendingToolCall("toolu_w", "wire_money", "{}", "needs approval"),),
        options={"deferred_tools": stored},
    )
    with pytest.raises(ValueError, match="'deferred_tools' must be an object"):
        RunState.from_json(state.to_json())


# -- OpenAI's Responses API: client-executed tool search -----------------------------------------


@pytest.fixture
async def make_responses_model(
    server: ProviderServer,
) -> AsyncIterator[Callable[..., OpenAIResponsesChatModel]]:
    async with model_maker(
        OpenAIResponsesChatModel, "gpt-test", base_url=f"{server.url}/v1", api_key="k"
    ) as make:
        yield make


SEARCH_THEN_WEATHER = (
    responses_body(responses_tool_search("call_s", {"query": "weather"})),
    # As OpenAI's guide shows it: a loaded tool lives in a namespace named after it.
    responses_body(
        responses_call("call_w", "get_weather", '{"city": "Paris"}', namespace="get_weather")
    ),
    responses_body(responses_message("Sunny.")),
)


def items_of(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [item for item in body["input"] if item.get("type") == kind]


def check_responses_search_round_trip(server: ProviderServer) -> None:
    bodies = [r.body for r in server.requests]
    assert len(bodies) == 3
    (search_tool,) = bodies[0]["tools"]  # the deferred tools are not in the request
    assert search_tool["type"] == "tool_search" and search_tool["execution"] == "client"
    assert "query" in search_tool["parameters"]["properties"]
    assert all(body["tools"] == bodies[0]["tools"] for body in bodies)
    assert items_of(bodies[1], "tool_search_call") == [
        {
            "type": "tool_search_call",
            "call_id": "call_s",
            "execution": "client",
            "status": "completed",
            "arguments": {"query": "weather"},
        }
    ]
    (output,) = items_of(bodies[1], "tool_search_output")
    assert output["call_id"] == "call_s" and output["execution"] == "client"
    (loaded,) = output["tools"]
    assert loaded["type"] == "function" and loaded["name"] == "get_weather"
    assert loaded["defer_loading"] is True and "city" in loaded["parameters"]["properties"]
    # Sent back with its namespace: without it the API refuses the request ("Missing
    # namespace for function_call 'get_weather'").
    (call,) = items_of(bodies[2], "function_call")
    assert call["name"] == "get_weather" and call["namespace"] == "get_weather"
    (result,) = items_of(bodies[2], "function_call_output")
    assert result == {
        "type": "function_call_output",
        "call_id": "call_w",
        "output": '"sunny in Paris"',
    }


async def test_responses_search_is_a_client_tool_search_that_loads_the_found_tool(
    server: ProviderServer, make_responses_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    server.expect(*(Reply.json(body) for body in SEARCH_THEN_WEATHER))
    client = deferring_client(make_responses_model())

    answer = await client.prompt().user("weather in Paris?").context({CONVERSATION_ID: "c"}).acall()

    assert answer.content() == "Sunny." and ran == ["Paris"]
    check_responses_search_round_trip(server)


async def test_a_streamed_responses_search_loads_the_found_tool_the_same_way(
    server: ProviderServer, make_responses_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    server.expect(*(openai_responses_sse(responses_events(b)) for b in SEARCH_THEN_WEATHER))
    client = deferring_client(make_responses_model())

    stream = client.prompt().user("weather in Paris?").context({CONVERSATION_ID: "c"}).stream()
    text = "".join([piece async for piece in stream.content()])

    assert text == "Sunny." and ran == ["Paris"]
    check_responses_search_round_trip(server)


async def test_the_responses_api_takes_one_loader(
    make_responses_model: Callable[..., OpenAIResponsesChatModel],
) -> None:
    prompt = ask(
        tool_callbacks=(stub_tool("a"), stub_tool("b"), stub_tool("c")),
        deferred_tools=DeferredTools(["c"], ["a", "b"]),
    )
    with pytest.raises(ValueError, match="exactly one of its loaders"):
        await make_responses_model().acall(prompt)


async def test_a_tool_search_call_the_request_did_not_ask_for_is_an_error(
    server: ProviderServer, make_responses_model: Callable[..., OpenAIResponsesChatModel]
) -> None:
    server.expect(Reply.json(responses_body(responses_tool_search("call_s", {"query": "x"}))))
    with pytest.raises(ProviderError, match="without a client tool_search tool"):
        await make_responses_model().acall(ask())
