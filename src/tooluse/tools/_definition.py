"""What a tool is, as the model sees it (``ToolDefinition``) and as the executor treats it
(``ToolMetadata``), and what the application hands it that the model never sees
(``ToolContext``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tooluse.messages import ToolCall


@dataclasses.dataclass(frozen=True, slots=True)
class ToolDefinition:
    """Name, description and JSON Schema (draft 2020-12) of the tool's input."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def __post_init__(self) -> None:
        if not self.name or not self.name.strip():
            raise ValueError("Tool name cannot be null or empty")


@dataclasses.dataclass(frozen=True, slots=True)
class ToolMetadata:
    """How the executor treats a tool.

    - ``return_direct``: the tool's result goes straight to the caller, not back to the model.
    - ``requires_approval``: ``True``, or a predicate ``(call, context) -> bool``; held calls
      wait for a human decision (see ``ChatClient.resume``).
    - ``sequential``: the tool never runs concurrently with other calls of the same round.
    - ``timeout``: seconds; a call that takes longer becomes an error result for the model.
    """

    return_direct: bool = False
    _: dataclasses.KW_ONLY  # ToolMetadata(True) reads well; the other settings by name
    requires_approval: bool | Callable[[ToolCall, ToolContext], bool] = False
    sequential: bool = False
    timeout: float | None = None

    def __post_init__(self) -> None:
        timeout = self.timeout
        if timeout is None:
            return
        # (NaN is no number of seconds: a call past it was reported as timed out, yet it ran)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")


class ToolContext(Mapping[str, Any]):
    """A read-only mapping injected into tool parameters annotated ``ToolContext``.

    Built as ``ToolContext({"user_id": "42"})``. It is copied on construction, so later changes
    to the source dict do not leak into a running tool, and it cannot be modified by a tool.
    Use :meth:`merged` to derive a new context with extra keys.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None, /) -> None:
        self._data: Mapping[str, Any] = MappingProxyType(dict(data or {}))

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"ToolContext({dict(self._data)!r})"

    def merged(self, other: Mapping[str, Any]) -> ToolContext:
        """A new context with ``other``'s keys overriding this one's."""
        return ToolContext({**self._data, **other})
