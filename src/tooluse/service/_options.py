"""The command-line options ``tooluse serve`` and ``tooluse chat`` share."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sqlite3
from collections.abc import Callable
from typing import TypeVar

from tooluse.errors import SchemaVersionError
from tooluse.service._service import DEFAULT_DATABASE, ServiceConfig

__all__ = [
    "OptionError",
    "add_service_arguments",
    "config_from_arguments",
    "configure_logging",
    "open_service",
]

T = TypeVar("T")


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
    parser.add_argument(
        "--tools",
        action="append",
        metavar="MODULE:ATTRIBUTE",
        help="your tools instead of the sample tools, e.g. myapp.tools:TOOLS (a function, an "
        "object with @tool methods or a list of them); repeatable",
    )
    parser.add_argument(
        "--no-sample-knowledge",
        dest="sample_knowledge",
        action="store_false",
        help="do not ingest the sample documents into an empty knowledge base",
    )
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])


def _import_tools(reference: str) -> object:
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise OptionError(
            f"--tools takes MODULE:ATTRIBUTE, e.g. myapp.tools:TOOLS, got {reference!r}"
        )
    try:
        found: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise OptionError(f"--tools {reference}: cannot import {module_name!r}: {exc}") from exc
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise OptionError(
                f"--tools {reference}: {module_name!r} has no attribute {attribute!r}"
            )
        found = getattr(found, part)
    return found


def config_from_arguments(args: argparse.Namespace) -> ServiceConfig:
    """The service configuration the options ask for (``OptionError`` when they cannot be
    used: a model spec without its key, tools that do not import, ...)."""
    model = None
    if args.model:
        from tooluse.models import from_config

        try:
            model = from_config(args.model)
        except ValueError as exc:
            raise OptionError(f"--model: {exc}") from exc
    if args.tools:
        tools: tuple[object, ...] = tuple(_import_tools(reference) for reference in args.tools)
        return ServiceConfig(
            db=args.db,
            model=model,
            model_label=args.model,
            tools=tools,
            sample_knowledge=args.sample_knowledge,
        )
    return ServiceConfig(
        db=args.db, model=model, model_label=args.model, sample_knowledge=args.sample_knowledge
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
