"""Human approval of tool calls: held calls (``PendingToolCall``) and decisions on them
(``Approve``, ``Deny``)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from tooluse.messages import ToolCall
from tooluse.tools import ToolCallback, ToolContext

__all__ = [
    "ApprovalPredicate",
    "Approve",
    "Decision",
    "Deny",
    "PendingToolCall",
    "WriteApproval",
]

ApprovalPredicate = Callable[[ToolCall, ToolContext], bool]


@dataclasses.dataclass(frozen=True, slots=True)
class PendingToolCall:
    """A tool call waiting for a human decision: the call as the model made it (``arguments``
    is its raw JSON text) and why it needs approval."""

    id: str
    name: str
    arguments: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingToolCall:
        fields = ("id", "name", "arguments", "reason")
        missing = [f for f in fields if f not in data]
        if missing:
            raise ValueError(f"PendingToolCall data lacks {missing}: {dict(data)!r}")
        wrong = [f for f in fields if not isinstance(data[f], str)]
        if wrong:
            raise ValueError(f"PendingToolCall fields {wrong} must be strings: {dict(data)!r}")
        extra = sorted(set(data) - set(fields))
        if extra:
            raise ValueError(f"PendingToolCall data has unknown keys {extra}")
        return cls(
            id=data["id"], name=data["name"], arguments=data["arguments"], reason=data["reason"]
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Approve:
    """Run the held call: as the model requested (``arguments=None``) or with these arguments
    instead (they replace the model's, JSON-encoded). ``by``: who decided, for the audit log."""

    arguments: Mapping[str, Any] | None = None
    by: str | None = None

    def __post_init__(self) -> None:
        if self.arguments is not None and not isinstance(self.arguments, Mapping):
            raise TypeError(
                "Approve(arguments=...) takes a mapping of argument names to values, got "
                f"{type(self.arguments).__name__}"
            )

    def encoded_arguments(self, call_id: str) -> str | None:
        """The replacement arguments as JSON text, or ``None`` to keep the model's."""
        if self.arguments is None:
            return None
        try:
            return json.dumps(self.arguments, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"The edited arguments for tool call '{call_id}' are not JSON-serialisable: {exc}"
            ) from exc


@dataclasses.dataclass(frozen=True, slots=True)
class Deny:
    """Do not run the held call; the model gets ``message`` as the call's error result.
    ``by``: who decided, for the audit log."""

    message: str = "The user denied this tool call."
    by: str | None = None


Decision = Approve | Deny


WriteApproval = Literal["none", "writes", "destructive"]
"""Which tools a manager holds for approval by their kind, beyond their own
``requires_approval``: ``"none"``; ``"writes"``, every tool not marked ``read_only``;
``"destructive"``, the tools marked ``destructive``. A tool whose ``requires_approval`` is
``False`` (not unset) is never held by it."""

WRITE_APPROVALS: Final = ("none", "writes", "destructive")


def approval_reason(
    call: ToolCall,
    callback: ToolCallback,
    context: ToolContext,
    manager_predicate: ApprovalPredicate | None,
    write_approval: WriteApproval = "none",
) -> str | None:
    """Why ``call`` must wait for a human, or ``None`` when it may run now."""
    metadata = callback.metadata
    required = metadata.requires_approval
    if required is True:
        return f"Tool '{call.name}' requires approval"
    if callable(required) and required(call, context):
        return f"The approval rule of tool '{call.name}' matched this call"
    if manager_predicate is not None and manager_predicate(call, context):
        return "The tool calling manager's approval rule matched this call"
    if required is None:
        if write_approval == "writes" and not metadata.read_only:
            return f"Tool '{call.name}' can change data (it is not marked read-only)"
        if write_approval == "destructive" and metadata.destructive:
            return f"Tool '{call.name}' is marked destructive"
    return None
