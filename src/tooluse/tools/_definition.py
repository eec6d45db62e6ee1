"""What a tool is, as the model sees it (``ToolDefinition``) and as the executor treats it
(``ToolMetadata``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tooluse.messages import ToolCall
    from tooluse.tools._context import ToolContext


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
