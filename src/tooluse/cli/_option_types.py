"""``type=`` functions for command-line options that several commands share (``tooluse serve``
and ``tooluse mcp serve`` take a port; ``tooluse.cli`` re-exports them)."""

from __future__ import annotations

import argparse
import math

__all__ = ["port_number", "positive_count", "positive_seconds"]


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
