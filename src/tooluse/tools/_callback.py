"""The narrow interface every tool source implements: ``ToolCallback``."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import ClassVar, Protocol, TypeGuard, runtime_checkable

from tooluse._sync import run_sync
from tooluse.tools._definition import ToolContext, ToolDefinition, ToolMetadata
from tooluse.tools._results import ToolResult


@runtime_checkable
class ToolCallback(Protocol):
    """A callable tool: its definition for the model, its metadata for the executor, and the
    call itself. ``arguments`` is the JSON text the model produced; the result is text for the
    model, or a ``ToolResult`` when images go with the text. A failure the model can fix is
    raised as ``ToolExecutionException``.

    The protocol is async only: the executor awaits ``acall``. The tools of this package
    subclass :class:`BaseToolCallback`, which adds a blocking ``call`` for scripts and tests.

    ``definition`` may change from one request to the next (a tool updated in place); a
    callback whose ``definition`` is the same object for its whole life says so with a
    ``fixed_definition = True`` attribute (:func:`has_fixed_definition`): code that keeps
    what it derived from a tool list (the search advisor's catalogue) then reads no definition
    of it again while the list is the same."""

    @property
    def definition(self) -> ToolDefinition: ...

    @property
    def metadata(self) -> ToolMetadata: ...

    async def acall(
        self, arguments: str, context: ToolContext | None = None
    ) -> str | ToolResult: ...


class BaseToolCallback(abc.ABC):
    """A :class:`ToolCallback` from its ``definition``, ``metadata`` and ``acall``, with
    ``call``, the blocking form of ``acall`` for scripts and tests."""

    __slots__ = ()

    # True in a subclass whose ``definition`` is the same object for the callback's life.
    fixed_definition: ClassVar[bool] = False

    @property
    @abc.abstractmethod
    def definition(self) -> ToolDefinition: ...

    @property
    @abc.abstractmethod
    def metadata(self) -> ToolMetadata: ...

    @abc.abstractmethod
    async def acall(
        self, arguments: str, context: ToolContext | None = None
    ) -> str | ToolResult: ...

    def call(self, arguments: str, context: ToolContext | None = None) -> str | ToolResult:
        """``acall`` run to its end on this thread's event loop (see ``tooluse._sync``); inside
        a running event loop it raises ``RuntimeError``: await ``acall`` there."""
        return run_sync(
            self.acall(arguments, context),
            sync_name=f"call() of the tool '{self.definition.name}'",
            async_name="callback.acall(...)",
        )


@runtime_checkable
class ToolCallbackProvider(Protocol):
    """A source of tools resolved when a request is made (e.g. an MCP server's tool list)."""

    def tool_callbacks(self) -> Sequence[ToolCallback]: ...


_CALLBACK_ATTRIBUTES = ("definition", "metadata", "acall")


def is_tool_callback(value: object) -> TypeGuard[ToolCallback]:
    """What ``isinstance(value, ToolCallback)`` checks, without the cost of a runtime protocol
    check (tens of microseconds on Python 3.11), for paths that run on every request."""
    return all(hasattr(value, name) for name in _CALLBACK_ATTRIBUTES)


def has_fixed_definition(callback: ToolCallback) -> bool:
    """Whether ``callback`` declares that its ``definition`` is the same object for its whole
    life (``fixed_definition = True``; a wrapper answers for the callback it wraps). Without
    the declaration a definition may be replaced, so it is read again."""
    return getattr(callback, "fixed_definition", False) is True


def is_tool_callback_provider(value: object) -> TypeGuard[ToolCallbackProvider]:
    """The cheap form of ``isinstance(value, ToolCallbackProvider)``."""
    return callable(getattr(value, "tool_callbacks", None))
