"""Properties: whatever names and argument strings a model sends, the manager answers each call
with a response (an error the model can read when the call cannot run) and never crashes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _calling_tools import FakeTool, prompt_with, tool_calls_response
from tooluse import ToolCallback, ToolCallingManager, ToolResponse, tool, tool_callbacks

REGISTERED = ("get_weather", "get_time", "search.docs")
MANAGER = ToolCallingManager(max_argument_chars=2_000)


async def echo(**arguments: object) -> str:
    return json.dumps(arguments)


TOOLS = [FakeTool(name, echo) for name in REGISTERED]


@tool
def forecast(city: str, days: int = 1) -> str:
    """A real ``@tool``: arguments are validated against its signature."""
    return f"{city}/{days}"


VALIDATED = tool_callbacks(forecast)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=8,
)
argument_strings = st.one_of(
    st.text(),  # mostly not JSON at all
    json_values.map(json.dumps),  # JSON, often not an object
    st.dictionaries(st.text(max_size=10), json_values, max_size=4).map(json.dumps),  # objects
    st.text(min_size=1).map(lambda t: '{"city": "' + t),  # truncated by a stream
    st.integers(2_001, 5_000).map(lambda n: '{"q": "' + "x" * n + '"}'),  # oversized
    st.integers(10**18, 10**400).map(lambda n: f'{{"city": "x", "days": {n}}}'),  # huge values
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF).map(
        lambda s: '{"city": "' + s + '"}'  # lone surrogates: not encodable text
    ),
)


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop_runner:  # one loop for all examples: each is fast
        yield loop_runner


def run(
    runner: asyncio.Runner, name: str, arguments: str, tools: Sequence[ToolCallback] = TOOLS
) -> ToolResponse:
    result = runner.run(
        MANAGER.aexecute_tool_calls(prompt_with(tools), tool_calls_response((name, arguments)))
    )
    (response,) = result.conversation_history[-1].responses
    assert (response.id, response.name) == ("c0", name)
    return response


@settings(max_examples=150, deadline=None)
@given(name=st.text(max_size=300).filter(lambda n: n not in REGISTERED))
def test_any_unknown_name_gets_an_error_naming_it(runner: asyncio.Runner, name: str) -> None:
    response = run(runner, name, "{}")
    assert response.is_error
    assert response.data.startswith(f"Unknown tool '{name[:100]}")


@settings(max_examples=200, deadline=None)
@given(arguments=argument_strings)
def test_any_argument_string_gets_a_result_or_a_readable_error(
    runner: asyncio.Runner, arguments: str
) -> None:
    response = run(runner, "get_weather", arguments)
    stripped = arguments.strip()
    if not stripped or stripped == "null":
        parsed: object = {}
    else:
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
    runnable = isinstance(parsed, dict) and len(arguments) <= 2_000
    assert response.is_error is not runnable
    assert response.data.strip()
    if runnable:
        assert json.loads(response.data) == parsed


@settings(max_examples=200, deadline=None)
@given(arguments=argument_strings | st.fixed_dictionaries({"city": json_values}).map(json.dumps))
def test_a_validated_tool_answers_any_argument_string(
    runner: asyncio.Runner, arguments: str
) -> None:
    response = run(runner, "forecast", arguments, VALIDATED)
    if response.is_error:
        assert response.data.startswith(
            ("Invalid arguments for tool 'forecast'", "The arguments for tool 'forecast' are")
        )
    else:
        assert json.loads(arguments)["city"] is not None
