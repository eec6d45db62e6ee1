"""What of a tool is searched: its name, description and parameters, as text fields."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from tooluse.search._types import ToolReference

__all__ = ["ToolDocument", "parameter_choices", "parameter_texts", "tool_document"]

_MAX_SCHEMA_DEPTH = 4  # nested objects deeper than this add little and cost tokens


def parameter_texts(schema: Mapping[str, Any] | None) -> Iterator[tuple[str, str]]:
    """``(name, description)`` of every property in a JSON Schema, nested ones included, in
    schema order. Non-dict fragments (malformed schemas) are skipped."""
    for name, spec in _properties(schema, 0):
        description = spec.get("description")
        yield name, description if isinstance(description, str) else ""


def parameter_choices(schema: Mapping[str, Any] | None) -> Iterator[str]:
    """The ``enum`` values of every property, as text: what a user says to pick one
    ("in Fahrenheit", "sorted by price")."""
    for _, spec in _properties(schema, 0):
        for fragment in (spec, spec.get("items")):
            choices = fragment.get("enum") if isinstance(fragment, Mapping) else None
            if isinstance(choices, list):
                yield from (str(c) for c in choices if isinstance(c, str | int | float))


def _properties(schema: Any, depth: int) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if not isinstance(schema, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, spec in properties.items():
            yield str(name), spec if isinstance(spec, Mapping) else {}
            yield from _properties(spec, depth + 1)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _properties(items, depth + 1)


@dataclasses.dataclass(frozen=True, slots=True)
class ToolDocument:
    """A tool's searchable text, by field (identifiers as written; tokenisers split them)."""

    name: str
    description: str
    parameters: str  # "name description" of each parameter, one per line
    choices: str  # the parameters' enum values


def tool_document(reference: ToolReference) -> ToolDocument:
    parameters = "\n".join(
        f"{name} {description}" for name, description in parameter_texts(reference.parameters)
    )
    choices = " ".join(parameter_choices(reference.parameters))
    return ToolDocument(reference.tool_name, reference.summary, parameters, choices)
