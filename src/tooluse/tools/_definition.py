"""What a tool is, as the model sees it (``ToolDefinition``) and as the executor treats it
(``ToolMetadata``), and what the application hands it that the model never sees
(``ToolContext``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from tooluse.messages import ToolCall

IdempotencyKey = Literal[True] | Callable[[Mapping[str, Any], "ToolContext"], str]
"""``True`` (the key is all the arguments) or ``(arguments, context) -> key``."""


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
      wait for a human decision (see ``ChatClient.resume``). ``None`` (the default) leaves it
      to the manager's ``write_approval`` policy; ``False`` never holds the tool, whatever
      the policy.
    - ``sequential``: the tool never runs concurrently with other calls of the same round.
    - ``timeout``: seconds; a call that takes longer becomes an error result for the model.
    - ``read_only``: the tool only reads (no side effects); a manager with a
      ``write_approval`` policy holds the others for approval.
    - ``destructive``: a write that may destroy or overwrite (MCP's ``destructiveHint``);
      meaningful only when not ``read_only``.
    - ``idempotency_key``: ``True`` (all the arguments) or a function ``(arguments,
      context) -> str``; a manager with a journal answers a repeated call with the same key
      from the journal instead of running the tool again (see ``ToolCallJournal``).
    """

    return_direct: bool = False
    _: dataclasses.KW_ONLY  # ToolMetadata(True) reads well; the other settings by name
    requires_approval: bool | Callable[[ToolCall, ToolContext], bool] | None = None
    sequential: bool = False
    timeout: float | None = None
    read_only: bool = False
    destructive: bool = False
    idempotency_key: IdempotencyKey | None = None

    def __post_init__(self) -> None:
        if self.read_only and self.destructive:
            raise ValueError("A tool cannot be both read_only and destructive")
        key = self.idempotency_key
        if key is not None and key is not True and not callable(key):
            raise TypeError(
                "idempotency_key takes True (all the arguments) or a function (arguments, "
                f"context) -> str, got {key!r}"
            )
        if key is not None and self.read_only:
            raise ValueError("idempotency_key is for tools that act; this one is read_only")
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
