"""The audit log: one record per tool call, whatever became of it.

Who asked (user, tenant, their roles, conversation) comes from the tool context, which the
application fills from the request (the service from its authentication and the request's
conversation): never from the model's arguments. Each record also holds the tool, its
arguments, its result or error, how long it ran, what became of it (``ran``, ``failed``,
``repeat``, ``refused``, ``held``) and the approval decision with who gave it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, Protocol, runtime_checkable

from tooluse.tools import ToolContext

__all__ = [
    "CONVERSATION_ID_KEY",
    "DEFAULT_AUDIT_RETENTION",
    "ROLES_KEY",
    "TENANT_ID_KEY",
    "USER_ID_KEY",
    "AuditRecord",
    "AuditSink",
    "caller_of",
    "roles_of",
]

USER_ID_KEY: Final = "user_id"
"""The tool-context key of the user a call is made for (set by the application)."""
TENANT_ID_KEY: Final = "tenant_id"
"""The tool-context key of the user's tenant."""
ROLES_KEY: Final = "roles"
"""The tool-context key of the caller's roles (a list of names)."""
CONVERSATION_ID_KEY: Final = "conversation_id"
"""The tool-context key of the conversation."""

TENANT_ATTRIBUTE: Final = "tooluse.tenant.id"  # a tool span's; OpenTelemetry has none

DEFAULT_AUDIT_RETENTION: Final = 90 * 24 * 3600.0
"""Seconds a record is kept: a quarter, long enough to look into a complaint."""
DEFAULT_MAX_AUDIT_RECORDS: Final = 1_000_000
DEFAULT_MAX_AUDIT_TEXT: Final = 4_000  # characters kept of the arguments and of the result

Outcome = Literal["ran", "failed", "repeat", "refused", "held"]
Approval = Literal["not needed", "pending", "approved", "denied"]


@dataclasses.dataclass(frozen=True, slots=True)
class AuditRecord:
    """One tool call. ``latency_ms`` is ``None`` for a call that did not run; ``approved_by``
    is who decided (``None``: not given, or no decision was needed); ``roles``: the
    caller's, sorted (empty also in records written before the log kept them)."""

    at: float
    tool: str
    call_id: str
    arguments: str
    outcome: Outcome
    result: str
    is_error: bool
    latency_ms: float | None
    approval: Approval
    approved_by: str | None
    user: str | None
    tenant: str | None
    conversation: str | None
    roles: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def caller_of(context: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """``(user, tenant, conversation)`` from a tool context (``None`` where unset)."""

    def text(key: str) -> str | None:
        value = context.get(key)
        return None if value is None else str(value)

    return text(USER_ID_KEY), text(TENANT_ID_KEY), text(CONVERSATION_ID_KEY)


def roles_of(context: Mapping[str, Any]) -> tuple[str, ...]:
    """The caller's roles in a tool context, sorted (one role given as a string is that
    role, not its letters)."""
    roles = context.get(ROLES_KEY) or ()
    if isinstance(roles, str):
        roles = (roles,)
    return tuple(sorted({str(role) for role in roles}))


@runtime_checkable
class AuditSink(Protocol):
    """Where audit records go: :class:`SqliteAuditLog` by default in the service,
    :class:`PostgresAuditLog` for the workers sharing a database; a log shipper. ``record``
    gets a round's records at once; an exception it raises reaches the caller (an audit
    that silently stops is no audit)."""

    async def record(self, records: Sequence[AuditRecord]) -> None: ...


def identity_attributes(context: ToolContext) -> dict[str, str]:
    """The OpenTelemetry attributes of the caller of a tool span (those set)."""
    user, tenant, conversation = caller_of(context)
    found = {
        "enduser.id": user,
        TENANT_ATTRIBUTE: tenant,
        "gen_ai.conversation.id": conversation,
    }
    return {key: value for key, value in found.items() if value is not None}
