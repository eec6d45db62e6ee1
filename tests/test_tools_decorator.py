"""``@tool``: names, descriptions and options (SPEC section 2; Spring AI's ToolUtils)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tooluse import FunctionToolCallback, ToolDefinition, ToolMetadata, tool, tool_callbacks


def test_bare_decorator_returns_the_same_function() -> None:
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    decorated = tool(get_weather)
    assert decorated is get_weather
    assert get_weather("Paris") == "sunny in Paris"


def test_decorated_async_function_stays_a_coroutine_function() -> None:
    @tool(name="fetch")
    async def fetch(url: str) -> str:
        return url

    assert asyncio.iscoroutinefunction(fetch)
    assert asyncio.run(fetch("x")) == "x"


def test_decorated_methods_stay_methods() -> None:
    class Tools:
        factor = 3

        @tool
        def triple(self, n: int) -> int:
            return n * self.factor

    assert Tools().triple(2) == 6


def test_name_defaults_to_function_name_and_can_be_given() -> None:
    @tool
    def get_weather() -> str:
        return ""

    @tool(name="weather.now")
    def other() -> str:
        return ""

    names = [c.definition.name for c in tool_callbacks(get_weather, other)]
    assert names == ["get_weather", "weather.now"]


@pytest.mark.parametrize("blank", ["", "   "])
def test_blank_name_is_rejected(blank: str) -> None:
    with pytest.raises(ValueError, match="Tool name cannot be null or empty"):
        tool(name=blank)
    with pytest.raises(ValueError, match="Tool name cannot be null or empty"):
        FunctionToolCallback(lambda: None, name=blank)
    with pytest.raises(ValueError, match="Tool name cannot be null or empty"):
        ToolDefinition(name=blank, description="d", input_schema={"type": "object"})


@pytest.mark.parametrize("name", ["invalid tool name", "tool@name!", "tool()", "获取天气"])
def test_unusual_names_are_accepted_with_a_warning(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Spring's ToolUtilsTests: accepted verbatim, a warning logged
    with caplog.at_level(logging.WARNING, logger="tooluse.tools"):

        @tool(name=name)
        def f() -> None: ...

    assert name in caplog.text
    assert tool_callbacks(f)[0].definition.name == name


@pytest.mark.parametrize("name", ["get_weather", "math.factorial", "a-b", "X9"])
def test_recommended_names_log_nothing(name: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tooluse.tools"):
        tool(name=name)
    assert caplog.text == ""


def test_description_order_explicit_then_docstring_then_split_name() -> None:
    # Spring uses the raw method name for an @Tool without description; SPEC splits it.
    @tool(description="Explicit.")
    def explicit() -> None:
        """Docstring."""

    @tool
    def documented() -> None:
        """Get the weather.

        Use it for live data only.

        Args:
            nothing: not a parameter
        """

    @tool
    def getWeatherForecast() -> None: ...

    @tool
    def get_http_status() -> None: ...

    descriptions = [
        c.definition.description
        for c in tool_callbacks(explicit, documented, getWeatherForecast, get_http_status)
    ]
    assert descriptions == [
        "Explicit.",
        "Get the weather.\n\nUse it for live data only.",
        "get weather forecast",
        "get http status",
    ]


def test_blank_description_falls_back() -> None:
    @tool(description="   ")
    def simpleMethod() -> None: ...

    @tool(description="")
    def documented() -> None:
        """From the docstring."""

    callbacks = tool_callbacks(simpleMethod, documented)
    assert [c.definition.description for c in callbacks] == ["simple method", "From the docstring."]


def test_options_become_metadata() -> None:
    def needs_approval(call: object, context: object) -> bool:
        return True

    @tool(return_direct=True, requires_approval=needs_approval, sequential=True, timeout=2.5)
    def transfer(amount: int) -> str:
        return "ok"

    assert tool_callbacks(transfer)[0].metadata == ToolMetadata(
        return_direct=True, requires_approval=needs_approval, sequential=True, timeout=2.5
    )


def test_defaults_metadata() -> None:
    @tool
    def f() -> None: ...

    assert tool_callbacks(f)[0].metadata == ToolMetadata()


# NaN passed the check, and a call that ran to the end was reported as timed out
@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), True, "5"])
def test_a_timeout_that_is_not_a_positive_number_is_rejected(timeout: float) -> None:
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        tool(timeout=timeout)


def test_result_converter_option() -> None:
    @tool(result_converter=lambda value: f"<{value}>")
    def f() -> int:
        return 3

    assert tool_callbacks(f)[0].call("{}") == "<3>"


def test_on_static_and_class_methods() -> None:
    class Tools:
        @tool
        @staticmethod
        def add(a: int, b: int) -> int:
            return a + b

        @tool(name="kind")
        @classmethod
        def kind(cls) -> str:
            return cls.__name__

    callbacks = tool_callbacks(Tools())
    assert [c.definition.name for c in callbacks] == ["add", "kind"]
    assert list(callbacks[0].definition.input_schema["properties"]) == ["a", "b"]
    assert callbacks[0].call('{"a": 1, "b": 2}') == "3"
    assert callbacks[1].call("") == '"Tools"'


def test_on_a_class_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="functions and methods"):

        @tool
        class NotATool:
            pass


def test_a_lambda_needs_a_name() -> None:
    with pytest.raises(ValueError, match="pass name="):
        tool(lambda: 1)
    assert FunctionToolCallback(lambda: 1, name="one").call("") == "1"


def test_function_tool_callback_reads_decorator_options_and_explicit_ones_win() -> None:
    @tool(name="declared", description="Declared.", return_direct=True, timeout=1)
    def f() -> None: ...

    declared = FunctionToolCallback(f)
    assert declared.definition.name == "declared"
    assert declared.definition.description == "Declared."
    assert declared.metadata == ToolMetadata(return_direct=True, timeout=1)
    overridden = FunctionToolCallback(f, name="other", return_direct=False, sequential=True)
    assert overridden.definition.name == "other"
    assert overridden.metadata == ToolMetadata(return_direct=False, sequential=True, timeout=1)
