"""How to reach an MCP server: a command to run (stdio), a URL (streamable HTTP), or an SDK
server object in this process.

Each also says which of the server's tools to take (``include`` / ``exclude``, by the
server's tool names), how its tools are treated (``settings`` for all of them, and
``tool_settings`` per tool name: approval, read-only, who may use them), how to negotiate
the protocol version (``mode``), and whether the provider may start without it
(``required=False``: its tools are left out until it can be reached).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TextIO
from urllib.parse import urlsplit

from mcp import StdioServerParameters
from mcp.server import Server
from mcp.server.mcpserver import MCPServer

from tooluse.calling import ToolAccess

__all__ = [
    "HttpServer",
    "InProcessServer",
    "ProtocolMode",
    "ServerParameters",
    "StdioServer",
    "ToolSettings",
]

ProtocolMode = Literal["auto", "legacy"]
"""How the protocol version is negotiated (the SDK's ``Client(mode=...)``): ``"auto"`` tries
the 2026-07-28 ``server/discover`` and falls back to the ``initialize`` handshake that older
servers speak; ``"legacy"`` goes straight to the handshake."""


@dataclasses.dataclass(frozen=True, slots=True)
class ToolSettings:
    """How the executor treats a server's tools, over what the server says of them.

    - ``approval``: ``"always"`` holds every call for a human, ``"never"`` none (not even
      under a manager's ``write_approval`` policy); ``None``: by that policy.
    - ``read_only``: ``True`` / ``False`` overrides the server's ``readOnlyHint``; ``None``
      takes the hint (a tool without one is a write, as the MCP specification says).
    - ``access``: which tenants and roles may see and use the tools
      (:class:`~tooluse.calling.ToolAccess`); a server's and a tool's both apply, so
      :meth:`over` leaves it as it is (the service's ``ToolAccessPolicy`` reads both).
    """

    approval: Literal["always", "never"] | None = None
    read_only: bool | None = None
    access: ToolAccess | None = None

    def __post_init__(self) -> None:
        if self.approval not in ("always", "never", None):
            raise ValueError(f"approval must be 'always', 'never' or None, got {self.approval!r}")
        if self.read_only not in (True, False, None):
            raise ValueError(f"read_only must be True, False or None, got {self.read_only!r}")
        if self.access is not None and not isinstance(self.access, ToolAccess):
            raise TypeError(f"access takes a ToolAccess, got {self.access!r}")

    def over(self, base: ToolSettings) -> ToolSettings:
        """These settings, with ``base``'s where these are unset."""
        return ToolSettings(
            approval=base.approval if self.approval is None else self.approval,
            read_only=base.read_only if self.read_only is None else self.read_only,
            access=self.access,
        )


@dataclasses.dataclass(frozen=True)
class StdioServer:
    """A server started as a subprocess, speaking MCP over its stdin and stdout:
    ``StdioServer("uvx", ["mcp-server-time"], name="time")``.

    ``env`` is added to the few variables the SDK passes on (``PATH``, ``HOME``, ...), not to
    this process's whole environment. The server's stderr goes to ``errlog`` (this process's
    stderr by default). ``name`` defaults to the command's file name without extension.
    """

    command: str
    args: Sequence[str] = ()
    _: dataclasses.KW_ONLY
    name: str = ""
    env: Mapping[str, str] | None = None
    cwd: str | Path | None = None
    errlog: TextIO | None = dataclasses.field(default=None, repr=False, compare=False)
    include: Collection[str] | None = None
    exclude: Collection[str] = ()
    mode: ProtocolMode = "auto"
    required: bool = True
    settings: ToolSettings = ToolSettings()
    tool_settings: Mapping[str, ToolSettings] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.command, str) or not self.command.strip():
            raise ValueError("StdioServer needs a command to run")
        if isinstance(self.args, str):
            raise TypeError(
                f"StdioServer args must be a list of strings, got the string {self.args!r}"
            )
        object.__setattr__(self, "args", tuple(self.args))
        _check_common(self, default_name=Path(self.command).stem)

    def sdk_target(self) -> StdioServerParameters:
        return StdioServerParameters(
            command=self.command,
            args=list(self.args),
            env=dict(self.env) if self.env is not None else None,
            cwd=self.cwd,
        )

    def accepts(self, tool_name: str) -> bool:
        return _accepts(self, tool_name)

    def settings_for(self, tool_name: str) -> ToolSettings:
        return _settings_for(self, tool_name)


@dataclasses.dataclass(frozen=True)
class HttpServer:
    """A server reached over streamable HTTP: ``HttpServer("http://127.0.0.1:8000/mcp")``.

    ``headers`` go with every request (e.g. ``{"Authorization": "Bearer ..."}``). ``name``
    defaults to the URL's host and port.
    """

    url: str
    _: dataclasses.KW_ONLY
    name: str = ""
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False)
    include: Collection[str] | None = None
    exclude: Collection[str] = ()
    mode: ProtocolMode = "auto"
    required: bool = True
    settings: ToolSettings = ToolSettings()
    tool_settings: Mapping[str, ToolSettings] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"HttpServer needs an http:// or https:// URL, got {self.url!r}")
        object.__setattr__(self, "headers", dict(self.headers))
        _check_common(self, default_name=parts.netloc)

    def accepts(self, tool_name: str) -> bool:
        return _accepts(self, tool_name)

    def settings_for(self, tool_name: str) -> ToolSettings:
        return _settings_for(self, tool_name)


