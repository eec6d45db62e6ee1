"""What of a tool is searched: its name, description and parameters, as text fields."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from tooluse.search._types import ToolReference

__all__ = ["ToolDocument", "parameter_texts", "tool_document"]

_MAX_SCHEMA_DEPTH = 4  # nested objects deeper than this add little and cost tokens


def parameter_texts(schema: Mapping[str, Any] | None) -> Iterator[tuple[str, str]]:
    """``(name, description)`` of every property in a JSON Schema, nested ones included, in
    schema order. Non-dict fragments (malformed schemas) are skipped."""
    yield from _walk(schema, 0)


def _walk(schema: Any, depth: int) -> Iterator[tuple[str, str]]:
    if not isinstance(schema, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, spec in properties.items():
            description = spec.get("description") if isinstance(spec, Mapping) else None
            yield str(name), description if isinstance(description, str) else ""
            yield from _walk(spec, depth + 1)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _walk(items, depth + 1)


@dataclasses.dataclass(frozen=True, slots=True)
class ToolDocument:
    """A tool's searchable text, by field (identifiers as written; tokenisers split them)."""

    name: str
    description: str
    parameters: str  # "name description" of each parameter, one per line


def tool_document(reference: ToolReference) -> ToolDocument:
    parameters = "\n".join(
        f"{name} {description}" for name, description in parameter_texts(reference.parameters)
    )
    return ToolDocument(reference.tool_name, reference.summary, parameters)
