"""Hoisting ``$defs`` of parameter schemas into the root schema of a tool.

Each parameter's schema is generated on its own, so two of them can bring definitions with the
same name. Equal definitions are shared; a different one under a taken name is renamed
``Name_2``, ``Name_3``, ... and every ``$ref`` to it (including ones with a JSON-pointer tail,
``#/$defs/Name/properties/x``) is rewritten, in the parameter schema and in the definitions it
brought along.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tooluse.schema._keywords import Schema, map_subschemas

DEFS_PREFIX = "#/$defs/"


def hoist_defs(root_defs: dict[str, Any], schema: Mapping[str, Any]) -> Schema:
    """Move ``schema["$defs"]`` into ``root_defs`` (mutated) and return ``schema`` without
    them, with ``$ref``s rewritten for any renamed definition."""
    incoming: Mapping[str, Any] = schema.get("$defs") or {}
    body = {key: value for key, value in schema.items() if key != "$defs"}
    if not incoming:
        return body
    renames = _renames(root_defs, incoming)
    if renames:
        body = rewrite_refs(body, renames)
    for name, definition in incoming.items():
        target = renames.get(name, name)
        if target not in root_defs:
            root_defs[target] = rewrite_refs(definition, renames) if renames else definition
    return body


def _renames(root_defs: Mapping[str, Any], incoming: Mapping[str, Any]) -> dict[str, str]:
    # Equality is judged after rewriting: a definition that refers to a renamed one is no
    # longer equal to its namesake, so repeat until no new rename appears.
    renames: dict[str, str] = {}
    taken = set(root_defs) | set(incoming)
    changed = True
    while changed:
        changed = False
        for name, definition in incoming.items():
            if name in renames or name not in root_defs:
                continue
            candidate = rewrite_refs(definition, renames) if renames else definition
            if candidate != root_defs[name]:
                renames[name] = _free_name(name, taken)
                taken.add(renames[name])
                changed = True
    return renames


def _free_name(name: str, taken: set[str]) -> str:
    suffix = 2
    while f"{name}_{suffix}" in taken:
        suffix += 1
    return f"{name}_{suffix}"


def _pointer_token(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def rewrite_refs(schema: Any, renames: Mapping[str, str]) -> Any:
    """``schema`` with ``#/$defs/<old>[/tail]`` refs pointed at the new names."""
    if not isinstance(schema, Mapping):
        return schema
    node = map_subschemas(schema, lambda sub: rewrite_refs(sub, renames))
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(DEFS_PREFIX):
        head, slash, tail = ref[len(DEFS_PREFIX) :].partition("/")
        for old, new in renames.items():
            if head == _pointer_token(old):
                node["$ref"] = DEFS_PREFIX + _pointer_token(new) + slash + tail
                break
    return node
