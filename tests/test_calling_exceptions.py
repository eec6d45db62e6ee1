"""What a tool's exception becomes: the decision table of SPEC section 3."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from _calling_tools import FakeTool, prompt_with, tool_calls_response
from tooluse import (
    DefaultToolExecutionExceptionProcessor,
    ToolCallingManager,
    ToolExecutionException,
    ToolResponse,
    tool_callbacks,
)


class QuotaError(RuntimeError):
    pass


class DailyQuotaError(QuotaError):
    pass


def raising(exc: BaseException) -> Any:
    def tool() -> str:
        raise exc

    return tool


async def run_one(manager: ToolCallingManager, exc: BaseException) -> ToolResponse:
    result = await manager.aexecute_tool_calls(
        prompt_with([FakeTool("t", raising(exc))]), tool_calls_response(("t", ""))
    )
    response = result.conversation_history[-1].responses[0]
    assert isinstance(response, ToolResponse)
    return response


def wrapped(cause: BaseException, message: str | None = None) -> ToolExecutionException:
    return ToolExecutionException(str(cause) if message is None else message, cause=cause)


@pytest.mark.parametrize(
    ("exc", "text"),
    [
        (ValueError("city must not be empty"), "city must not be empty"),
        (ValueError(), "Exception occurred in tool: t (ValueError)"),
        (KeyError(""), "''"),  # str(KeyError('')) is "''": not empty
        (
            ToolExecutionException("field 'city': expected a string"),
            "field 'city': expected a string",
        ),
        (wrapped(QuotaError("")), "Exception occurred in tool: t (QuotaError)"),
        (wrapped(OSError("disk full")), "disk full"),
    ],
)
async def test_exceptions_become_error_text_for_the_model(exc: Exception, text: str) -> None:
    response = await run_one(ToolCallingManager(), exc)
    assert response == ToolResponse(id="c0", name="t", data=text, is_error=True)


async def test_rethrow_types_propagate_unwrapped_with_subclass_match() -> None:
    processor = DefaultToolExecutionExceptionProcessor(rethrow=[QuotaError])
    manager = ToolCallingManager(exception_processor=processor)
    direct = DailyQuotaError("quota")
    with pytest.raises(DailyQuotaError) as raised:
        await run_one(manager, direct)
    assert raised.value is direct
    cause = QuotaError("inner")
    with pytest.raises(QuotaError) as raised_cause:
        await run_one(manager, wrapped(cause))
    assert raised_cause.value is cause  # the wrapper is removed
    # other exceptions still go to the model
    assert (await run_one(manager, ValueError("bad"))).data == "bad"


async def test_invalid_arguments_reach_the_model_even_when_value_errors_are_rethrown() -> None:
    # pydantic's ValidationError is a ValueError: it is the cause of the argument error, but
    # the model's bad arguments are the model's to fix, not the tool's ValueError to rethrow
    def divide(a: int, b: int) -> float:
        if b == 0:
            raise ValueError("b must not be 0")
        return a / b

    processor = DefaultToolExecutionExceptionProcessor(rethrow=[ValueError])
    manager = ToolCallingManager(exception_processor=processor)
    prompt = prompt_with(tool_callbacks(divide))
    for arguments in ('{"a": 1, "b": "two"}', '{"a": 1', "[1, 2]"):
        result = await manager.aexecute_tool_calls(
            prompt, tool_calls_response(("divide", arguments))
        )
        (response,) = result.conversation_history[-1].responses
        assert response.is_error
        assert response.data.startswith("Invalid arguments for tool 'divide'")
    with pytest.raises(ValueError, match="b must not be 0"):  # the tool's own ValueError
        await manager.aexecute_tool_calls(
            prompt, tool_calls_response(("divide", '{"a": 1, "b": 0}'))
        )


async def test_always_throw_propagates_the_exception_as_the_tool_raised_it() -> None:
    manager = ToolCallingManager(
        exception_processor=DefaultToolExecutionExceptionProcessor(always_throw=True)
    )
    exc = wrapped(ValueError("bad"))
    with pytest.raises(ToolExecutionException) as raised:
        await run_one(manager, exc)
    assert raised.value is exc


@pytest.mark.parametrize(
    "exc", [MemoryError(), wrapped(MemoryError()), KeyboardInterrupt(), SystemExit(3)]
)
async def test_fatal_exceptions_always_propagate(exc: BaseException) -> None:
    expected = exc.__cause__ if isinstance(exc, ToolExecutionException) else exc
    with pytest.raises(type(expected)):
        await run_one(ToolCallingManager(), exc)


async def test_cancellation_of_a_tool_propagates() -> None:
    async def cancelled() -> str:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await ToolCallingManager().aexecute_tool_calls(
            prompt_with([FakeTool("c", cancelled)]), tool_calls_response(("c", ""))
        )


async def test_a_propagating_exception_cancels_the_other_calls_of_the_round() -> None:
    cancelled = asyncio.Event()

    async def slow() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async def fail() -> str:
        await asyncio.sleep(0)
        raise QuotaError("stop")

    manager = ToolCallingManager(
        exception_processor=DefaultToolExecutionExceptionProcessor(rethrow=[QuotaError])
    )
    with pytest.raises(QuotaError, match="stop"):
        await manager.aexecute_tool_calls(
            prompt_with([FakeTool("slow", slow), FakeTool("fail", fail)]),
            tool_calls_response(("slow", ""), ("fail", "")),
        )
    assert cancelled.is_set()


async def test_a_custom_processor_decides_the_text() -> None:
    class Redacting:
        def __init__(self) -> None:
            self.seen: list[tuple[type[Exception], str]] = []

        def process(self, exc: Exception, tool_name: str) -> str:
            self.seen.append((type(exc), tool_name))
            return "tool failed"

    processor = Redacting()
    response = await run_one(ToolCallingManager(exception_processor=processor), ValueError("x"))
    assert (response.data, response.is_error) == ("tool failed", True)
    assert processor.seen == [(ValueError, "t")]


def test_processor_can_be_used_directly() -> None:
    processor = DefaultToolExecutionExceptionProcessor()
    assert (
        processor.process(RuntimeError(" "), "x") == "Exception occurred in tool: x (RuntimeError)"
    )
    with pytest.raises(TypeError, match="rethrow takes exception classes"):
        DefaultToolExecutionExceptionProcessor(rethrow=[ValueError("not a type")])  # type: ignore[list-item]
