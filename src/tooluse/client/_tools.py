"""The tools of a client or a request: callbacks resolved once, providers expanded per request."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from tooluse.tools import (
    ToolCallback,
    ToolCallbackProvider,
    is_tool_callback,
    is_tool_callback_provider,
    tool_callbacks,
)

__all__ = ["ToolSources"]


def _split(
    sources: Iterable[object], static: list[object], providers: list[ToolCallbackProvider]
) -> None:
    for source in sources:
        if is_tool_callback(source):
            static.append(source)
        elif is_tool_callback_provider(source):
            providers.append(source)
        elif isinstance(source, list | tuple | set | frozenset):
            _split(source, static, providers)
        else:
            static.append(source)


class ToolSources:
    """Tools given to a client or request.

    Functions, objects with ``@tool`` methods and callbacks become callbacks once, here.
    Providers (e.g. an MCP server's tool list, which can change) are asked for their tools
    on every request. Duplicate names are an error naming the sources, raised here for the
    static tools and per request once providers are expanded.
    """

    __slots__ = ("_callbacks", "_providers")

    def __init__(
        self, callbacks: tuple[ToolCallback, ...], providers: tuple[ToolCallbackProvider, ...]
    ) -> None:
        self._callbacks = callbacks
        self._providers = providers

    @classmethod
    def of(cls, sources: Iterable[object]) -> ToolSources:
        static: list[object] = []
        providers: list[ToolCallbackProvider] = []
        _split(sources, static, providers)
        callbacks = tuple(tool_callbacks(*static)) if static else ()
        return cls(callbacks, tuple(providers))

    EMPTY: ClassVar[ToolSources]

    def __bool__(self) -> bool:
        return bool(self._callbacks or self._providers)

    @property
    def has_providers(self) -> bool:
        """Whether the callbacks can change from one request to the next."""
        return bool(self._providers)

    def merged(self, other: ToolSources) -> ToolSources:
        """These tools and ``other``'s (for ``add_tools``); duplicate names raise."""
        if not other:
            return self
        if not self:
            return other
        callbacks = self._callbacks + other._callbacks
        tool_callbacks(*callbacks)  # the duplicate check, with the sources named
        return ToolSources(callbacks, self._providers + other._providers)

    def callbacks(self) -> tuple[ToolCallback, ...]:
        """The callbacks for one request (providers asked now)."""
        if not self._providers:
            return self._callbacks
        return tuple(tool_callbacks(*self._callbacks, *self._providers))


ToolSources.EMPTY = ToolSources((), ())
