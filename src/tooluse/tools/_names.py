"""Tool names: validation and the human-readable fallback description."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("tooluse.tools")

RECOMMENDED_NAME = re.compile(r"^[a-zA-Z0-9_.-]+$")
# Word boundaries inside identifiers: "getWeather", "HTTPServer2Go", "get_weather", "math.pow".
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z]|\d|\b|_)|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+")


def check_tool_name(name: str) -> str:
    """Return ``name`` if usable; blank raises ``ValueError``, an unusual name logs a warning."""
    if not name or not name.strip():
        raise ValueError("Tool name cannot be null or empty")
    if not RECOMMENDED_NAME.match(name):
        _warn_unusual_name(name)
    return name


@functools.lru_cache(maxsize=1024)
def _warn_unusual_name(name: str) -> None:
    # Cached so that tools rebuilt per request warn once, not on every request.
    logger.warning(
        "Tool name %r does not match %s and may not be accepted by some providers (e.g. "
        "OpenAI); provider adapters map it to a safe alias",
        name,
        RECOMMENDED_NAME.pattern,
    )


def words_of_name(name: str) -> str:
    """``getWeather`` / ``get_weather`` -> ``get weather`` (the description of last resort)."""
    words = _WORD.findall(name)
    return " ".join(words).lower() if words else name


def function_tool_name(function: Callable[..., Any]) -> str:
    """The default tool name: the function's ``__name__`` (a partial's wrapped function's)."""
    target: Any = function
    while isinstance(target, functools.partial):
        target = target.func
    name = getattr(target, "__name__", None)
    if not isinstance(name, str) or not name.strip() or name == "<lambda>":
        raise ValueError(f"Cannot derive a tool name from {function!r}; pass name=")
    return name
