"""``tooluse tools``: the tools ``tooluse serve`` and ``tooluse chat`` would offer the model."""

from __future__ import annotations

import argparse
import json
import sys

from tooluse.cli._options import OptionError, add_tools_argument, tools_from_arguments
from tooluse.search import mcp_server_category
from tooluse.tools import ToolCallback

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "List the tools the model is offered: the sample tools, or those --tools and --mcp "
        "name (MCP servers are started to list theirs, then stopped). One "
        "line per tool: its name, its marks ([return direct], [approval], [sequential], "
        "[read-only] or [destructive], [mcp: SERVER] for an MCP server's tool) and the first "
        "line of its description; --json prints the definitions the model sees."
    )
    add_tools_argument(parser)
    parser.add_argument(
        "--json", action="store_true", help="print each tool's definition and metadata as JSON"
    )


def run(args: argparse.Namespace) -> int:
    try:
        callbacks = tools_from_arguments(args)
    except OptionError as exc:
        print(f"tooluse tools: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([_described(c) for c in callbacks], ensure_ascii=False, indent=2))
        return 0
    for callback in callbacks:
        definition = callback.definition
        lines = definition.description.strip().splitlines()
        marks = "".join(f"[{mark}] " for mark in _marks(callback))
        print(f"{definition.name}\t{marks}{lines[0] if lines else ''}")
    return 0


def _marks(callback: ToolCallback) -> list[str]:
    metadata = callback.metadata
    marks = []
    if metadata.return_direct:
        marks.append("return direct")
    if metadata.requires_approval:  # True, or a predicate deciding per call
        marks.append("approval")
    if metadata.sequential:
        marks.append("sequential")
    if metadata.read_only:
        marks.append("read-only")
    elif metadata.destructive:
        marks.append("destructive")
    server = mcp_server_category(callback)
    if server is not None:
        marks.append(f"mcp: {server}")
    return marks


def _described(callback: ToolCallback) -> dict[str, object]:
    definition = callback.definition
    approval = callback.metadata.requires_approval
    return {
        "name": definition.name,
        "description": definition.description,
        "input_schema": definition.input_schema,
        "return_direct": callback.metadata.return_direct,
        # a predicate decides per call: not a yes or no; unset (None): by the caller's policy
        "requires_approval": "predicate" if callable(approval) else bool(approval),
        "read_only": callback.metadata.read_only,
        "destructive": callback.metadata.destructive,
        "sequential": callback.metadata.sequential,
        "mcp_server": mcp_server_category(callback),  # None: not an MCP server's tool
    }
