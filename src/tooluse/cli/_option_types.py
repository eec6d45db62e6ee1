"""``type=`` functions for command-line options that several commands share (``tooluse serve``
and ``tooluse mcp serve`` take a port; ``tooluse.cli`` re-exports them), and the options
themselves where several commands take one alike."""

from __future__ import annotations

import argparse
import math
import os

from tooluse._tables import is_postgres_url, location_label

__all__ = [
    "add_database_url_argument",
    "port_number",
    "positive_count",
    "positive_seconds",
    "postgres_url",
]


def port_number(text: str) -> int:
    """The ``type=`` of a port option: 0-65535, else a usage error (exit status 2)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0-65535, got {port}")
    return port


def positive_seconds(text: str) -> float:
    """The ``type=`` of a duration option: a number of seconds above 0, else a usage error."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < seconds < math.inf:
        raise argparse.ArgumentTypeError(
            f"a duration is a finite number of seconds above 0, got {text}"
        )
    return seconds


def positive_count(text: str) -> int:
    """The ``type=`` of a size option: a whole number above 0, else a usage error."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if count <= 0:
        raise argparse.ArgumentTypeError(f"a size is a whole number above 0, got {count}")
    return count


def postgres_url(text: str) -> str:
    """The ``type=`` of a database option: a ``postgresql://`` URL, else a usage error that
    shows it without its password."""
    if not is_postgres_url(text):
        raise argparse.ArgumentTypeError(
            f"expected a PostgreSQL URL, postgresql://USER:PASSWORD@HOST:PORT/DB, got "
            f"{location_label(text)}"
        )
    return text


def add_database_url_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--database-url URL``: ``what`` the database is, by default ``$TOOLUSE_DATABASE_URL``
    (checked as a URL given on the command line is)."""
    parser.add_argument(
        "--database-url",
        type=postgres_url,
        default=os.environ.get("TOOLUSE_DATABASE_URL") or None,
        metavar="URL",
        help=f"{what}: postgresql://USER:PASSWORD@HOST:PORT/DB (default: $TOOLUSE_DATABASE_URL)",
    )
