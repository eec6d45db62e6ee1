"""Where sub-schemas live inside a JSON Schema (draft 2020-12, plus the older spellings
foreign schemas still use), so walkers never mistake data (``enum``, ``default``, property
names) for schemas."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# keyword -> one sub-schema
SINGLE_SCHEMA = frozenset(
    {
        "additionalProperties",
        "unevaluatedProperties",
        "propertyNames",
        "items",
        "additionalItems",
        "unevaluatedItems",
        "contains",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
# keyword -> list of sub-schemas
SCHEMA_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
# keyword -> {name: sub-schema}
SCHEMA_MAP = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)

Schema = dict[str, Any]


def map_subschemas(node: Mapping[str, Any], transform: Callable[[Any], Any]) -> Schema:
    """A copy of ``node`` with ``transform`` applied to each direct sub-schema.

    Values of the wrong shape (a list where a schema belongs, ...) are copied unchanged; the
    repair pass is what fixes shapes.
    """
    result: Schema = {}
    for key, value in node.items():
        if key in SINGLE_SCHEMA and isinstance(value, Mapping | bool):
            result[key] = transform(value)
        elif (key in SCHEMA_LIST or key == "items") and isinstance(value, list):
            # ("items" as a list is the pre-2020 tuple form)
            result[key] = [transform(item) for item in value]
        elif key in SCHEMA_MAP and isinstance(value, Mapping):
            result[key] = {name: transform(sub) for name, sub in value.items()}
        else:
            result[key] = value
    return result
