"""ChatClient: the request builder, tools and contexts, auto-registration of the tool advisor,
manual tool execution, structured output and concurrency."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from typing import Any, ClassVar

import pydantic
import pytest

from _loop_tools import RecordingTool
from tooluse import (
    AssistantMessage,
    ChatClient,
    ChatOptions,
    Prompt,
    SystemMessage,
    ToolCallback,
    ToolCallingAdvisor,
    ToolCallingManager,
    ToolContext,
    UserMessage,
    tool,
    tool_callbacks,
)
from tooluse.advisors import AdvisorChain, ChatClientRequest, ChatClientResponse, ToolAdvisor
from tooluse.client import (
    AUTO_REGISTER_TOOL_ADVISOR,
    EntityValidationError,
    ToolCallsNotExecuted,
)
from tooluse.testing import FunctionModel, ScriptedModel, TestModel, assert_tool_called, tool_call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def whoami(context: ToolContext) -> str:
    """The user this request runs for."""
    return str(context["user"])


def offered(prompt: Prompt) -> list[str]:
    return [callback.definition.name for callback in prompt.options.tool_callbacks]


def test_the_builder_orders_system_messages_and_user_text() -> None:
    model = ScriptedModel(["ok", "ok", "ok"])
    client = ChatClient(model, system="Default rules.")
    earlier = [UserMessage(text="before"), AssistantMessage(text="reply")]
    client.prompt().messages(earlier).user("now").call()
    client.prompt("again").system("Other rules.").call()
    client.prompt("and the default again").call()
    assert model.requests[0].messages == (
        SystemMessage(text="Default rules."),
        *earlier,
        UserMessage(text="now"),
    )
    assert model.requests[1].messages == (
        SystemMessage(text="Other rules."),
        UserMessage(text="again"),
    )
    assert model.requests[2].messages[0] == SystemMessage(text="Default rules.")


def test_a_request_needs_messages_and_takes_only_messages() -> None:
    client = ChatClient(ScriptedModel([]))
    with pytest.raises(ValueError, match="no messages"):
        client.prompt().call()
    with pytest.raises(TypeError, match="takes Message objects"):
        client.prompt().messages(["plain text"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="needs a chat model"):
        ChatClient("gpt")  # type: ignore[arg-type]


def test_request_tools_replace_the_defaults_and_add_tools_merges() -> None:
    model = ScriptedModel(["a", "b", "c"])
    client = ChatClient(model, tools=[add])
    client.prompt("x").call()
    client.prompt("x").tools(whoami).call()
    client.prompt("x").add_tools(whoami).call()
    assert [offered(p) for p in model.requests] == [["add"], ["whoami"], ["add", "whoami"]]


def test_tools_may_be_one_source_a_collection_or_a_generator() -> None:
    cases: list[tuple[object, list[str]]] = [
        (add, ["add"]),
        ([add, [whoami]], ["add", "whoami"]),
        ((t for t in (whoami, add)), ["whoami", "add"]),
    ]
    for tools, expected in cases:
        model = ScriptedModel(["ok"])
        ChatClient(model, tools=tools).prompt("x").call()
        assert offered(model.requests[0]) == expected


def test_duplicate_tool_names_name_both_sources() -> None:
    client = ChatClient(ScriptedModel([]), tools=[add])
    other_add = RecordingTool("add")
    with pytest.raises(
        ValueError,
        match=r"same name \(add\).*FunctionToolCallback 'add'.*"
        r"RecordingTool 'add'",
    ):
        client.prompt("x").add_tools(other_add)
    with pytest.raises(ValueError, match="same name"):
        ChatClient(ScriptedModel([]), tools=[add, other_add])


def test_providers_are_asked_for_their_tools_on_every_request() -> None:
    class Provider:
        def __init__(self) -> None:
            self.tools: list[ToolCallback] = [RecordingTool("one")]

        def tool_callbacks(self) -> Sequence[ToolCallback]:
            return self.tools

    provider = Provider()
    model = ScriptedModel(["a", "b"])
    client = ChatClient(model, tools=[add, provider])
    client.prompt("x").call()
    provider.tools = [RecordingTool("one"), RecordingTool("two")]
    client.prompt("x").call()
    assert [offered(p) for p in model.requests] == [["add", "one"], ["add", "one", "two"]]
    provider.tools = [RecordingTool("add")]
    with pytest.raises(ValueError, match=r"same name \(add\).*provider Provider"):
        client.prompt("x").call()


def test_request_tool_context_overrides_the_defaults() -> None:
    seen: list[dict[str, Any]] = []
    probe = RecordingTool("probe", lambda a, c: seen.append(dict(c or {})) or "ok")
    model = ScriptedModel([tool_call("probe"), "done"])
    client = ChatClient(model, tools=[probe], tool_context={"user": "default", "tenant": "t"})
    client.prompt("x").tool_context({"user": "ann"}).call()
    assert seen == [{"user": "ann", "tenant": "t"}]
    assert isinstance(model.requests[0].options.tool_context, ToolContext)


def test_context_and_options_reach_the_advisors_and_the_model() -> None:
    class ContextReader:
        name, order = "reader", 0
        seen: ClassVar[list[Any]] = []

        async def advise_call(
            self, request: ChatClientRequest, chain: AdvisorChain
        ) -> ChatClientResponse:
            self.seen.append((request.context.get("k"), request.context.get("base")))
            return await chain.next_call(request)

    model = ScriptedModel(["a"])
    client = ChatClient(
        model, context={"base": 1, "k": "default"}, options=ChatOptions(temperature=0.1)
    )
    client.prompt("x").context({"k": "request"}).advisors(ContextReader()).options(
        max_tokens=50, extra={"seed": 7}
    ).call()
    assert ContextReader.seen == [("request", 1)]
    options = model.requests[0].options
    assert (options.temperature, options.max_tokens, dict(options.extra)) == (0.1, 50, {"seed": 7})
    with pytest.raises(ValueError, match="not inside ChatOptions"):
        client.prompt("x").options(ChatOptions(tool_callbacks=(RecordingTool("t"),)))
    with pytest.raises(TypeError, match="is not an advisor"):
        client.prompt("x").advisors(object())  # type: ignore[arg-type]


def test_options_given_in_several_calls_add_up() -> None:
    # a second options(ChatOptions(...)) wiped the first one's settings with its unset
    # (None) fields, and a second extra= replaced the first instead of merging
    model = ScriptedModel(["a", "b"])
    client = ChatClient(model, options=ChatOptions(temperature=0.1, extra={"seed": 1}))
    client.prompt("x").options(ChatOptions(temperature=0.5, extra={"a": 1})).options(
        ChatOptions(max_tokens=5), extra={"b": 2}
    ).call()
    options = model.requests[0].options
    assert (options.temperature, options.max_tokens) == (0.5, 5)
    assert dict(options.extra) == {"seed": 1, "a": 1, "b": 2}
    client.prompt("x").options(top_p=0.9).options(ChatOptions(), top_p=None).call()
    assert model.requests[1].options.top_p == 0.9  # None sets nothing
    assert model.requests[1].options.temperature == 0.1


class Tracking(ToolCallingAdvisor):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        self.calls += 1
        return await super().advise_call(request, chain)


def test_the_configured_tool_advisor_is_added_unless_one_is_present() -> None:
    configured, given = Tracking(), Tracking()
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3", "plain", "again"])
    client = ChatClient(model, tools=[add], tool_calling_advisor=configured)
    assert client.prompt("x").call().content() == "3"
    client.prompt("x").advisors(given).call()
    assert (configured.calls, given.calls) == (1, 1)
    # Added even without tools, so tools that other advisors inject still run.
    ChatClient(ScriptedModel(["ok"]), tool_calling_advisor=configured).prompt("x").call()
    assert configured.calls == 2


def test_two_tool_advisors_are_an_error_listing_them() -> None:
    client = ChatClient(ScriptedModel([]), advisors=[ToolCallingAdvisor(order=5)])
    with pytest.raises(
        ValueError,
        match=r"found 2: \[Tool Calling Advisor \(order=5\), "
        r"Tool Calling Advisor \(order=7\)\]",
    ):
        client.prompt("x").advisors(ToolCallingAdvisor(order=7)).call()


@pytest.mark.parametrize("switched_off", ["request", "client"])
def test_with_auto_registration_off_the_caller_gets_the_tool_calls(switched_off: str) -> None:
    model = ScriptedModel([tool_call("add", {"a": 2, "b": 3}, id="c1")])
    client = ChatClient(model, tools=[add], auto_register_tool_advisor=switched_off != "client")
    spec = client.prompt("2+3?")
    if switched_off == "request":
        spec.context({AUTO_REGISTER_TOOL_ADVISOR: False})
    response = spec.call()
    assert response.chat_response().has_tool_calls()
    with pytest.raises(ToolCallsNotExecuted, match=r"asked for tool calls \(add\)"):
        response.content()


async def test_a_tool_advisor_that_does_not_stream_leaves_stream_tool_calls_unexecuted() -> None:
    class CallOnlyLoop(ToolAdvisor):
        name, order = "call-only loop", 0

        async def advise_call(
            self, request: ChatClientRequest, chain: AdvisorChain
        ) -> ChatClientResponse:
            return await chain.next_call(request)

    model = ScriptedModel([tool_call("add", {"a": 1, "b": 1})])
    stream = ChatClient(model, tools=[add], advisors=[CallOnlyLoop()]).prompt("x").stream()
    with pytest.raises(ToolCallsNotExecuted):
        _ = [text async for text in stream.content()]


async def test_a_streams_merged_response_is_one_response_once_it_ended() -> None:
    # As a call's: content() and its caller ask for it, and get the same merged chunks.
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 1}, id="c1"), "2"])
    stream = ChatClient(model, tools=[add]).prompt("1+1?").stream()
    with pytest.raises(RuntimeError, match="has not been consumed to its end"):
        stream.chat_response()
    assert [text async for text in stream.content()] == ["2"]
    merged = stream.chat_response()
    assert merged.text == "2" and merged is stream.chat_response()


def test_a_self_managed_loop_with_the_manager_keeps_ids_aligned() -> None:
    """The documented pattern for auto-registration off: run each round with
    ToolCallingManager and send its conversation_history back."""
    model = ScriptedModel([tool_call("add", {"a": 2, "b": 3}, id="c1"), "5"])
    client = ChatClient(model, tools=[add], auto_register_tool_advisor=False)
    manager = ToolCallingManager()
    messages: list[Any] = [UserMessage(text="2+3?")]
    response = client.prompt().messages(messages).call()
    while response.chat_response().has_tool_calls():
        options = ChatOptions(tool_callbacks=tuple(tool_callbacks(add)))
        result = manager.execute_tool_calls(Prompt(messages, options), response.chat_response())
        messages = list(result.conversation_history)
        response = client.prompt().messages(messages).call()
    assert response.content() == "5"
    results = model.requests[1].messages[-1]
    assert [(r.id, r.data) for r in results.responses] == [("c1", "5")]  # type: ignore[union-attr]


def test_auto_registration_flag_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="must be True or False"):
        ChatClient(ScriptedModel([])).prompt("x").context({AUTO_REGISTER_TOOL_ADVISOR: "no"}).call()


async def test_sync_call_inside_a_running_loop_points_to_acall() -> None:
    spec = ChatClient(ScriptedModel(["x"])).prompt("x")
    with pytest.raises(RuntimeError, match=r"cannot run inside a running event loop.*acall"):
        spec.call()


class City(pydantic.BaseModel):
    name: str
    population: int


def test_entity_reads_the_answer_and_a_response_format_adds_instructions() -> None:
    model = ScriptedModel(['```json\n{"name": "Oslo", "population": 700000}\n```'])
    response = ChatClient(model, system="Be exact.").prompt("Oslo?").response_format(City).call()
    assert response.entity() == City(name="Oslo", population=700000)
    system = model.requests[0].messages[0]
    assert isinstance(system, SystemMessage)
    assert system.text.startswith("Be exact.\n\nYour final answer must be only a JSON value")
    assert '"population"' in system.text


async def test_entity_gets_one_corrective_retry() -> None:
    model = ScriptedModel(['{"name": "Oslo"}', '{"name": "Oslo", "population": 700000}'])
    response = await ChatClient(model).prompt("Oslo?").acall()
    assert await response.aentity(City) == City(name="Oslo", population=700000)
    retry = model.requests[1].messages
    assert retry[1] == AssistantMessage(text='{"name": "Oslo"}')
    assert isinstance(retry[2], UserMessage)
    assert "population: Field required" in retry[2].text and "JSON Schema" in retry[2].text


async def test_the_corrective_retry_keeps_the_tool_results_and_runs_no_tool_again() -> None:
    lookup = RecordingTool("lookup", lambda a, c: '{"population": 700000}')
    model = ScriptedModel(
        [
            tool_call("lookup", {"city": "Oslo"}, id="c1"),
            '{"name": "Oslo"}',
            '{"name": "Oslo", "population": 700000}',
        ]
    )
    response = await ChatClient(model, system="Be exact.", tools=[lookup]).prompt("Oslo?").acall()
    assert await response.aentity(City) == City(name="Oslo", population=700000)
    assert len(lookup.calls) == 1 and len(model.requests) == 3
    retry = model.requests[2].messages
    assert [m.role for m in retry] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert retry[3].responses[0].data == '{"population": 700000}'  # type: ignore[union-attr]
    assert retry[4] == AssistantMessage(text='{"name": "Oslo"}')


def test_entity_fails_clearly_after_the_retry() -> None:
    model = ScriptedModel(["not json", "still not json"])
    response = ChatClient(model).prompt("Oslo?").call()
    with pytest.raises(EntityValidationError, match="after one corrective retry") as raised:
        response.entity(City)
    assert raised.value.text == "still not json" and len(raised.value.errors) == 2
    with pytest.raises(ValueError, match="entity\\(\\) needs a type"):
        response.entity()


def test_entity_of_a_list_type_and_of_a_dataclass() -> None:
    @dataclasses.dataclass
    class Point:
        x: int

    model = ScriptedModel(['[{"x": 1}, {"x": 2}]'])
    assert ChatClient(model).prompt("p").call().entity(list[Point]) == [Point(1), Point(2)]


async def test_fifty_concurrent_requests_never_mix_tool_contexts() -> None:
    seen: dict[str, str] = {}

    @tool
    async def whoami_slow(context: ToolContext) -> str:
        """The user, after a pause that lets the other requests interleave."""
        await asyncio.sleep(0.001)
        return str(context["user"])

    def respond(prompt: Prompt) -> Any:
        last = prompt.messages[-1]
        if isinstance(last, UserMessage):
            return tool_call("whoami_slow", id=f"call-{last.text}")
        result = last.responses[0]  # type: ignore[union-attr]
        return f"{prompt.messages[0].text}:{json.loads(result.data)}"  # type: ignore[union-attr]

    client = ChatClient(FunctionModel(respond), tools=[whoami_slow])

    async def one(index: int) -> None:
        response = (
            await client.prompt(f"user{index}").tool_context({"user": f"user{index}"}).acall()
        )
        seen[f"user{index}"] = response.content()

    await asyncio.gather(*(one(i) for i in range(50)))
    assert seen == {f"user{i}": f"user{i}:user{i}" for i in range(50)}


def test_test_model_drives_a_real_tool_end_to_end() -> None:
    model = TestModel()
    response = ChatClient(model, tools=[add]).prompt("add something").call()
    arguments = json.loads(assert_tool_called(model, "add", times=1)[0].arguments)
    assert json.loads(response.content()) == {"add": arguments["a"] + arguments["b"]}
    assert_tool_called(response, "add", arguments)
