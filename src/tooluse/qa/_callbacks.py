"""Tool callbacks that record their results in the turn's :class:`FetchLedger`."""

from __future__ import annotations

from collections.abc import Sequence

from tooluse.qa._ledger import FetchLedger
from tooluse.tools import (
    BaseToolCallback,
    ToolCallback,
    ToolCallbackProvider,
    ToolContext,
    ToolDefinition,
    ToolMetadata,
    ToolResult,
    has_fixed_definition,
    is_tool_callback,
    is_tool_callback_provider,
    tool_callbacks,
)

__all__ = ["LedgerToolCallback", "LedgerToolCallbackProvider", "ledger_tool_callbacks"]


class LedgerToolCallback(BaseToolCallback):
    """Runs ``delegate`` unchanged and records its result in the ledger found in the tool
    context (see :data:`~tooluse.qa.LEDGER_KEY`); without a ledger it only runs the tool.

    Definition and metadata (approval, timeout, return-direct...) are the delegate's. A call
    that raises records nothing (the executor turns the exception into an error result).
    """

    __slots__ = ("_delegate",)

    def __init__(self, delegate: ToolCallback) -> None:
        if not is_tool_callback(delegate):
            raise TypeError(f"LedgerToolCallback wraps a ToolCallback, got {delegate!r:.100}")
        self._delegate = delegate

    @property
    def delegate(self) -> ToolCallback:
        return self._delegate

    # A property where BaseToolCallback has a class attribute: a wrapper's answer is its
    # delegate's (what has_fixed_definition reads either way).
    @property
    def fixed_definition(self) -> bool:  # type: ignore[override]
        return has_fixed_definition(self._delegate)

    @property
    def definition(self) -> ToolDefinition:
        return self._delegate.definition

    @property
    def metadata(self) -> ToolMetadata:
        return self._delegate.metadata

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str | ToolResult:
        ledger = FetchLedger.of(context)
        position = ledger.reserve() if ledger is not None else 0
        result = await self._delegate.acall(arguments, context)
        if ledger is not None:
            _record(ledger, self.definition.name, arguments, result, position)
        return result

    def __repr__(self) -> str:
        return f"LedgerToolCallback({self._delegate!r})"


def _record(ledger: FetchLedger, tool: str, arguments: str, result: object, position: int) -> None:
    """Record what the model is sent: ``None`` is sent as ``""`` (as the executor does), a
    ``ToolResult`` as its text (its images are not text to cite), and a result of another
    type is not sent at all (the executor refuses it)."""
    if result is None:
        result = ""
    elif isinstance(result, ToolResult):
        result = result.text
    if isinstance(result, str):
        ledger.add(tool, arguments, result, position=position)


class LedgerToolCallbackProvider:
    """A provider (e.g. an MCP server's changing tool list) whose tools record into the
    ledger. Each distinct callback is wrapped once."""

    __slots__ = ("_provider", "_wrapped")

    def __init__(self, provider: ToolCallbackProvider) -> None:
        if not is_tool_callback_provider(provider):
            raise TypeError(f"not a ToolCallbackProvider: {provider!r:.100}")
        self._provider = provider
        self._wrapped: dict[int, tuple[ToolCallback, LedgerToolCallback]] = {}

    def tool_callbacks(self) -> Sequence[ToolCallback]:
        current = tool_callbacks(self._provider)
        wrapped: dict[int, tuple[ToolCallback, LedgerToolCallback]] = {}
        for callback in current:
            known = self._wrapped.get(id(callback))
            wrapper = (
                known[1]
                if known is not None and known[0] is callback
                else LedgerToolCallback(callback)
            )
            wrapped[id(callback)] = (callback, wrapper)
        self._wrapped = wrapped  # forget the tools the provider dropped
        return [entry[1] for entry in wrapped.values()]


def ledger_tool_callbacks(*sources: object) -> list[ToolCallback | LedgerToolCallbackProvider]:
    """The tools of ``sources`` (anything :func:`tooluse.tools.tool_callbacks` takes), in
    order, each wrapped to record into the ledger. Providers stay providers (asked on every
    request); duplicate names among the other tools raise ``ValueError``."""
    wrapped: list[ToolCallback | LedgerToolCallbackProvider] = []
    for source in _flattened(sources):
        if not is_tool_callback(source) and is_tool_callback_provider(source):
            wrapped.append(LedgerToolCallbackProvider(source))
        else:
            wrapped += [LedgerToolCallback(callback) for callback in tool_callbacks(source)]
    tool_callbacks(*[w for w in wrapped if isinstance(w, LedgerToolCallback)])  # duplicates
    return wrapped


def _flattened(sources: Sequence[object]) -> list[object]:
    flat: list[object] = []
    for source in sources:
        if isinstance(source, list | tuple | set | frozenset):
            flat += _flattened(list(source))
        else:
            flat.append(source)
    return flat
