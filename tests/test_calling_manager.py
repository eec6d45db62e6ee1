"""ToolCallingManager: one round of tool calls (SPEC section 3)."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from _calling_tools import FakeTool, prompt_with, tool_calls_response
from tooluse import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    Generation,
    Prompt,
    SystemMessage,
    ToolCall,
    ToolCallingManager,
    ToolContext,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.calling import (
    DelegatingToolCallbackResolver,
    StaticToolCallbackResolver,
    UnknownToolError,
)


async def test_no_tool_call_is_a_value_error() -> None:
    response = ChatResponse(generations=(Generation(message=AssistantMessage(text="hi")),))
    with pytest.raises(ValueError, match=r"^No tool call requested by the chat model$"):
        await ToolCallingManager().aexecute_tool_calls(prompt_with([]), response)
    with pytest.raises(ValueError, match="No tool call requested"):
        await ToolCallingManager().aexecute_tool_calls(prompt_with([]), ChatResponse())


async def test_history_is_prompt_plus_assistant_plus_one_response_message_in_call_order() -> None:
    a, b = FakeTool("a", lambda x: f"a{x}"), FakeTool("b", lambda x: f"b{x}")
    prompt = prompt_with([a, b], messages=[SystemMessage(text="sys"), UserMessage(text="q")])
    response = tool_calls_response(("b", '{"x": 1}'), ("a", '{"x": 2}'), ("b", '{"x": 3}'))

    result = await ToolCallingManager().aexecute_tool_calls(prompt, response)

    assistant = response.generations[0].message
    assert result.conversation_history[:3] == (*prompt.messages, assistant)
    assert len(result.conversation_history) == 4
    assert result.conversation_history[3] == ToolResponseMessage(
        responses=(
            ToolResponse(id="c0", name="b", data="b1"),
            ToolResponse(id="c1", name="a", data="a2"),
            ToolResponse(id="c2", name="b", data="b3"),
        )
    )
    assert result.return_direct is False
    assert result.pending_tool_calls == ()


async def test_only_the_first_generation_with_tool_calls_runs() -> None:
    a, b = FakeTool("a"), FakeTool("b")
    response = ChatResponse(
        generations=(
            Generation(message=AssistantMessage(text="thinking")),
            Generation(message=AssistantMessage(tool_calls=(ToolCall(id="1", name="a"),))),
            Generation(message=AssistantMessage(tool_calls=(ToolCall(id="2", name="b"),))),
        )
    )
    result = await ToolCallingManager().aexecute_tool_calls(prompt_with([a, b]), response)
    assert len(a.calls) == 1 and b.calls == []
    assert result.conversation_history[-2] == response.generations[1].message


async def test_every_call_gets_the_tool_context_of_the_options() -> None:
    a = FakeTool("a", lambda context: context["user"])
    prompt = prompt_with([a], context={"user": "42"})
    result = await ToolCallingManager().aexecute_tool_calls(
        prompt, tool_calls_response(("a", ""), ("a", "{}"))
    )
    contexts = [context for _, context in a.calls]
    assert contexts == [ToolContext({"user": "42"})] * 2
    assert all(isinstance(c, ToolContext) for c in contexts)
    assert [r.data for r in result.conversation_history[-1].responses] == ["42", "42"]

    b = FakeTool("b")
    await ToolCallingManager().aexecute_tool_calls(prompt_with([b]), tool_calls_response(("b", "")))
    assert b.calls[0][1] == ToolContext()


@pytest.mark.parametrize("arguments", ["", "   ", "null", " null\n"])
async def test_empty_or_null_arguments_become_an_empty_object(arguments: str) -> None:
    a = FakeTool("a")
    result = await ToolCallingManager().aexecute_tool_calls(
        prompt_with([a]), tool_calls_response(("a", arguments))
    )
    assert a.calls[0][0] == "{}"
    response = result.conversation_history[-1].responses[0]
    assert (response.data, response.is_error) == ("a ok", False)
    # the history keeps what the model sent
    assert result.conversation_history[-2].tool_calls[0].arguments == arguments


async def test_none_result_becomes_empty_text_and_other_types_are_a_bug() -> None:
    class NoneTool(FakeTool):
        async def acall(self, arguments: str, context: ToolContext | None = None) -> Any:
            return None

    class IntTool(FakeTool):
        async def acall(self, arguments: str, context: ToolContext | None = None) -> Any:
            return 3

    manager = ToolCallingManager()
    result = await manager.aexecute_tool_calls(
        prompt_with([NoneTool("n")]), tool_calls_response(("n", "{}"))
    )
    assert result.conversation_history[-1].responses[0] == ToolResponse(id="c0", name="n", data="")
    with pytest.raises(TypeError, match="Tool 'i' returned int; a ToolCallback must return str"):
        await manager.aexecute_tool_calls(
            prompt_with([IntTool("i")]), tool_calls_response(("i", ""))
        )


def test_resolve_tool_definitions_lists_the_attached_tools_in_order() -> None:
    tools = [FakeTool("b"), FakeTool("a")]
    definitions = ToolCallingManager().resolve_tool_definitions(ChatOptions(tool_callbacks=tools))
    assert [d.name for d in definitions] == ["b", "a"]
    assert ToolCallingManager().resolve_tool_definitions(ChatOptions()) == []


async def test_lookup_is_by_exact_name_and_the_first_duplicate_wins() -> None:
    first, second = FakeTool("t", lambda: "first"), FakeTool("t", lambda: "second")
    result = await ToolCallingManager().aexecute_tool_calls(
        prompt_with([first, second]), tool_calls_response(("t", ""), ("T", ""))
    )
    ok, wrong_case = result.conversation_history[-1].responses
    assert (ok.data, ok.is_error) == ("first", False)
    assert wrong_case.is_error and "Did you mean 't'?" in wrong_case.data
    assert second.calls == []


async def test_a_new_tool_list_is_never_served_from_the_previous_round() -> None:
    manager = ToolCallingManager()
    old, new = FakeTool("t", lambda: "old"), FakeTool("t", lambda: "new")
    first = await manager.aexecute_tool_calls(prompt_with([old]), tool_calls_response(("t", "")))
    second = await manager.aexecute_tool_calls(prompt_with([new]), tool_calls_response(("t", "")))
    assert first.conversation_history[-1].responses[0].data == "old"
    assert second.conversation_history[-1].responses[0].data == "new"


async def test_a_tool_list_changed_in_place_between_rounds_is_read_again() -> None:
    manager = ToolCallingManager()
    tools: list[FakeTool] = [FakeTool("t", lambda: "old")]
    prompt = Prompt([UserMessage(text="q")], ChatOptions(tool_callbacks=tools))  # type: ignore[arg-type]
    first = await manager.aexecute_tool_calls(prompt, tool_calls_response(("t", "")))
    tools[0] = FakeTool("t", lambda: "new")
    second = await manager.aexecute_tool_calls(prompt, tool_calls_response(("t", "")))
    assert [r.conversation_history[-1].responses[0].data for r in (first, second)] == [
        "old",
        "new",
    ]


async def test_unknown_tool_gets_an_error_naming_close_matches_and_the_round_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    weather, forecast = FakeTool("get_weather"), FakeTool("get_forecast")
    with caplog.at_level(logging.WARNING, "tooluse.calling"):
        result = await ToolCallingManager().aexecute_tool_calls(
            prompt_with([weather, forecast]),
            tool_calls_response(("get_wether", "{}"), ("get_forecast", "{}")),
        )
    unknown, known = result.conversation_history[-1].responses
    assert unknown == ToolResponse(
        id="c0",
        name="get_wether",
        data="Unknown tool 'get_wether': no tool of that name is available. "
        "Did you mean 'get_weather'?",
        is_error=True,
    )
    assert (known.data, known.is_error) == ("get_forecast ok", False)
    assert weather.calls == []  # never silently runs a different tool
    assert "unknown tool 'get_wether'" in caplog.text


async def test_unknown_tool_without_close_matches_lists_a_small_catalogue() -> None:
    manager = ToolCallingManager()
    result = await manager.aexecute_tool_calls(
        prompt_with([FakeTool("alpha"), FakeTool("beta")]), tool_calls_response(("zzz", ""))
    )
    assert result.conversation_history[-1].responses[0].data == (
        "Unknown tool 'zzz': no tool of that name is available. Available tools: alpha, beta."
    )
    many = [FakeTool(f"tool{i:02d}") for i in range(25)]
    result = await manager.aexecute_tool_calls(prompt_with(many), tool_calls_response(("zzz", "")))
    assert (
        result.conversation_history[-1]
        .responses[0]
        .data.endswith("Call only the tools you were given.")
    )
    result = await manager.aexecute_tool_calls(prompt_with([]), tool_calls_response(("zzz", "")))
    assert (
        result.conversation_history[-1]
        .responses[0]
        .data.endswith("No tools are available in this request.")
    )


async def test_unknown_tool_raise_fails_before_any_call_runs() -> None:
    a = FakeTool("a")
    with pytest.raises(UnknownToolError, match=r"^No ToolCallback found for tool name: nope$") as e:
        await ToolCallingManager(unknown_tool="raise").aexecute_tool_calls(
            prompt_with([a]), tool_calls_response(("a", ""), ("nope", ""))
        )
    assert e.value.tool_name == "nope"
    assert a.calls == []


async def test_resolver_is_consulted_only_with_fallback_enabled() -> None:
    hidden = FakeTool("hidden")
    resolver = StaticToolCallbackResolver([hidden])
    response = tool_calls_response(("hidden", ""))

    off = await ToolCallingManager(resolver=resolver).aexecute_tool_calls(prompt_with([]), response)
    assert off.conversation_history[-1].responses[0].is_error and hidden.calls == []

    on = ToolCallingManager(resolver=resolver, resolver_fallback=True)
    result = await on.aexecute_tool_calls(prompt_with([]), response)
    assert result.conversation_history[-1].responses[0].data == "hidden ok"
    blank = await on.aexecute_tool_calls(prompt_with([]), tool_calls_response((" ", "")))
    assert blank.conversation_history[-1].responses[0].is_error


def test_resolvers_static_last_wins_delegating_first_found_and_names_checked() -> None:
    # Spring: StaticToolCallbackResolver lets later duplicates overwrite; the delegating one
    # returns the first non-null answer; both reject blank names.
    early, late, other = FakeTool("t"), FakeTool("t"), FakeTool("o")
    static = StaticToolCallbackResolver([early, late])
    assert static.resolve("t") is late
    assert static.resolve("missing") is None
    chain = DelegatingToolCallbackResolver([StaticToolCallbackResolver([other]), static])
    assert chain.resolve("o") is other
    assert chain.resolve("t") is late
    assert chain.resolve("missing") is None
    for resolver in (static, chain):
        with pytest.raises(ValueError, match="tool_name cannot be empty"):
            resolver.resolve("  ")


async def test_calls_of_a_round_run_concurrently_with_results_in_call_order() -> None:
    running = 0
    peak = 0

    async def work(delay: float) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(delay)
        running -= 1
        return str(delay)

    tool = FakeTool("w", work)
    calls = [("w", f'{{"delay": {d}}}') for d in (0.03, 0.02, 0.01, 0.0)]
    result = await ToolCallingManager().aexecute_tool_calls(
        prompt_with([tool]), tool_calls_response(*calls)
    )
    assert peak == 4
    responses = result.conversation_history[-1].responses
    assert [r.data for r in responses] == ["0.03", "0.02", "0.01", "0.0"]
    assert [r.id for r in responses] == ["c0", "c1", "c2", "c3"]


async def test_max_concurrency_bounds_the_calls_running_at_once() -> None:
    running = 0
    peak = 0

    async def work() -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.005)
        running -= 1
        return "done"

    manager = ToolCallingManager(max_concurrency=2)
    result = await manager.aexecute_tool_calls(
        prompt_with([FakeTool("w", work)]), tool_calls_response(*[("w", "")] * 5)
    )
    assert peak == 2
    assert len(result.conversation_history[-1].responses) == 5


def test_sync_tools_of_a_round_run_in_parallel_threads() -> None:
    # Each call waits until all three are inside the tool: this only passes if they overlap.
    barrier = threading.Barrier(3, timeout=5)

    def meet() -> str:
        barrier.wait()
        return threading.current_thread().name

    result = ToolCallingManager().execute_tool_calls(
        prompt_with([FakeTool("meet", meet)]), tool_calls_response(*[("meet", "")] * 3)
    )
    responses = result.conversation_history[-1].responses
    assert not any(r.is_error for r in responses)
    assert len({r.data for r in responses}) == 3


async def test_a_sequential_tool_runs_alone_in_its_place() -> None:
    events: list[str] = []

    def recorder(label: str) -> Any:
        async def run(tag: str) -> str:
            events.append(f"start {tag}")
            await asyncio.sleep(0.005)
            events.append(f"end {tag}")
            return tag

        return run

    free, barrier = (
        FakeTool("free", recorder("free")),
        FakeTool("seq", recorder("seq"), sequential=True),
    )
    calls = [("free", '{"tag":"a"}'), ("free", '{"tag":"b"}'), ("seq", '{"tag":"S"}'),
             ("free", '{"tag":"c"}'), ("free", '{"tag":"d"}')]  # fmt: skip
    result = await ToolCallingManager().aexecute_tool_calls(
        prompt_with([free, barrier]), tool_calls_response(*calls)
    )
    s_start, s_end = events.index("start S"), events.index("end S")
    assert s_end == s_start + 1  # nothing else ran while S ran
    assert {"end a", "end b"} <= set(events[:s_start])
    assert {"start c", "start d"} <= set(events[s_end:])
    assert events[:2] == ["start a", "start b"]  # a and b overlapped
    assert [r.data for r in result.conversation_history[-1].responses] == ["a", "b", "S", "c", "d"]


async def test_a_tool_that_exceeds_its_timeout_gives_the_model_an_error() -> None:
    async def hang() -> str:
        await asyncio.sleep(10)
        return "never"

    def raise_own_timeout() -> str:
        raise TimeoutError("upstream service timed out")

    slow = FakeTool("slow", hang, timeout=0.01)
    own = FakeTool("own", raise_own_timeout, timeout=5)
    fast = FakeTool("fast")
    result = await ToolCallingManager().aexecute_tool_calls(
        prompt_with([slow, own, fast]),
        tool_calls_response(("slow", ""), ("own", ""), ("fast", "")),
    )
    timed_out, own_error, ok = result.conversation_history[-1].responses
    assert timed_out == ToolResponse(
        id="c0", name="slow", data="Tool 'slow' did not finish within 0.01 seconds.", is_error=True
    )
    # a TimeoutError the tool raised itself is an ordinary tool error, not our timeout
    assert (own_error.data, own_error.is_error) == ("upstream service timed out", True)
    assert (ok.data, ok.is_error) == ("fast ok", False)


async def test_oversized_arguments_are_refused_with_an_error() -> None:
    a = FakeTool("a", lambda x: "ran")
    manager = ToolCallingManager(max_argument_chars=20)
    big = '{"x": "' + "y" * 20 + '"}'
    result = await manager.aexecute_tool_calls(
        prompt_with([a]), tool_calls_response(("a", big), ("a", '{"x": 1}'))
    )
    refused, ok = result.conversation_history[-1].responses
    assert refused.is_error
    assert refused.data == (
        "The arguments for tool 'a' are 29 characters long; the limit is 20. "
        "Call the tool again with shorter arguments."
    )
    assert ok.data == "ran" and len(a.calls) == 1
    unlimited = await ToolCallingManager(max_argument_chars=None).aexecute_tool_calls(
        prompt_with([a]), tool_calls_response(("a", '{"x": "' + "y" * 300_000 + '"}'))
    )
    assert unlimited.conversation_history[-1].responses[0].data == "ran"


async def test_return_direct_only_when_every_executed_call_is_return_direct(
    caplog: pytest.LogCaptureFixture,
) -> None:
    direct, regular = FakeTool("d", return_direct=True), FakeTool("r")
    manager = ToolCallingManager()
    both_direct = await manager.aexecute_tool_calls(
        prompt_with([direct, regular]), tool_calls_response(("d", ""), ("d", ""))
    )
    assert both_direct.return_direct is True
    generations = both_direct.build_generations()
    assert [(g.message.text, g.metadata) for g in generations] == [
        ("d ok", {"finish_reason": "returnDirect", "tool_id": "c0", "tool_name": "d"}),
        ("d ok", {"finish_reason": "returnDirect", "tool_id": "c1", "tool_name": "d"}),
    ]

    with caplog.at_level(logging.WARNING, "tooluse.calling"):
        mixed = await manager.aexecute_tool_calls(
            prompt_with([direct, regular]), tool_calls_response(("d", ""), ("r", ""))
        )
    assert mixed.return_direct is False
    assert "mixed return-direct and regular tools (d, r)" in caplog.text

    # an unknown call did not run, but its error is for the model: the round goes back to it
    with_unknown = await manager.aexecute_tool_calls(
        prompt_with([direct]), tool_calls_response(("d", ""), ("x", ""))
    )
    assert with_unknown.return_direct is False
    assert with_unknown.conversation_history[-1].responses[1].data.startswith("Unknown tool 'x'")
    none_ran = await manager.aexecute_tool_calls(
        prompt_with([direct]), tool_calls_response(("x", ""))
    )
    assert none_ran.return_direct is False


def test_build_generations_needs_tool_responses_at_the_end() -> None:
    from tooluse import ToolExecutionResult

    assert ToolExecutionResult((UserMessage(text="q"),)).build_generations() == []
    with pytest.raises(ValueError, match="history is empty"):
        ToolExecutionResult(()).build_generations()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"resolver_fallback": True}, "resolver_fallback=True needs a resolver"),
        ({"unknown_tool": "ignore"}, "unknown_tool must be 'error' or 'raise', got 'ignore'"),
        ({"on_limit_exceeded": "skip"}, "on_limit_exceeded must be 'raise' or 'return_error'"),
        ({"max_concurrency": 0}, "max_concurrency must be a positive integer or None, got 0"),
        ({"max_argument_chars": -5}, "max_argument_chars must be a positive integer or None"),
        ({"max_concurrency": True}, "max_concurrency must be a positive integer"),
    ],
)
def test_bad_settings_are_rejected(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ToolCallingManager(**settings)


def test_sync_wrapper_runs_and_refuses_to_run_inside_an_event_loop() -> None:
    manager = ToolCallingManager()
    prompt, response = prompt_with([FakeTool("a")]), tool_calls_response(("a", ""))
    assert manager.execute_tool_calls(prompt, response).conversation_history[-1].responses[
        0
    ].data == ("a ok")

    async def inside_loop() -> None:
        manager.execute_tool_calls(prompt, response)

    with pytest.raises(RuntimeError, match=r"use `await aexecute_tool_calls\(\)` instead"):
        asyncio.run(inside_loop())


async def test_prompt_messages_are_not_copied_or_changed() -> None:
    prompt = prompt_with([FakeTool("a")], messages=[UserMessage(text="q")])
    result = await ToolCallingManager().aexecute_tool_calls(prompt, tool_calls_response(("a", "")))
    assert result.conversation_history[0] is prompt.messages[0]
    assert prompt == Prompt([UserMessage(text="q")], prompt.options)


async def test_a_function_in_the_tool_list_is_a_clear_type_error() -> None:
    def plain() -> str:
        return "x"

    prompt = Prompt([UserMessage(text="q")], ChatOptions(tool_callbacks=(plain,)))
    with pytest.raises(TypeError, match="must hold ToolCallbacks, got <function"):
        await ToolCallingManager().aexecute_tool_calls(prompt, tool_calls_response(("plain", "")))
