"""Resolvers: where the manager looks for a tool the request did not attach.

The manager consults them only with ``resolver_fallback=True``; by default a tool that was not
attached to the request never runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from tooluse.tools import ToolCallback

__all__ = ["DelegatingToolCallbackResolver", "StaticToolCallbackResolver", "ToolCallbackResolver"]


@runtime_checkable
class ToolCallbackResolver(Protocol):
    def resolve(self, tool_name: str) -> ToolCallback | None: ...


class StaticToolCallbackResolver:
    """A fixed set of tools by name (a later tool with the same name replaces an earlier one)."""

    __slots__ = ("_by_name",)

    def __init__(self, callbacks: Iterable[ToolCallback]) -> None:
        self._by_name = {callback.definition.name: callback for callback in callbacks}

    def resolve(self, tool_name: str) -> ToolCallback | None:
        _check_name(tool_name)
        return self._by_name.get(tool_name)


class DelegatingToolCallbackResolver:
    """The first tool any of ``resolvers`` finds."""

    __slots__ = ("_resolvers",)

    def __init__(self, resolvers: Iterable[ToolCallbackResolver]) -> None:
        self._resolvers = tuple(resolvers)

    def resolve(self, tool_name: str) -> ToolCallback | None:
        _check_name(tool_name)
        for resolver in self._resolvers:
            callback = resolver.resolve(tool_name)
            if callback is not None:
                return callback
        return None


def _check_name(tool_name: str) -> None:
    if not tool_name.strip():
        raise ValueError("tool_name cannot be empty")
