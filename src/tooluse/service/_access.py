"""Which tools each caller of the service may see and use: the rules of a tool-access file,
of ``mcp.json``'s ``"tooluse"`` section, and any :class:`~tooluse.calling.ToolVisibility`
given in code, all of which must allow a tool."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tooluse.calling import Caller, ToolAccess, ToolAccessPolicy, ToolVisibility
from tooluse.calling._access import ACCESS_FIELDS, tool_access_from_json
from tooluse.tools import ToolCallback

if TYPE_CHECKING:
    from tooluse.mcp import ServerParameters

__all__ = ["load_tool_access", "service_tool_visibility"]


def load_tool_access(path: str | os.PathLike[str]) -> ToolAccessPolicy:
    """The rules of a tool-access file (``tooluse serve --tool-access FILE``)::

        {"default": {"denyTenants": ["trial"]},
         "tools": {"cancel_order": {"allowRoles": ["support"]},
                   "get_weather": {"allowTenants": ["acme", "globex"]}}}

    Each rule has ``allowTenants``, ``denyTenants``, ``allowRoles``, ``denyRoles`` (lists
    of names, :class:`~tooluse.calling.ToolAccess`); ``default`` applies to every tool,
    ``tools`` by the name the model sees. ``ValueError`` names the file and the field."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{file}: cannot read the tool access rules: {exc}") from exc
    if not isinstance(data, dict) or set(data) - {"default", "tools"}:
        raise ValueError(f'{file} must be an object with "default" and/or "tools"')
    default = _rule(data.get("default", {}), f'{file}: "default"') or ToolAccess()
    tools = data.get("tools", {})
    if not isinstance(tools, dict):
        raise ValueError(f'{file}: "tools" must be an object of rules by tool name')
    rules = {
        name: _rule(entry, f'{file}: "tools".{json.dumps(name)}') for name, entry in tools.items()
    }
    return ToolAccessPolicy(
        default=default, tools={name: rule for name, rule in rules.items() if rule is not None}
    )


def _rule(entry: Any, where: str) -> ToolAccess | None:
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be an object with {', '.join(ACCESS_FIELDS)}")
    unknown = sorted(set(entry) - set(ACCESS_FIELDS))
    if unknown:
        raise ValueError(
            f"{where}: {', '.join(unknown)}: the fields are {', '.join(ACCESS_FIELDS)}"
        )
    return tool_access_from_json(entry, where)


def _mcp_rules(servers: Sequence[ServerParameters]) -> ToolAccessPolicy | None:
    """The access rules ``mcp.json`` (or the servers' ``settings``) gives; ``None``: none."""
    per_server = {s.name: s.settings.access for s in servers if s.settings.access is not None}
    per_tool = {
        server.name: {
            tool: settings.access
            for tool, settings in server.tool_settings.items()
            if settings.access is not None
        }
        for server in servers
    }
    per_tool = {server: rules for server, rules in per_tool.items() if rules}
    if not per_server and not per_tool:
        return None
    return ToolAccessPolicy(servers=per_server, server_tools=per_tool)


class _AllOf:
    """A :class:`ToolVisibility` that every one of its policies must allow."""

    def __init__(self, *policies: ToolVisibility) -> None:
        self.policies = policies

    def allows(self, caller: Caller, tool: ToolCallback) -> bool:
        return all(policy.allows(caller, tool) for policy in self.policies)


def service_tool_visibility(
    visibility: ToolVisibility | None, servers: Sequence[ServerParameters]
) -> ToolVisibility | None:
    """``visibility`` (the service's, in code or from a tool-access file) and the MCP
    servers' rules together; ``None`` when neither says anything."""
    policies = [p for p in (visibility, _mcp_rules(servers)) if p is not None]
    if len(policies) <= 1:
        return policies[0] if policies else None
    return _AllOf(*policies)
