"""Messages for invalid tool arguments, written for the model that has to fix them: which
tool, which field, what was expected, what was received, in a few short lines."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

MAX_LISTED_ERRORS = 5
_PREVIEW_CHARS = 60
_SIGNATURE_CHARS = 400
_NOT_AN_OBJECT = frozenset(
    {"dict_type", "model_type", "typed_dict_type", "model_attributes_type", "dataclass_type"}
)


def signature_hint(schema: Mapping[str, Any]) -> str:
    """``{city: string, days?: integer}`` from an object schema: the shape the model should
    send (``?`` marks optional fields). Cut short for tools with many parameters."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return "a JSON object"
    required = set(schema.get("required") or ())
    parts = [
        f"{name}{'' if name in required else '?'}: {type_hint(sub)}"
        for name, sub in properties.items()
    ]
    text = "{" + ", ".join(parts) + "}"
    return text if len(text) <= _SIGNATURE_CHARS else text[: _SIGNATURE_CHARS - 2] + "…}"


def type_hint(schema: Any) -> str:
    """A short type description of a property schema: ``string``, ``integer | null``,
    ``one of "a", "b"``, ``Address``, ``any``."""
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        values = ", ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"][:8])
        return f"one of {values}" + (", …" if len(schema["enum"]) > 8 else "")
    json_type = schema.get("type")
    if isinstance(json_type, str):
        if json_type == "array" and isinstance(schema.get("items"), Mapping):
            return f"array of {type_hint(schema['items'])}"
        return json_type
    if isinstance(json_type, list):
        return " | ".join(str(t) for t in json_type)
    for combinator in ("anyOf", "oneOf"):
        options = schema.get(combinator)
        if isinstance(options, list):
            return " | ".join(type_hint(option) for option in options)
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref.rsplit("/", 1)[-1]
    return "any"


def describe_validation_error(
    tool_name: str,
    error: ValidationError,
    schema: Mapping[str, Any],
    arguments: str | None = None,
) -> str:
    """The model's message for ``error``; ``arguments`` (the JSON text that failed) tells
    the fields it sent from the union members pydantic names in an error's location."""
    details = error.errors(include_url=False)
    root = [d for d in details if not d["loc"]]
    if root:
        return f"Invalid arguments for tool '{tool_name}': {_describe_root(root[0], schema)}"
    received = _parsed(arguments)
    lines = [_describe_field(d, schema, received) for d in details[:MAX_LISTED_ERRORS]]
    if len(details) > MAX_LISTED_ERRORS:
        lines.append(f"- and {len(details) - MAX_LISTED_ERRORS} more problems")
    return "\n".join(
        [
            f"Invalid arguments for tool '{tool_name}':",
            *lines,
            f"Expected arguments: {signature_hint(schema)}",
        ]
    )


def describe_missing_fields(
    tool_name: str, missing: Sequence[str], schema: Mapping[str, Any]
) -> str:
    properties = schema.get("properties") or {}
    lines = [
        f"- '{name}': required but missing (expected {type_hint(properties.get(name))})"
        for name in missing
    ]
    return "\n".join(
        [
            f"Invalid arguments for tool '{tool_name}':",
            *lines,
            f"Expected arguments: {signature_hint(schema)}",
        ]
    )


def _describe_root(detail: ErrorDetails, schema: Mapping[str, Any]) -> str:
    expected = signature_hint(schema)
    kind = detail["type"]
    if kind == "json_invalid":
        reason = (detail.get("ctx") or {}).get("error", detail["msg"])
        return f"the arguments are not valid JSON ({reason}). Send one JSON object: {expected}"
    if kind == "string_unicode":
        return f"the arguments are not valid Unicode text. Send one JSON object: {expected}"
    if kind in _NOT_AN_OBJECT:
        got = _json_kind(detail["input"])
        return f"the arguments must be a JSON object, got {got}. Send: {expected}"
    return f"{detail['msg']}. Send one JSON object: {expected}"


def _describe_field(detail: ErrorDetails, schema: Mapping[str, Any], received: Any) -> str:
    kind = detail["type"]
    loc, members = _split_union_members(detail["loc"], kind, received)
    where = _location(loc) + (f" (as {', '.join(members)})" if members else "")
    properties = schema.get("properties") or {}
    top_level = len(loc) == 1 and isinstance(loc[0], str)
    if kind == "missing":
        expected = f" (expected {type_hint(properties.get(loc[0]))})" if top_level else ""
        return f"- {where}: required but missing{expected}"
    if kind == "extra_forbidden":
        if top_level:
            known = ", ".join(properties) or "none"
            return f"- {where}: not a parameter of this tool (parameters: {known})"
        return f"- {where}: unexpected field"
    return f"- {where}: {detail['msg']}; got {_preview(detail['input'])}"


_NOT_PARSED = object()


def _parsed(arguments: str | None) -> Any:
    if arguments is None:
        return _NOT_PARSED
    try:
        return json.loads(arguments)
    except ValueError:  # e.g. a lone surrogate pydantic reported at a field
        return _NOT_PARSED


def _split_union_members(
    loc: tuple[int | str, ...], kind: str, received: Any
) -> tuple[tuple[int | str, ...], list[str]]:
    """``loc`` without the union members pydantic puts in it (``pet.Cat.name`` for
    ``pet: Cat | Dog``, ``a.int`` for ``a: int | str``), which read as fields the model
    should nest, and those members. A part is a member when the arguments have no such field
    there; only a missing field is absent itself."""
    if received is _NOT_PARSED:
        return loc, []
    path: list[int | str] = []
    members: list[str] = []
    value = received
    last = len(loc) - 1
    for position, part in enumerate(loc):
        if _holds(value, part):
            value = value[part]
        # (not the missing field itself, nor pydantic's mark of a dict key that failed)
        elif isinstance(part, str) and part != "[key]" and (kind, position) != ("missing", last):
            members.append(part)
            continue
        path.append(part)
    return tuple(path), members


def _holds(value: Any, part: int | str) -> bool:
    if isinstance(value, dict):
        return part in value
    return isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value)


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return f"'{text}'"


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, str):
        return "a JSON string"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, int | float):
        return "a JSON number"
    if value is None:
        return "null"
    return type(value).__name__


def _preview(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"
