"""``generate_for_function_input``: the input schema of a function, as a tool's."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

__all__ = ["generate_for_function_input"]


def generate_for_function_input(function: Callable[..., Any]) -> dict[str, Any]:
    """The input schema of a tool backed by ``function`` (a function, bound method, partial or
    callable object), a copy the caller may change. Raises ``ValueError`` naming the
    parameter whose type has no schema."""
    # tooluse.tools builds on this package, so it is imported when called, not when this loads
    from tooluse.tools._function_schema import function_schema

    name = getattr(function, "__name__", None) or type(function).__name__
    return copy.deepcopy(function_schema(function, tool_name=name).json_schema)
