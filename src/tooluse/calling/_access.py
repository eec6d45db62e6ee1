"""Who a tool call is made for, and which tools they may see and use.

The application puts the caller into the tool context from its own authentication (the
service from its authenticators), never from the model's arguments: ``user_id``,
``tenant_id`` and ``roles`` (:class:`Caller` reads and writes them). A
:class:`ToolVisibility` policy, given the caller and a tool, says whether the tool exists
for them: the loop cuts the tools it offers (and that tool search indexes) to those, and the
manager treats any other as an unknown tool, so a hidden tool is never offered, never found
and never run. :class:`ToolAccessPolicy` is the declarative one: allow and deny lists of
tenants and roles, for every tool, per tool name and per MCP server (and its tools).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final, Protocol, runtime_checkable

from tooluse.calling._audit import ROLES_KEY, TENANT_ID_KEY, USER_ID_KEY, roles_of
from tooluse.tools import ToolCallback

__all__ = [
    "ACCESS_FIELDS",
    "ROLES_KEY",
    "Caller",
    "ToolAccess",
    "ToolAccessPolicy",
    "ToolVisibility",
    "tool_access_from_json",
    "tool_origin",
]


def _names(what: str, values: Iterable[str] | None) -> frozenset[str] | None:
    if values is None:
        return None
    if isinstance(values, str):  # "admin" would be the roles a, d, m, i, n
        raise TypeError(f"{what} takes a list of names, got the string {values!r}")
    names = frozenset(values)
    wrong = [name for name in names if not isinstance(name, str) or not name.strip()]
    if wrong:
        raise ValueError(f"{what} must be non-blank strings, got {sorted(map(repr, wrong))}")
    return names


@dataclasses.dataclass(frozen=True, slots=True)
class Caller:
    """The user a request is made for, their tenant and roles: ``None`` / empty for an
    anonymous caller (an open service, or its one shared key)."""

    user_id: str | None = None
    tenant_id: str | None = None
    roles: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for what, value in (("user_id", self.user_id), ("tenant_id", self.tenant_id)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"{what} must be a non-blank string or None, got {value!r}")
        object.__setattr__(self, "roles", _names("roles", self.roles) or frozenset())

    @classmethod
    def of(cls, context: Mapping[str, Any]) -> Caller:
        """The caller a tool context names (the keys :meth:`tool_context` writes)."""
        user, tenant = context.get(USER_ID_KEY), context.get(TENANT_ID_KEY)
        return cls(
            None if user is None else str(user),
            None if tenant is None else str(tenant),
            frozenset(roles_of(context)),
        )

    def tool_context(self) -> dict[str, Any]:
        """The tool-context entries for this caller (JSON, so a paused run's state keeps
        them); the roles always, so they replace a paused run's older ones on resume."""
        entries: dict[str, Any] = {ROLES_KEY: sorted(self.roles)}
        if self.user_id is not None:
            entries[USER_ID_KEY] = self.user_id
        if self.tenant_id is not None:
            entries[TENANT_ID_KEY] = self.tenant_id
        return entries


@runtime_checkable
class ToolVisibility(Protocol):
    """Whether ``caller`` may see and use ``tool``. Asked for every tool of every request:
    keep it cheap (no I/O)."""

    def allows(self, caller: Caller, tool: ToolCallback) -> bool: ...


@dataclasses.dataclass(frozen=True, slots=True)
class ToolAccess:
    """Allow and deny lists: the caller's tenant must be in ``allow_tenants`` (when given)
    and not in ``deny_tenants``; they must have one of ``allow_roles`` (when given) and
    none of ``deny_roles``. A caller without a tenant fails an allow list of tenants."""

    allow_tenants: Collection[str] | None = None
    deny_tenants: Collection[str] = ()
    allow_roles: Collection[str] | None = None
    deny_roles: Collection[str] = ()

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            names = _names(field.name, getattr(self, field.name))
            object.__setattr__(self, field.name, names)

    def permits(self, caller: Caller) -> bool:
        tenant, roles = caller.tenant_id, caller.roles
        allow_tenants, allow_roles = self.allow_tenants, self.allow_roles
        if allow_tenants is not None and tenant not in allow_tenants:
            return False
        if tenant is not None and tenant in self.deny_tenants:
            return False
        if allow_roles is not None and roles.isdisjoint(allow_roles):
            return False
        return roles.isdisjoint(self.deny_roles)


