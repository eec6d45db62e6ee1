"""The ``tooluse`` command; ``python -m tooluse.cli`` runs it too.

Each subcommand lives in its own module of this package (``tooluse demo`` and ``tooluse
bench`` next to what they run: ``tooluse._demo``, ``tooluse.search.bench``), imported only
when that subcommand runs (so ``tooluse --help`` stays fast whatever the subcommands
import). A module exposes
``add_arguments(parser: argparse.ArgumentParser) -> None`` and
``run(args: argparse.Namespace) -> int`` (the exit status). Registering one is one line in
:data:`COMMANDS`. Every parser, nested subcommands' too, shows the options' defaults in its
help (:class:`HelpFormatter`): a help text that describes its default itself is left as is.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import os
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn

from tooluse._version import VERSION
from tooluse.cli._option_types import port_number, positive_seconds

__all__ = [
    "COMMANDS",
    "ArgumentParser",
    "Command",
    "HelpFormatter",
    "build_parser",
    "entry_point",
    "main",
    "port_number",
    "positive_seconds",
]


@dataclasses.dataclass(frozen=True, slots=True)
class Command:
    name: str
    module: str  # exposes add_arguments(parser) and run(args) -> int
    summary: str


COMMANDS: tuple[Command, ...] = (
    Command("serve", "tooluse.cli.serve", "run the QA service (chat page, SSE, OpenAI API)"),
    Command("chat", "tooluse.cli.chat", "chat with the QA pipeline in the terminal"),
    Command("eval", "tooluse.cli.eval", "how often the QA router calls the right tools"),
    Command("tools", "tooluse.cli.tools", "list the tools the model is offered"),
    Command("search", "tooluse.cli.search", "what tool search finds for a query"),
    Command("demo", "tooluse._demo", "run an offline demo of the tool loop (TestModel + tools)"),
    Command("ingest", "tooluse.cli.ingest", "load text and Markdown files into the knowledge base"),
    Command("bench", "tooluse.search.bench", "benchmarks (bench search: a tool-search index)"),
    Command("mcp", "tooluse.cli.mcp", "MCP: serve tools as an MCP server, list a server's tools"),
    Command("audit", "tooluse.cli.audit", "the audit log of tool calls, as JSON lines"),
)


class HelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default, "(default: X)", unless its help says it already
    (a default from the environment, for one, is described, never shown: it may be a key).
    Flags (``store_true``...) and options without a default show none."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        default = action.default
        if (
            not text
            or "default" in text
            or default is None
            or default is argparse.SUPPRESS
            or isinstance(default, bool)
            or (isinstance(default, (list, tuple)) and not default)
            or not (action.option_strings or action.nargs in (argparse.OPTIONAL, "*"))
        ):
            return text
        return f"{text} (default: %(default)s)"


class ArgumentParser(argparse.ArgumentParser):
    """An ``argparse.ArgumentParser`` with :class:`HelpFormatter`; the parsers of
    subcommands (and of their own subcommands) are of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def _load(command: Command) -> ModuleType:
    module = importlib.import_module(command.module)
    for attribute in ("add_arguments", "run"):
        if not callable(getattr(module, attribute, None)):
            raise TypeError(
                f"The module {command.module} of `tooluse {command.name}` has no {attribute}()"
            )
    return module


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser; only the subcommand named in ``argv`` has its module imported."""
    parser = ArgumentParser(
        prog="tooluse", description="LLM tool calling and tool search for Python."
    )
    parser.add_argument("--version", action="version", version=f"tooluse {VERSION}")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub = subcommands.add_parser(
            command.name, help=command.summary, description=command.summary
        )
        if command.name in argv:
            module = _load(command)
            module.add_arguments(sub)
            sub.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(arguments).parse_args(arguments)
    status: int = args.run(args)
    return status


def entry_point() -> NoReturn:
    """The ``tooluse`` process: :func:`main`, then exit with its status."""
    status = main()
    if any(thread.daemon and thread.is_alive() for thread in threading.enumerate()):
        # Background work that is not waited for (the knowledge base loading its embedding
        # model, the tool-search warm-up, a prompt's input()) is still running, e.g. after
        # Ctrl+C; the interpreter's exit would tear modules and native libraries down under
        # it, which can abort the process (SIGABRT). Everything of ours is closed: leave now.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