@dataclasses.dataclass(frozen=True)
class InProcessServer:
    """An SDK server object (``mcp.server.Server`` or ``MCPServer``) served in this process,
    with no subprocess or network: for tests, and for servers built in Python (e.g. with
    ``tooluse.mcp.mcp_server(...)``). ``name`` defaults to the server's own name."""

    server: Server[Any] | MCPServer
    _: dataclasses.KW_ONLY
    name: str = ""
    include: Collection[str] | None = None
    exclude: Collection[str] = ()
    mode: ProtocolMode = "auto"
    required: bool = True
    settings: ToolSettings = ToolSettings()
    tool_settings: Mapping[str, ToolSettings] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.server, Server | MCPServer):
            raise TypeError(
                "InProcessServer takes an mcp.server.Server or MCPServer, got "
                f"{type(self.server).__name__}"
            )
        _check_common(self, default_name=self.server.name)

    def accepts(self, tool_name: str) -> bool:
        return _accepts(self, tool_name)

    def settings_for(self, tool_name: str) -> ToolSettings:
        return _settings_for(self, tool_name)


ServerParameters = StdioServer | HttpServer | InProcessServer
"""Any of the ways to reach an MCP server."""


def _check_common(server: ServerParameters, *, default_name: str) -> None:
    if not server.name:
        object.__setattr__(server, "name", default_name)
    if not server.name.strip():
        raise ValueError(f"An MCP server name cannot be blank: {server!r}")
    if isinstance(server.include, str) or isinstance(server.exclude, str):
        raise TypeError(
            f"MCP server '{server.name}': include= and exclude= take collections of tool "
            "names, not a single string"
        )
    if server.include is not None:
        object.__setattr__(server, "include", frozenset(server.include))
    object.__setattr__(server, "exclude", frozenset(server.exclude))
    object.__setattr__(server, "tool_settings", dict(server.tool_settings))
    wrong = [
        name
        for name, value in (("*", server.settings), *server.tool_settings.items())
        if not isinstance(value, ToolSettings)
    ]
    if wrong:
        raise TypeError(
            f"MCP server '{server.name}': settings= and tool_settings= take ToolSettings "
            f"(wrong for {', '.join(wrong)})"
        )
    if server.mode not in ("auto", "legacy"):
        raise ValueError(
            f"MCP server '{server.name}': mode must be 'auto' or 'legacy', got {server.mode!r}"
        )


def _accepts(server: ServerParameters, tool_name: str) -> bool:
    if server.include is not None and tool_name not in server.include:
        return False
    return tool_name not in server.exclude


def _settings_for(server: ServerParameters, tool_name: str) -> ToolSettings:
    own = server.tool_settings.get(tool_name)
    return server.settings if own is None else own.over(server.settings)
