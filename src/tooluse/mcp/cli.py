"""``tooluse mcp``: serve tools as an MCP server, or list an MCP server's tools.

- ``tooluse mcp serve MODULE:ATTR [--http PORT]``: ``ATTR`` of ``MODULE`` (a module name or a
  ``.py`` file) is anything ``tool_callbacks(...)`` takes (a function, a list of functions,
  an object with ``@tool`` methods, ...); served over stdio, or streamable HTTP with
  ``--http``.
- ``tooluse mcp tools -- COMMAND [ARGS...]`` or ``tooluse mcp tools --url URL``: the tools a
  server offers, as the model would see them (``--json`` for names, descriptions and schemas).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Literal

from tooluse._targets import TargetError, load_target
from tooluse.cli import port_number

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
        "for a stdio server, `tooluse mcp tools --url URL` for streamable HTTP.",
    )
    tools.add_argument("--url", help="a streamable HTTP server's URL")
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
    if bool(command) == bool(args.url):
        print(
            "tooluse mcp tools: give either a server command after `--` or --url URL",
            file=sys.stderr,
        )
        return 2
    try:
        headers = dict(_header(text) for text in args.headers)
        listing = run_sync(
            _list_tools(command, args.url, headers, args.timeout),
            sync_name="tooluse mcp tools",
            async_name="_list_tools",
        )
    except (ValueError, McpServerError) as exc:
        print(f"tooluse mcp tools: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(listing, ensure_ascii=False, indent=2))
    else:
        for tool in listing:
            summary = tool["description"].strip().splitlines()[0] if tool["description"] else ""
            print(f"{tool['name']}\t{summary}")
    return 0


async def _list_tools(
    command: list[str], url: str | None, headers: dict[str, str], timeout: float
) -> list[dict[str, Any]]:
    from tooluse.mcp._provider import McpToolProvider
    from tooluse.mcp._servers import HttpServer, ServerParameters, StdioServer

    server: ServerParameters = (
        HttpServer(url, headers=headers) if url else StdioServer(command[0], command[1:])
    )
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
