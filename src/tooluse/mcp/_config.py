"""MCP servers from a JSON configuration file, in the format MCP clients share.

Claude Desktop (``claude_desktop_config.json``), Claude Code (``.mcp.json``) and Cursor
(``.cursor/mcp.json``) keep their servers under ``"mcpServers"``; VS Code
(``.vscode/mcp.json``) under ``"servers"``. Each server is named by its key::

    {"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
        "crm": {"type": "http", "url": "https://crm.example/mcp",
                "headers": {"Authorization": "Bearer ${CRM_TOKEN}"}}
    }}

A server with ``command`` runs over stdio, one with ``url`` over streamable HTTP; ``type``
(``"stdio"``, ``"http"``, ``"streamable-http"``) may say so, as Claude Code and VS Code
write it. ``${VAR}``, ``${VAR:-default}`` and ``${env:VAR}`` in ``command``, ``args``,
``env``, ``cwd``, ``url`` and ``headers`` are replaced by this process's environment
variables (Claude Code's and Cursor's expansion), so secrets stay out of the file.

Beyond the clients' fields, ``required`` (``false``: start without the server while it is
down), ``include`` / ``exclude`` (its tool names) and ``mode`` (``"auto"`` or ``"legacy"``)
are ``tooluse`` settings. Anything else is an error naming the field: a server that would
quietly run without a setting it was given (an ``envFile``, a transport we do not speak)
is worse than one that does not start.

How tools are treated (approval, read-only) and which are offered can also be said in a
top-level ``"tooluse"`` object, so the file still works unchanged in the clients: they
validate each server entry against their own schema (Claude Code reports an entry with a
field it does not know as not adhering to it, Claude Desktop skips it), while top-level keys
they do not know are left alone (Claude Desktop's file keeps its ``"preferences"`` there)::

    {"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}},
     "tooluse": {"servers": {"git": {
         "approval": "always",
         "exclude": ["git_reset"],
         "tools": {"git_status": {"readOnly": true, "approval": "never"}}}}}}

Per server: ``approval`` (``"always"``, ``"never"``, or ``"auto"``: by the tool's kind and
the service's policy, the default), ``readOnly`` (overrides the server's ``readOnlyHint``),
``allowTenants`` / ``denyTenants`` / ``allowRoles`` / ``denyRoles`` (who may see and use
its tools: :class:`~tooluse.calling.ToolAccess`), ``include`` / ``exclude`` (not also in
the server entry), and ``tools``: the same ``approval``, ``readOnly`` and access lists per
tool name (approval and read-only over the server's; access besides the server's).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from tooluse.calling import ToolAccess
from tooluse.calling._access import ACCESS_FIELDS, tool_access_from_json
from tooluse.mcp._servers import HttpServer, ServerParameters, StdioServer, ToolSettings

__all__ = ["McpConfigError", "load_mcp_config", "mcp_servers_from_config"]


class McpConfigError(ValueError):
    """An MCP configuration that cannot be used; the message names the file, the server and
    the field, and says what would work."""


_SERVER_KEYS: Final = ("mcpServers", "servers")  # Claude Desktop, Claude Code, Cursor; VS Code
_HTTP_TYPES: Final = ("http", "streamable-http", "streamableHttp")
_TYPES: Final = ("stdio", *_HTTP_TYPES)
_SETTINGS_KEY: Final = "tooluse"
_TOOL_SETTINGS_FIELDS: Final = ("approval", "readOnly", *ACCESS_FIELDS)
_SETTINGS_FIELDS: Final = (*_TOOL_SETTINGS_FIELDS, "include", "exclude", "tools")
_COMMON_FIELDS: Final = ("type", "required", "include", "exclude", "mode")
_STDIO_FIELDS: Final = ("command", "args", "env", "cwd", *_COMMON_FIELDS)
_HTTP_FIELDS: Final = ("url", "headers", *_COMMON_FIELDS)
# Fields other clients know that would change what the server does: said why, not just "unknown".
_UNSUPPORTED: Final = {
    "envFile": 'is not supported; put the variables in "env" (values may use ${VAR})',
    "transport": 'is not a field of this format; "type" says "stdio" or "http"',
    "serverUrl": 'is not a field of this format; use "url"',
}
# ${NAME}, ${NAME:-default} (Claude Code), ${env:NAME} (Cursor, VS Code); any other ${...}
# (${input:...}, ${workspaceFolder}, ...) needs a client's UI or workspace, and is refused.
_VARIABLE: Final = re.compile(r"\$\{([^}]*)\}")
_NAME: Final = r"[A-Za-z_][A-Za-z0-9_]*"
_ENV_REFERENCE: Final = re.compile(rf"(?:env:)?(?P<name>{_NAME})(?::-(?P<default>.*))?", re.DOTALL)


def load_mcp_config(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> tuple[ServerParameters, ...]:
    """The servers of the MCP configuration file at ``path`` (see the module docstring), as
    ``StdioServer`` / ``HttpServer`` parameters for ``McpToolProvider``. A relative ``cwd``
    is taken from the file's directory; relative paths in ``command`` and ``args`` are left
    as written, for the server's working directory, as MCP clients leave them (see
    docs/service.md). Raises :class:`McpConfigError`."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise McpConfigError(f"{file}: cannot read the MCP configuration: {exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise McpConfigError(f"{file} is not valid JSON: {exc}") from exc
    return mcp_servers_from_config(data, where=str(file), base_dir=file.parent, environ=environ)


def mcp_servers_from_config(
    config: object,
    *,
    where: str = "the MCP configuration",
    base_dir: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[ServerParameters, ...]:
    """The servers of a parsed MCP configuration (``{"mcpServers": {...}}``), in the order
    given. ``where`` names it in errors; a relative ``cwd`` is taken from ``base_dir`` (the
    working directory when ``None``); ``${VAR}`` comes from ``environ`` (``os.environ``).
    Other top-level keys are left alone (the clients' files hold their other settings too).
    Raises :class:`McpConfigError`."""
    if not isinstance(config, dict):
        raise McpConfigError(
            f'{where} must be a JSON object with "mcpServers", got {_json_type(config)}'
        )
    present = [key for key in _SERVER_KEYS if key in config]
    if not present:
        raise McpConfigError(
            f'{where} has no "mcpServers" object: write {{"mcpServers": {{"NAME": '
            '{"command": "...", "args": [...]}}} (or "servers", as VS Code does)'
        )
    if len(present) > 1:
        raise McpConfigError(f'{where} has both "mcpServers" and "servers": keep one')
    key = present[0]
    servers = config[key]
    if not isinstance(servers, dict):
        raise McpConfigError(
            f'{where}: "{key}" must be an object of servers by name, got {_json_type(servers)}'
        )
    if not servers:
        raise McpConfigError(f'{where}: "{key}" has no servers')
    expand = _Expander(os.environ if environ is None else environ)
    settings = _tooluse_settings(config.get(_SETTINGS_KEY), servers, where, expand)
    return tuple(
        _server(name, entry, f"{where}: server {name!r}", base_dir, expand, settings.get(name))
        for name, entry in servers.items()
    )


def _tooluse_settings(
    section: object, servers: dict[str, Any], where: str, expand: _Expander
) -> dict[str, dict[str, Any]]:
    """The ``"tooluse"`` section's parameters per server name (see the module docstring)."""
    if section is None:
        return {}
    place = f'{where}: "{_SETTINGS_KEY}"'
    if not isinstance(section, dict):
        raise McpConfigError(f"{place} must be an object, got {_json_type(section)}")
    extra = sorted(set(section) - {"servers"})
    if extra:
        raise McpConfigError(f'{place}: {", ".join(map(json.dumps, extra))}: only "servers"')
    entries = section.get("servers", {})
    if not isinstance(entries, dict):
        raise McpConfigError(f'{place}."servers" must be an object, got {_json_type(entries)}')
    unknown = sorted(set(entries) - set(servers))
    if unknown:
        raise McpConfigError(
            f'{place}."servers" names {", ".join(map(repr, unknown))}, which are not in the '
            f"servers ({', '.join(map(repr, servers))})"
        )
    parameters: dict[str, dict[str, Any]] = {}
    for name, entry in entries.items():
        server_where = f'{place}."servers".{json.dumps(name)}'
        if not isinstance(entry, dict):
            raise McpConfigError(f"{server_where} must be an object, got {_json_type(entry)}")
        fields = _Fields(entry, server_where, expand)
        fields.check_known(_SETTINGS_FIELDS, "the tooluse settings of a")
        tools = entry.get("tools", {})
        if not isinstance(tools, dict):
            raise McpConfigError(
                f'{server_where}: "tools" must be an object of tool names, got {_json_type(tools)}'
            )
        found: dict[str, Any] = {
            "settings": _tool_settings(fields),
            "tool_settings": {
                tool: _tool_settings(_tool_fields(tool, value, server_where, expand))
                for tool, value in tools.items()
            },
        }
        for listed in ("include", "exclude"):
            names = fields.names(listed)
            if names is not None:
                found[listed] = names
        parameters[name] = found
    return parameters


def _tool_fields(tool: str, entry: object, where: str, expand: _Expander) -> _Fields:
    tool_where = f'{where}: "tools".{json.dumps(tool)}'
    if not isinstance(entry, dict):
        raise McpConfigError(f"{tool_where} must be an object, got {_json_type(entry)}")
    fields = _Fields(entry, tool_where, expand)
    fields.check_known(_TOOL_SETTINGS_FIELDS, "the settings of a tool of a")
    return fields


def _tool_settings(fields: _Fields) -> ToolSettings:
    approval = fields.choice("approval", ("auto", "always", "never"), default="auto")
    read_only = fields.optional_flag("readOnly")
    return ToolSettings(
        approval="always" if approval == "always" else "never" if approval == "never" else None,
        read_only=read_only,
        access=fields.access(),
    )


def _server(
    name: str,
    entry: object,
    where: str,
    base_dir: str | os.PathLike[str] | None,
    expand: _Expander,
    settings: dict[str, Any] | None,
) -> ServerParameters:
    if not name.strip():
        raise McpConfigError(f"{where}: a server needs a non-blank name")
    if not isinstance(entry, dict):
        raise McpConfigError(f"{where} must be an object, got {_json_type(entry)}")
    fields = _Fields(entry, where, expand)
    http = _is_http(entry, where)
    fields.check_known(_HTTP_FIELDS if http else _STDIO_FIELDS, "an HTTP" if http else "a stdio")
    parameters: dict[str, Any] = {
        "name": name,
        "required": fields.flag("required", default=True),
        "exclude": fields.names("exclude") or (),
        "mode": fields.choice("mode", ("auto", "legacy"), default="auto"),
    }
    include = fields.names("include")
    if include is not None:
        parameters["include"] = include
    if settings is not None:
        both = [f for f in ("include", "exclude") if f in settings and f in entry]
        if both:
            raise McpConfigError(
                f"{where}: {' and '.join(map(json.dumps, both))} given both in the server entry "
                f'and in "{_SETTINGS_KEY}": keep one'
            )
        parameters.update(settings)
    kind: type[StdioServer] | type[HttpServer]
    if http:
        kind = HttpServer
        parameters.update(url=fields.text("url"), headers=fields.table("headers"))
    else:
        kind = StdioServer
        parameters.update(command=fields.text("command"), args=fields.texts("args"))
        if "env" in entry:
            parameters["env"] = fields.table("env")
        cwd = fields.optional_text("cwd")
        if cwd is not None:
            parameters["cwd"] = Path(base_dir or ".", Path(cwd).expanduser())
    try:
        return kind(**parameters)
    except (ValueError, TypeError) as exc:  # what StdioServer / HttpServer check themselves
        raise McpConfigError(f"{where}: {exc}") from exc


def _is_http(entry: dict[str, Any], where: str) -> bool:
    kind = entry.get("type")
    if kind is None:  # Claude Desktop and Cursor: the fields say it
        if "command" in entry and "url" in entry:
            raise McpConfigError(
                f'{where} has both "command" (stdio) and "url" (HTTP): keep the one to use'
            )
        if "command" not in entry and "url" not in entry:
            raise McpConfigError(
                f'{where} needs "command" (a server to run over stdio) or "url" (a streamable '
                "HTTP server)"
            )
        return "url" in entry
    if kind == "sse":
        raise McpConfigError(
            f'{where}: "type": "sse" (the deprecated HTTP+SSE transport) is not supported, '
            "only streamable HTTP: if the server also serves it (often at a URL ending in "
            '/mcp rather than /sse), use that URL with "type": "http"'
        )
    if kind not in _TYPES:
        raise McpConfigError(
            f'{where}: "type" must be one of {", ".join(map(json.dumps, _TYPES))}, got '
            f"{json.dumps(kind)}"
        )
    return kind in _HTTP_TYPES


class _Fields:
    """Typed reads of one server entry's fields, with errors naming the field."""

    def __init__(self, entry: dict[str, Any], where: str, expand: _Expander) -> None:
        self._entry = entry
        self._where = where
        self._expand = expand

    def check_known(self, known: tuple[str, ...], kind: str) -> None:
        for field in self._entry:
            if field in known:
                continue
            reason = _UNSUPPORTED.get(field)
            if reason is None and field in (*_STDIO_FIELDS, *_HTTP_FIELDS):  # the other kind's
                reason = f"is not a field of {kind} server (it has {', '.join(known)})"
            elif reason is None:
                reason = f"is not supported (the fields are {', '.join(known)}); remove it"
            raise McpConfigError(f'{self._where}: "{field}" {reason}')

    def _error(self, field: str, wanted: str, value: object) -> McpConfigError:
        return McpConfigError(f'{self._where}: "{field}" must be {wanted}, got {_json_type(value)}')

    def optional_text(self, field: str) -> str | None:
        return None if self._entry.get(field) is None else self.text(field)

    def text(self, field: str) -> str:
        value = self._entry.get(field)
        if not isinstance(value, str) or not value.strip():
            raise self._error(field, "a non-blank string", value)
        return self._expand(value, f'{self._where}: "{field}"')

    def texts(self, field: str) -> list[str]:
        value = self._entry.get(field, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self._error(field, "a list of strings", value)
        return [
            self._expand(item, f'{self._where}: "{field}"[{n}]') for n, item in enumerate(value)
        ]

    def table(self, field: str) -> dict[str, str]:
        value = self._entry.get(field, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise self._error(field, 'an object of strings (e.g. {"NAME": "value"})', value)
        return {
            key: self._expand(item, f'{self._where}: "{field}"."{key}"')
            for key, item in value.items()
        }

    def names(self, field: str) -> list[str] | None:
        value = self._entry.get(field)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self._error(field, "a list of tool names", value)
        return value

    def access(self) -> ToolAccess | None:
        try:
            return tool_access_from_json(self._entry, self._where)
        except ValueError as exc:
            raise McpConfigError(str(exc)) from exc

    def flag(self, field: str, *, default: bool) -> bool:
        value = self._entry.get(field, default)
        if not isinstance(value, bool):
            raise self._error(field, "true or false", value)
        return value

    def optional_flag(self, field: str) -> bool | None:
        return None if self._entry.get(field) is None else self.flag(field, default=False)

    def choice(self, field: str, choices: tuple[str, ...], *, default: str) -> str:
        value = self._entry.get(field, default)
        if value not in choices:
            raise self._error(field, " or ".join(map(json.dumps, choices)), value)
        return str(value)


class _Expander:
    """``${VAR}``, ``${VAR:-default}`` and ``${env:VAR}`` in a value, from ``environ``."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ

    def __call__(self, value: str, where: str) -> str:
        return _VARIABLE.sub(self._replacer(where), value)

    def _replacer(self, where: str) -> Callable[[re.Match[str]], str]:
        def replace(match: re.Match[str]) -> str:
            reference = _ENV_REFERENCE.fullmatch(match.group(1))
            if reference is None:
                raise McpConfigError(
                    f"{where}: {match.group(0)} is not supported: only environment variables "
                    "are, as ${NAME}, ${NAME:-default} or ${env:NAME}"
                )
            name, default = reference.group("name"), reference.group("default")
            value = self._environ.get(name)
            if value is not None:
                return value
            if default is not None:
                return default
            raise McpConfigError(
                f"{where} uses the environment variable {name}, which is not set (set it, or "
                f"give a default: ${{{name}:-value}})"
            )

        return replace


def _json_type(value: object) -> str:
    """A value as the error shows it: the JSON type, with the value when it is short."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    kind = names.get(type(value), "a number" if isinstance(value, int | float) else "a value")
    shown = json.dumps(value, ensure_ascii=False, default=str)
    return f"{kind} {shown}" if len(shown) <= 40 else kind
