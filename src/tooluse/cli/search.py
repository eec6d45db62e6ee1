"""``tooluse search``: what tool search finds for a query, in a catalogue of tools."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tooluse.cli._options import OptionError, add_tools_argument, tools_from_arguments
from tooluse.search import ToolReference, ToolSearchRequest, mcp_server_category
from tooluse.search.bench import INDEX_KINDS, load_tools, make_index

__all__ = ["add_arguments", "run"]

_SESSION = "cli"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Search a catalogue of tools the way the model's toolSearchTool does, and print what "
        "is found, best first: rank, score (its scale depends on the index), name, and the "
        "first line of the description. The catalogue is the sample tools, the tools --tools "
        "and --mcp name (an MCP tool's category is its server's name), or a tools.jsonl file "
        "(--catalogue; the format of benchmarks/data/tool-search/)."
    )
    parser.add_argument("query", help="what to search for, as the model would write it")
    add_tools_argument(parser)
    parser.add_argument(
        "--catalogue",
        metavar="PATH",
        help="a tools.jsonl file, or a directory holding one, instead of --tools / --mcp",
    )
    parser.add_argument("--index", choices=INDEX_KINDS, default="hybrid", help="the index")
    parser.add_argument(
        "--max-results", type=int, default=10, help="how many tools to show at most"
    )
    parser.add_argument("--category", help="only tools of this category (case-insensitive)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")


def run(args: argparse.Namespace) -> int:
    try:
        references = _catalogue(args)
        request = ToolSearchRequest(_SESSION, args.query, args.max_results, args.category)
        index = make_index(args.index)
        index.index_tools(_SESSION, references)
        response = index.search(request)
    except (OptionError, ValueError, TypeError, OSError) as exc:
        print(f"tooluse search: {exc}", file=sys.stderr)
        return 2
    found = response.tool_references
    if args.json:
        print(json.dumps([_found(reference) for reference in found], ensure_ascii=False))
        return 0
    for rank, reference in enumerate(found, 1):
        lines = reference.summary.strip().splitlines()
        score = reference.relevance_score or 0.0
        print(f"{rank:>3}  {score:8.4f}  {reference.tool_name}\t{lines[0] if lines else ''}")
    print(f"{len(found)} of {len(references)} tools ({args.index} index)", file=sys.stderr)
    return 0


def _catalogue(args: argparse.Namespace) -> list[ToolReference]:
    if args.catalogue is None:  # an MCP tool is filed under its server, as the router does
        return [
            ToolReference.from_callback(c, mcp_server_category(c))
            for c in tools_from_arguments(args)
        ]
    if args.tools or args.mcp:
        raise OptionError("give either --catalogue or --tools / --mcp, not both")
    path = Path(args.catalogue)
    tools = load_tools(path / "tools.jsonl" if path.is_dir() else path)
    if not tools:
        raise OptionError(f"--catalogue {path}: no tools in it")
    return list(tools)


def _found(reference: ToolReference) -> dict[str, object]:
    return {
        "name": reference.tool_name,
        "score": reference.relevance_score,
        "summary": reference.summary,
        "category": reference.category,
    }
