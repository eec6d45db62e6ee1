"""Provider-safe tool names: stable, readable, collision-free aliases and the way back."""

from __future__ import annotations

import hashlib
import re

from hypothesis import given
from hypothesis import strategies as st

from tooluse import AssistantMessage, ToolCall, UserMessage
from tooluse.models import ToolNameAliases, provider_safe_name
from tooluse.tools import ToolDefinition

PROVIDER_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def short_hash(name: str, length: int = 8) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:length]


def test_names_providers_accept_are_sent_unchanged() -> None:
    for name in ("get_weather", "getWeather", "search-docs", "a", "x" * 64):
        assert provider_safe_name(name) == name


def test_rejected_names_get_readable_stable_aliases() -> None:
    assert provider_safe_name("math.factorial") == f"math_factorial_{short_hash('math.factorial')}"
    assert provider_safe_name("weather now") == f"weather_now_{short_hash('weather now')}"
    assert provider_safe_name("查询天气") == f"tool_{short_hash('查询天气')}"
    assert provider_safe_name("查询weather") == f"weather_{short_hash('查询weather')}"
    long_name = "mcp__server__" + "very_long_tool_name_" * 4
    alias = provider_safe_name(long_name)
    assert len(alias) == 64 and alias.startswith("mcp__server__very_long")
    assert alias.endswith(short_hash(long_name))


def test_similar_names_get_different_aliases() -> None:
    assert provider_safe_name("a.b") != provider_safe_name("a b") != provider_safe_name("a/b")


def test_an_alias_never_takes_a_real_tool_name() -> None:
    squatter = provider_safe_name("a.b")  # a valid name that equals another name's alias
    aliases = ToolNameAliases(["a.b", squatter])
    assert aliases.to_provider(squatter) == squatter
    assert aliases.to_provider("a.b") == f"a_b_{short_hash('a.b', 16)}"
    assert aliases.to_real(aliases.to_provider("a.b")) == "a.b"
    assert aliases.to_real(squatter) == squatter


def test_unknown_provider_names_pass_through() -> None:
    aliases = ToolNameAliases(["math.factorial"])
    assert aliases.to_real("made_up_tool") == "made_up_tool"


def test_for_request_includes_the_names_in_the_history() -> None:
    history = [
        UserMessage(text="hi"),
        AssistantMessage(tool_calls=(ToolCall(id="1", name="old.tool", arguments="{}"),)),
    ]
    aliases = ToolNameAliases.for_request([ToolDefinition("new.tool", "d", {})], history)
    for name in ("old.tool", "new.tool"):
        assert aliases.to_real(provider_safe_name(name)) == name


@given(st.text(min_size=1, max_size=120))
def test_every_alias_is_accepted_by_the_providers(name: str) -> None:
    alias = provider_safe_name(name)
    assert PROVIDER_NAME.fullmatch(alias)
    assert provider_safe_name(name) == alias


@given(st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=30))
def test_mapping_is_collision_free_and_reversible(names: list[str]) -> None:
    aliases = ToolNameAliases(names)
    sent = {name: aliases.to_provider(name) for name in names}
    assert len(set(sent.values())) == len(set(names))
    for name, alias in sent.items():
        assert PROVIDER_NAME.fullmatch(alias)
        assert aliases.to_real(alias) == name
