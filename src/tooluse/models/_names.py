"""Tool names at the provider boundary.

OpenAI and Anthropic accept tool names matching ``^[a-zA-Z0-9_-]{1,64}$``; a framework name
such as ``math.factorial``, ``查询天气`` or a 90-character MCP name would be rejected. Such names
are sent under an alias and the model's calls are mapped back before the response leaves the
adapter, so the executor's exact-name lookup always sees the real name.

An alias depends only on the name (sanitised characters + a short SHA-256 of the name), so it
is the same in every request of a conversation and across processes, which keeps earlier turns
consistent and prompt caches warm. Valid names are sent unchanged.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from tooluse.messages import AssistantMessage, Message
from tooluse.tools import ToolDefinition

__all__ = ["ToolNameAliases", "provider_safe_name"]

_VALID_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_INVALID_RUN = re.compile(r"[^a-zA-Z0-9_-]+")
_MAX_LENGTH = 64
_HASH_LENGTHS = (8, 16, 64)  # a longer hash only when a shorter one collides in a request


def _alias(name: str, hash_length: int) -> str:
    digest = hashlib.sha256(name.encode()).hexdigest()[:hash_length]
    base = _INVALID_RUN.sub("_", name).strip("_") or "tool"
    return f"{base[: _MAX_LENGTH - hash_length - 1]}_{digest}"


@lru_cache(maxsize=4096)
def provider_safe_name(name: str) -> str:
    """The name itself when a provider accepts it, else its readable, stable alias
    (``math.factorial`` -> ``math_factorial_<8 hex>``)."""
    if _VALID_NAME.fullmatch(name):
        return name
    return _alias(name, _HASH_LENGTHS[0])


class ToolNameAliases:
    """The two-way name mapping for one request.

    Built from every tool name the request mentions (offered tools and the calls in its
    history). Collision-free within the request: a name whose alias clashes with another name
    or alias gets a longer hash.
    """

    __slots__ = ("_to_provider", "_to_real")

    def __init__(self, names: Iterable[str]) -> None:
        self._to_provider: dict[str, str] = {}
        self._to_real: dict[str, str] = {}
        unique = dict.fromkeys(names)
        # Valid names claim themselves first, so an alias can never take a real name.
        for name in unique:
            if _VALID_NAME.fullmatch(name):
                self._claim(name, name)
        for name in unique:
            if name not in self._to_provider:
                self._claim(name, self._free_alias(name))

    @classmethod
    def for_request(
        cls, definitions: Sequence[ToolDefinition], messages: Sequence[Message]
    ) -> ToolNameAliases:
        """Aliases for the offered tools and every tool the history's calls name."""
        names = [d.name for d in definitions]
        for message in messages:
            if isinstance(message, AssistantMessage):
                names.extend(call.name for call in message.tool_calls)
        return cls(names)

    def _free_alias(self, name: str) -> str:
        for length in _HASH_LENGTHS:
            alias = provider_safe_name(name) if length == _HASH_LENGTHS[0] else _alias(name, length)
            if alias not in self._to_real:
                return alias
        raise ValueError(f"Cannot find a provider-safe alias for tool name {name!r}")

    def _claim(self, name: str, alias: str) -> None:
        self._to_provider[name] = alias
        self._to_real[alias] = name

    def to_provider(self, name: str) -> str:
        """The name to send for ``name``."""
        alias = self._to_provider.get(name)
        return alias if alias is not None else provider_safe_name(name)

    def to_real(self, provider_name: str) -> str:
        """The real name behind a name the model used; an unknown name is returned unchanged,
        so the executor reports it as an unknown tool with suggestions."""
        return self._to_real.get(provider_name, provider_name)
