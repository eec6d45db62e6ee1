"""JSON Schema for tools: generation from type hints and repair of foreign schemas.

Type-level: this package never imports ``tooluse.tools``, which builds on it. The input schema
of a function is the function schema's (``tooluse.tools``), reached here at call time for the
public name ``generate_for_function_input``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from tooluse.schema._generate import DRAFT_2020_12, generate_for_type
from tooluse.schema._provider import (
    StrictSchemaError,
    anthropic_strict_schema,
    drop_injected_nulls,
    openai_strict_schema,
    plain_schema,
)
from tooluse.schema._repair import ensure_valid_input_schema

__all__ = [
    "DRAFT_2020_12",
    "StrictSchemaError",
    "anthropic_strict_schema",
    "drop_injected_nulls",
    "ensure_valid_input_schema",
    "generate_for_function_input",
    "generate_for_type",
    "openai_strict_schema",
    "plain_schema",
]


def generate_for_function_input(function: Callable[..., Any]) -> dict[str, Any]:
    """The input schema of a tool backed by ``function`` (a function, bound method, partial or
    callable object), a copy the caller may change. Raises ``ValueError`` naming the
    parameter whose type has no schema."""
    # tools imports this package, so it is imported when called, not when this one loads
    from tooluse.tools._function_schema import function_schema

    name = getattr(function, "__name__", None) or type(function).__name__
    return copy.deepcopy(function_schema(function, tool_name=name).json_schema)
