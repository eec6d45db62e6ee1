"""``tooluse mcp``: serve tools as an MCP server, or list an MCP server's tools.

- ``tooluse mcp serve MODULE:ATTR [--http PORT]``: ``ATTR`` of ``MODULE`` (a module name or a
  ``.py`` file) is anything ``tool_callbacks(...)`` takes (a function, a list of functions,
  an object with ``@tool`` methods, ...); served over stdio, or streamable HTTP with
  ``--http``.
- ``tooluse mcp tools -- COMMAND [ARGS...]``, ``tooluse mcp tools --url URL`` or ``tooluse mcp
  tools --config FILE [--server NAME]`` (a server of an MCP configuration file, as ``tooluse
  serve --mcp`` reads it): the tools a server offers, as the model would see them (``--json``
  for names, descriptions and schemas).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import TYPE_CHECKING, Any, Literal

from tooluse.cli._option_types import port_number
from tooluse.cli._targets import TargetError, load_target

if TYPE_CHECKING:  # the mcp extra is imported when a command runs
    from tooluse.mcp._servers import ServerParameters

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "MCP: serve tooluse tools as an MCP server, or list an MCP server's tools."
    commands = parser.add_subparsers(dest="mcp_command", metavar="MCP_COMMAND", required=True)

    serve = commands.add_parser(
        "serve",
        help="serve tools as an MCP server (stdio, or streamable HTTP with --http)",
        description="Serve the tools found at MODULE:ATTR as an MCP server.",
    )
    serve.add_argument(
        "target",
        metavar="MODULE:ATTR",
        help="where the tools are: a module name or a .py file, then the attribute",
    )
    serve.add_argument(
        "--http", metavar="PORT", type=port_number, help="serve over streamable HTTP"
    )
    serve.add_argument("--host", default="127.0.0.1", help="HTTP host")
    serve.add_argument("--path", default="/mcp", help="HTTP path")
    serve.add_argument("--name", default="tooluse", help="the server's name")
    serve.add_argument(
        "--allow-approval-tools",
        action="store_true",
        help="also serve tools that require human approval (MCP clients run them unasked)",
    )
    serve.set_defaults(mcp_run=_serve)

    tools = commands.add_parser(
        "tools",
        help="list the tools of an MCP server",
        description="List the tools of an MCP server: `tooluse mcp tools -- COMMAND [ARGS...]` "
        "for a stdio server, `tooluse mcp tools --url URL` for streamable HTTP, `tooluse mcp "
        "tools --config FILE [--server NAME]` for a server of an MCP configuration file.",
    )
    tools.add_argument("--url", help="a streamable HTTP server's URL")
    tools.add_argument(
        "--config",
        metavar="FILE",
        help='an MCP configuration file ({"mcpServers": ...}, as `tooluse serve --mcp` reads '
        "it: Claude Desktop's, Claude Code's .mcp.json, Cursor's, VS Code's mcp.json)",
    )
    tools.add_argument(
        "--server",
        metavar="NAME",
        help="with --config: the server to list (needed when the file has several)",
    )
    tools.add_argument(
        "--header",
        dest="headers",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="an HTTP header, repeatable (with --url)",
    )
    tools.add_argument("--json", action="store_true", help="names, descriptions and schemas")
    tools.add_argument("--timeout", type=float, default=30.0, help="seconds to wait")
    tools.add_argument("server_command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    tools.set_defaults(mcp_run=_tools)


def run(args: argparse.Namespace) -> int:
    status: int = args.mcp_run(args)
    return status


def _serve(args: argparse.Namespace) -> int:
    from tooluse.mcp._server import ApprovalToolsError, serve_tools

    try:
        tools = load_target(args.target)
    except TargetError as exc:
        print(f"tooluse mcp serve: {exc}", file=sys.stderr)
        return 2
    transport: Literal["stdio", "http"] = "http" if args.http is not None else "stdio"
    if transport == "http":
        print(
            f"tooluse mcp serve: serving {args.target} as MCP server '{args.name}' on "
            f"http://{args.host}:{args.http}{args.path}",
            file=sys.stderr,
        )
    try:
        serve_tools(
            tools,
            name=args.name,
            transport=transport,
            host=args.host,
            port=args.http if args.http is not None else 8000,
            path=args.path,
            allow_approval_tools=args.allow_approval_tools,
        )
    except ApprovalToolsError as exc:  # its message names serve_tools' allow_approval_tools=
        print(
            f"tooluse mcp serve: tools {', '.join(exc.tool_names)} in {args.target} require "
            "human approval, which MCP clients cannot give; leave them out or add "
            "--allow-approval-tools to serve them without approval",
            file=sys.stderr,
        )
        return 2
    except (ValueError, TypeError) as exc:  # no tools, duplicate names
        print(f"tooluse mcp serve: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def _tools(args: argparse.Namespace) -> int:
    from tooluse._sync import run_sync
    from tooluse.mcp._errors import McpServerError

    command = list(args.server_command)
    if command[:1] == ["--"]:
        command = command[1:]
    try:
        server = _server_to_list(args, command)
    except ValueError as exc:  # McpConfigError included: it names the file
        print(f"tooluse mcp tools: {exc}", file=sys.stderr)
        return 2
    try:
        listing = run_sync(
            _list_tools(server, args.timeout),
            sync_name="tooluse mcp tools",
            async_name="_list_tools",
        )
    except McpServerError as exc:
        print(f"tooluse mcp tools: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(listing, ensure_ascii=False, indent=2))
    else:
        for tool in listing:
            summary = tool["description"].strip().splitlines()[0] if tool["description"] else ""
            print(f"{tool['name']}\t{summary}")
    return 0


def _server_to_list(args: argparse.Namespace, command: list[str]) -> ServerParameters:
    """The server the options name; ``ValueError`` saying what is wrong with them."""
    from tooluse.mcp._config import McpConfigError, load_mcp_config
    from tooluse.mcp._servers import HttpServer, StdioServer

    given = [bool(command), args.url is not None, args.config is not None]
    if given.count(True) != 1:
        raise ValueError(
            "give one server: a command after `--`, --url URL, or --config FILE [--server NAME]"
        )
    if args.server is not None and args.config is None:
        raise ValueError("--server NAME picks a server of --config FILE")
    if args.headers and args.url is None:
        raise ValueError("--header goes with --url (a --config file gives its servers' headers)")
    if args.url is not None:
        return HttpServer(args.url, headers=dict(_header(text) for text in args.headers))
    if command:
        return StdioServer(command[0], command[1:])
    try:
        servers = load_mcp_config(args.config)
    except McpConfigError as exc:  # it names the file
        raise ValueError(f"--config {exc}") from exc
    names = ", ".join(server.name for server in servers)
    if args.server is None:
        if len(servers) > 1:
            raise ValueError(
                f"--config {args.config} has {len(servers)} servers ({names}): pick one with "
                f"--server NAME (`tooluse tools --mcp {args.config}` lists all their tools)"
            )
        (server,) = servers
    else:
        picked = [server for server in servers if server.name == args.server]
        if not picked:
            raise ValueError(
                f"--config {args.config} has no server {args.server!r}; its servers: {names}"
            )
        (server,) = picked  # the names are the file's keys: unique
    # Listed even when the file lets the service start without it: here, its failure is the
    # answer, not a server left out.
    return dataclasses.replace(server, required=True)


async def _list_tools(server: ServerParameters, timeout: float) -> list[dict[str, Any]]:
    from tooluse.mcp._provider import McpToolProvider

    async with McpToolProvider(server, connect_timeout=timeout, call_timeout=timeout) as mcp:
        return [
            {
                "name": callback.definition.name,
                "description": callback.definition.description,
                "input_schema": callback.definition.input_schema,
            }
            for callback in mcp.tool_callbacks()
        ]


def _header(text: str) -> tuple[str, str]:
    name, colon, value = text.partition(":")
    if not colon or not name.strip():
        raise ValueError(f"a header must look like NAME:VALUE, got {text!r}")
    return name.strip(), value.strip()
