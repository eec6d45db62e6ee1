"""JSON Schema for tools: generation from type hints and repair of foreign schemas.

Type-level: this package never imports ``tooluse.tools``, which builds on it. The input schema
of a function is the function schema's (``tooluse.tools``), reached here at call time for the
public name ``generate_for_function_input``.

The provider shaping (``plain_schema``, ``openai_strict_schema``, ``anthropic_strict_schema``,
``drop_injected_nulls``, ``StrictSchemaError``) lives with the providers that use it, in
``tooluse.models``; it is re-exported here, where the public API names it, and imported on
first use (``tooluse.models`` is a layer to the right: imported eagerly, it would be a cycle).
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tooluse.schema._generate import DRAFT_2020_12, generate_for_type
from tooluse.schema._repair import ensure_valid_input_schema

if TYPE_CHECKING:
    from tooluse.models._schema_shaping import (
        StrictSchemaError,
        anthropic_strict_schema,
        drop_injected_nulls,
        openai_strict_schema,
        plain_schema,
    )

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

_SHAPING = frozenset(
    {
        "StrictSchemaError",
        "anthropic_strict_schema",
        "drop_injected_nulls",
        "openai_strict_schema",
        "plain_schema",
    }
)


def generate_for_function_input(function: Callable[..., Any]) -> dict[str, Any]:
    """The input schema of a tool backed by ``function`` (a function, bound method, partial or
    callable object), a copy the caller may change. Raises ``ValueError`` naming the
    parameter whose type has no schema."""
    # tools imports this package, so it is imported when called, not when this one loads
    from tooluse.tools._function_schema import function_schema

    name = getattr(function, "__name__", None) or type(function).__name__
    return copy.deepcopy(function_schema(function, tool_name=name).json_schema)


def __getattr__(name: str) -> Any:
    if name not in _SHAPING:
        raise AttributeError(f"module 'tooluse.schema' has no attribute {name!r}")
    value = getattr(importlib.import_module("tooluse.models._schema_shaping"), name)
    globals()[name] = value
    return value
