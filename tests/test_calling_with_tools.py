"""The manager with real ``@tool`` callbacks: validation errors, context injection, and the
metadata declared with ``@tool`` (return_direct, requires_approval, sequential, timeout)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from _calling_tools import prompt_with, tool_calls_response
from tooluse import (
    Approve,
    DefaultToolExecutionExceptionProcessor,
    Prompt,
    ToolCallingManager,
    ToolContext,
    ToolResponse,
    ToolResponseMessage,
    tool,
    tool_callbacks,
)


@tool
def forecast(city: str, days: int = 1) -> str:
    """Weather forecast for a city."""
    return f"{city}: sunny for {days} day(s)"


@tool
def whoami(context: ToolContext) -> str:
    """The current user."""
    return str(context["user"])


@tool
def remember(note: str) -> None:
    """Store a note."""


class Upstream(RuntimeError):
    pass


@tool
def flaky() -> str:
    """Always fails."""
    raise Upstream("upstream returned 503")


def responses_for(prompt: Prompt, *calls: tuple[str, str], **settings: Any) -> list[ToolResponse]:
    result = ToolCallingManager(**settings).execute_tool_calls(prompt, tool_calls_response(*calls))
    last = result.conversation_history[-1]
    assert isinstance(last, ToolResponseMessage)
    return list(last.responses)


def test_validation_errors_reach_the_model_and_valid_calls_run() -> None:
    prompt = prompt_with(tool_callbacks(forecast))
    ok, missing, not_json, wrong_type = responses_for(
        prompt,
        ("forecast", '{"city": "Paris", "days": 2}'),
        ("forecast", "{}"),
        ("forecast", "{city: Paris}"),
        ("forecast", '{"city": "Paris", "days": "soon"}'),
    )
    assert (ok.data, ok.is_error) == ('"Paris: sunny for 2 day(s)"', False)
    for response, field in (
        (missing, "'city'"),
        (not_json, "not valid JSON"),
        (wrong_type, "'days'"),
    ):
        assert response.is_error
        assert response.data.startswith("Invalid arguments for tool 'forecast'")
        assert field in response.data


def test_context_injection_none_results_and_function_errors() -> None:
    prompt = prompt_with(tool_callbacks(whoami, remember, flaky), context={"user": "ada"})
    me, done, failed = responses_for(
        prompt, ("whoami", ""), ("remember", '{"note": "x"}'), ("flaky", "")
    )
    assert me.data == '"ada"'
    assert done.data == '"Done"'
    assert (failed.data, failed.is_error) == ("upstream returned 503", True)
    with pytest.raises(Upstream):
        responses_for(
            prompt,
            ("flaky", ""),
            exception_processor=DefaultToolExecutionExceptionProcessor(rethrow=[Upstream]),
        )


def test_metadata_declared_with_tool_is_honoured() -> None:
    inside_sequential = threading.Event()
    overlapped = threading.Event()

    @tool(return_direct=True)
    def answer() -> str:
        """Final answer."""
        return "42"

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    @tool(sequential=True)
    def migrate() -> str:
        """Runs alone."""
        inside_sequential.set()
        time.sleep(0.02)
        inside_sequential.clear()
        return "migrated"

    @tool
    def probe() -> str:
        """Runs around the sequential tool."""
        if inside_sequential.is_set():
            overlapped.set()
        return "probed"

    @tool(timeout=0.01)
    async def hang() -> str:
        """Never finishes in time."""
        await asyncio.sleep(5)
        return "late"

    manager = ToolCallingManager()
    direct = manager.execute_tool_calls(
        prompt_with(tool_callbacks(answer)),
        tool_calls_response(("answer", "")),
    )
    assert direct.return_direct and direct.build_generations()[0].message.text == "42"

    prompt = prompt_with(tool_callbacks(pay))
    paused = manager.execute_tool_calls(prompt, tool_calls_response(("pay", '{"amount": 5}')))
    assert [p.name for p in paused.pending_tool_calls] == ["pay"]
    resumed = manager.resume_tool_calls(
        Prompt(paused.conversation_history, prompt.options),
        {"c0": Approve(arguments={"amount": 3})},
    )
    assert resumed.conversation_history[-1].responses[0].data == '"paid 3"'

    prompt = prompt_with(tool_callbacks(migrate, probe))
    responses_for(prompt, ("probe", ""), ("migrate", ""), ("probe", ""))
    assert not overlapped.is_set()

    (late,) = responses_for(prompt_with(tool_callbacks(hang)), ("hang", ""))
    assert (late.data, late.is_error) == ("Tool 'hang' did not finish within 0.01 seconds.", True)