_ANYONE: Final = ToolAccess()


def tool_origin(tool: ToolCallback) -> tuple[str, str] | None:
    """``(server, name on the server)`` of an MCP tool; ``None`` for other tools. A wrapper
    that exposes the tool it wraps as ``delegate`` (the QA pipeline's recording tools) is
    looked through."""
    seen: set[int] = set()
    callback: object = tool
    while not hasattr(callback, "server_name") and id(callback) not in seen:
        seen.add(id(callback))
        callback = getattr(callback, "delegate", callback)
    server = getattr(callback, "server_name", None)
    if not isinstance(server, str) or not server.strip():
        return None
    original = getattr(callback, "original_name", None)
    return server, original if isinstance(original, str) else tool.definition.name


class ToolAccessPolicy:
    """The declarative :class:`ToolVisibility`: every rule that applies to a tool must
    permit the caller (a rule narrows, never widens): ``default`` (every tool), ``tools``
    (by the name the model sees), ``servers`` (every tool of an MCP server, by its name)
    and ``server_tools`` (a server's tool, by its name on the server)."""

    def __init__(
        self,
        *,
        default: ToolAccess = _ANYONE,
        tools: Mapping[str, ToolAccess] | None = None,
        servers: Mapping[str, ToolAccess] | None = None,
        server_tools: Mapping[str, Mapping[str, ToolAccess]] | None = None,
    ) -> None:
        self.default = default
        self.tools = dict(tools or {})
        self.servers = dict(servers or {})
        self.server_tools = {server: dict(rules) for server, rules in (server_tools or {}).items()}
        rules = [default, *self.tools.values(), *self.servers.values()]
        rules += [rule for per_server in self.server_tools.values() for rule in per_server.values()]
        wrong = [rule for rule in rules if not isinstance(rule, ToolAccess)]
        if wrong:
            raise TypeError(f"ToolAccessPolicy takes ToolAccess rules, got {wrong[0]!r}")

    def __repr__(self) -> str:
        return (
            f"ToolAccessPolicy(default={self.default!r}, tools={self.tools!r}, "
            f"servers={self.servers!r}, server_tools={self.server_tools!r})"
        )

    def allows(self, caller: Caller, tool: ToolCallback) -> bool:
        if not self.default.permits(caller):
            return False
        rule = self.tools.get(tool.definition.name)
        if rule is not None and not rule.permits(caller):
            return False
        if not self.servers and not self.server_tools:
            return True
        origin = tool_origin(tool)
        if origin is None:
            return True
        server, name = origin
        rule = self.servers.get(server)
        if rule is not None and not rule.permits(caller):
            return False
        rule = self.server_tools.get(server, {}).get(name)
        return rule is None or rule.permits(caller)


_RULE_FIELDS: Final = {
    "allowTenants": "allow_tenants",
    "denyTenants": "deny_tenants",
    "allowRoles": "allow_roles",
    "denyRoles": "deny_roles",
}
ACCESS_FIELDS: Final = tuple(_RULE_FIELDS)
"""The JSON fields of a :class:`ToolAccess` (in ``mcp.json``'s ``"tooluse"`` section and
the service's tool-access file)."""


def tool_access_from_json(entry: Mapping[str, Any], where: str) -> ToolAccess | None:
    """The :class:`ToolAccess` of the :data:`ACCESS_FIELDS` in a JSON object (other fields
    are the caller's to check); ``None`` when it has none. ``ValueError`` names ``where``
    and the field."""
    given: dict[str, list[str]] = {}
    for field, parameter in _RULE_FIELDS.items():
        value = entry.get(field)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise ValueError(f'{where}: "{field}" must be a list of names, got {value!r:.60}')
        given[parameter] = value
    return ToolAccess(**given) if given else None
