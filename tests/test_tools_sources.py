"""``tool_callbacks(*sources)``: functions, objects with ``@tool`` methods, callbacks, providers,
iterables; missing tools and duplicate names."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence

import pytest

from tooluse import FunctionToolCallback, ToolCallback, tool, tool_callbacks


@tool
def get_weather(city: str) -> str:
    """Current weather."""
    return f"sunny in {city}"


def plain_function(n: int) -> int:
    return n


class WeatherTools:
    @tool
    def forecast(self, city: str, days: int = 3) -> str:
        return f"{days} days in {city}"

    @tool(name="alerts")
    async def weather_alerts(self, region: str) -> list[str]:
        return []

    def helper(self) -> None:
        """Not a tool."""


class MoreWeatherTools(WeatherTools):
    @tool
    def radar(self) -> str:
        return "radar"

    def forecast(self, city: str, days: int = 3) -> str:  # overridden without @tool
        return "no"


class Provider:
    def __init__(self, *callbacks: ToolCallback) -> None:
        self.callbacks = callbacks
        self.asked = 0

    def tool_callbacks(self) -> Sequence[ToolCallback]:
        self.asked += 1
        return self.callbacks


def names(callbacks: Sequence[ToolCallback]) -> list[str]:
    return [c.definition.name for c in callbacks]


def test_functions_decorated_or_plain() -> None:
    callbacks = tool_callbacks(get_weather, plain_function)
    assert names(callbacks) == ["get_weather", "plain_function"]
    assert all(isinstance(c, FunctionToolCallback) for c in callbacks)
    assert callbacks[1].definition.description == "plain function"


def test_object_with_tool_methods_in_declaration_order() -> None:
    callbacks = tool_callbacks(WeatherTools())
    assert names(callbacks) == ["forecast", "alerts"]
    assert callbacks[0].call('{"city": "Oslo"}') == '"3 days in Oslo"'


def test_inherited_tools_base_first_and_overrides_without_tool_removed() -> None:
    assert names(tool_callbacks(MoreWeatherTools())) == ["alerts", "radar"]


def test_callbacks_providers_and_iterables() -> None:
    extra = FunctionToolCallback(plain_function, name="extra")
    provider = Provider(FunctionToolCallback(plain_function, name="from_provider"))
    callbacks = tool_callbacks(
        [get_weather, (extra,)], provider, (f for f in [functools.partial(plain_function)])
    )
    assert names(callbacks) == ["get_weather", "extra", "from_provider", "plain_function"]
    assert callbacks[1] is extra
    assert provider.asked == 1


def test_object_without_tools_is_named_in_the_error() -> None:
    class Empty:
        def __repr__(self) -> str:
            return "<Empty tools>"

    with pytest.raises(ValueError, match="No @tool methods found in <Empty tools>"):
        tool_callbacks(get_weather, Empty())


def test_class_instead_of_instance() -> None:
    with pytest.raises(ValueError, match="Got the class WeatherTools; pass an instance"):
        tool_callbacks(WeatherTools)


@pytest.mark.parametrize("source", ["get_weather", b"x", {"name": "f"}])
def test_text_and_mappings_are_not_tool_sources(source: object) -> None:
    with pytest.raises(TypeError, match="Cannot make tools from a"):
        tool_callbacks(source)


def test_provider_returning_something_else() -> None:
    with pytest.raises(TypeError, match="not a ToolCallback"):
        tool_callbacks(Provider("oops"))  # type: ignore[arg-type]


def test_duplicate_names_name_the_duplicates_and_sources() -> None:
    @tool(name="forecast")
    def other_forecast(city: str) -> str:
        return city

    with pytest.raises(ValueError) as info:
        tool_callbacks(WeatherTools(), other_forecast, get_weather, [get_weather])
    message = str(info.value)
    assert message.startswith(
        "Multiple tools with the same name (forecast, get_weather) found in sources: "
    )
    assert "'forecast' from WeatherTools instance, function " in message
    assert "test_tools_sources.test_duplicate_names_name_the_duplicates_and_sources" in message
    assert "'get_weather' from function test_tools_sources.get_weather, " in message


def test_nothing_gives_an_empty_list() -> None:
    assert tool_callbacks() == []
    assert tool_callbacks([]) == []


def test_collected_tools_are_callable_async() -> None:
    callbacks = tool_callbacks(WeatherTools())
    assert asyncio.run(callbacks[1].acall('{"region": "north"}')) == "[]"


def test_a_function_decorated_again_gets_a_callback_with_its_new_options() -> None:
    def lookup(city: str) -> str:
        return city

    first = tool(name="lookup_city", read_only=True)(lookup)
    assert names(tool_callbacks(first)) == ["lookup_city"]
    again = tool(name="find_city", return_direct=True)(lookup)
    (callback,) = tool_callbacks(again)
    assert callback.definition.name == "find_city"
    assert callback.metadata.return_direct and not callback.metadata.read_only
    assert tool_callbacks(again)[0] is callback  # unchanged options: the same callback again
