"""The command-line options ``tooluse serve`` and ``tooluse chat`` share."""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tooluse._targets import TargetError, load_target
from tooluse.errors import SchemaVersionError
from tooluse.service._samples import SAMPLE_TOOLS
from tooluse.service._service import DEFAULT_DATABASE, TOOL_SEARCH_ABOVE, ServiceConfig
from tooluse.tools import ToolCallback, tool_callbacks

__all__ = [
    "OptionError",
    "add_service_arguments",
    "add_tools_argument",
    "config_from_arguments",
    "configure_logging",
    "open_service",
    "tools_from_arguments",
]

T = TypeVar("T")

_TOOL_SEARCH: dict[str, bool | None] = {"auto": None, "on": True, "off": False}


class OptionError(ValueError):
    """A command-line option that cannot be used; the message says why."""


def add_service_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=os.environ.get("TOOLUSE_DB", DEFAULT_DATABASE),
        help=f"SQLite file for memory, knowledge base and approvals "
        f"(default: $TOOLUSE_DB or {DEFAULT_DATABASE})",
    )
    parser.add_argument(
        "--model",
        default=os.environ.get("TOOLUSE_MODEL"),
        help="model spec such as openai:gpt-4o-mini or ollama:qwen2.5 (default: "
        "$TOOLUSE_MODEL; none: the offline TestModel)",
    )
    add_tools_argument(parser)
    parser.add_argument(
        "--tool-search",
        choices=sorted(_TOOL_SEARCH),
        default="auto",
        help="the model sees only a search tool and the tools it finds, instead of every tool "
        f"(auto: with more than {TOOL_SEARCH_ABOVE} tools)",
    )
    parser.add_argument(
        "--no-sample-knowledge",
        dest="sample_knowledge",
        action="store_false",
        help="do not ingest the sample documents into an empty knowledge base",
    )
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning"], help="log level"
    )


def add_tools_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tools",
        action="append",
        metavar="MODULE:ATTRIBUTE",
        help="your tools instead of the sample tools: a module (found in the working "
        "directory or on PYTHONPATH) or a .py file, then the attribute, e.g. my_tools:tools or "
        "path/to/my_tools.py:tools (a function, an object with @tool methods or a list of "
        "them); repeatable",
    )


def tools_from_arguments(args: argparse.Namespace) -> list[ToolCallback]:
    """The tools ``--tools`` names (the sample tools without it), as callbacks."""
    sources: Sequence[object] = [_import_tools(reference) for reference in args.tools or ()]
    try:
        return tool_callbacks(*(sources or SAMPLE_TOOLS))
    except (ValueError, TypeError) as exc:  # not tools, two tools of one name, ...
        raise OptionError(f"--tools: {exc}") from exc


def _import_tools(reference: str) -> object:
    try:
        return load_target(reference)
    except TargetError as exc:
        raise OptionError(f"--tools {reference}: {exc}") from exc


def config_from_arguments(args: argparse.Namespace) -> ServiceConfig:
    """The service configuration the options ask for (``OptionError`` when they cannot be
    used: a model spec without its key, tools that do not import, ...)."""
    model = None
    if args.model:
        from tooluse.models import from_config
        from tooluse.models._config import MissingApiKeyError

        try:
            model = from_config(args.model)
        except MissingApiKeyError as exc:  # its message names from_config's api_key=
            raise OptionError(
                f"--model {args.model} needs an API key: set the environment variable "
                f"{exc.key_env} (e.g. export {exc.key_env}=...)"
            ) from exc
        except ValueError as exc:
            raise OptionError(f"--model: {exc}") from exc
    tools: dict[str, Any] = {}
    if args.tools:
        tools["tools"] = tuple(_import_tools(reference) for reference in args.tools)
    return ServiceConfig(
        db=args.db,
        model=model,
        model_label=args.model,
        sample_knowledge=args.sample_knowledge,
        tool_search=_TOOL_SEARCH[args.tool_search],
        **tools,
    )


def open_service(args: argparse.Namespace, build: Callable[[ServiceConfig], T]) -> T:
    """``build(config)`` for the options' configuration, with ``OptionError`` for what the
    options ask for and the service cannot open: tools that are not tools, a ``--db`` that
    SQLite cannot open (a missing directory, not a database, ...) or that holds tables of
    another schema version."""
    config = config_from_arguments(args)
    try:
        return build(config)
    except sqlite3.Error as exc:
        raise OptionError(f"--db {args.db}: {exc}") from exc
    except SchemaVersionError as exc:  # it names the file
        raise OptionError(str(exc)) from exc
    except (ValueError, TypeError) as exc:  # tool_callbacks refusing a --tools source, ...
        raise OptionError(str(exc)) from exc


def configure_logging(level: str) -> None:
    """Log lines of the service (``tooluse.service``) to stderr, unless logging is set up."""
    if not logging.getLogger().handlers:
        logging.basicConfig(format="%(levelname)s:     %(name)s: %(message)s")
    logging.getLogger("tooluse").setLevel(level.upper())
