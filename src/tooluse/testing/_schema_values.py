"""Deterministic values that are valid against a JSON Schema (draft 2020-12, with the older
``definitions`` / boolean ``exclusiveMinimum`` forms tolerated), for test doubles that call
tools with made-up but well-formed arguments.

The values are small and readable: strings ``"a"``, ``"b"``, ...; numbers from 1; the first
enum member; every property of an object (only the required ones below depth
``_FULL_DEPTH``, so recursive schemas end); arrays of one item (or ``minItems``). ``variant``
shifts the choice so that array items differ (``uniqueItems``).
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tooluse.testing._regex_example import regex_example

__all__ = ["SchemaValueError", "generate_arguments", "generate_value"]

_FULL_DEPTH = 4
_MAX_DEPTH = 64

_EPOCH = datetime.datetime(2024, 1, 1, 9, 0, tzinfo=datetime.UTC)


def _formatted(fmt: str, variant: int) -> str | None:
    moment = _EPOCH + datetime.timedelta(days=variant)
    examples = {
        "date": moment.date().isoformat(),
        "date-time": moment.isoformat().replace("+00:00", "Z"),
        "time": "09:00:00Z",
        "duration": f"P{variant + 1}D",
        "email": f"user{variant}@example.com",
        "idn-email": f"user{variant}@example.com",
        "hostname": f"host{variant}.example.com",
        "idn-hostname": f"host{variant}.example.com",
        "ipv4": f"192.0.2.{variant % 255}",
        "ipv6": f"2001:db8::{variant % 65535:x}",
        "uri": f"https://example.com/{variant}",
        "uri-reference": f"https://example.com/{variant}",
        "iri": f"https://example.com/{variant}",
        "iri-reference": f"https://example.com/{variant}",
        "url": f"https://example.com/{variant}",
        "uri-template": "https://example.com/{id}",
        "uuid": f"00000000-0000-4000-8000-{variant:012d}",
        "json-pointer": f"/{variant}",
        "relative-json-pointer": str(variant),
        "regex": ".*",
    }
    return examples.get(fmt)


class SchemaValueError(ValueError):
    """No value can be generated for the schema (it accepts nothing, or uses a feature the
    generator cannot satisfy)."""


def generate_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments valid against a tool's input schema (an object schema)."""
    value = generate_value(schema)
    if not isinstance(value, dict):
        raise SchemaValueError(
            f"A tool's input schema must describe an object, this one gives {value!r}: {schema}"
        )
    return value


def generate_value(schema: Mapping[str, Any] | bool, *, variant: int = 0) -> Any:
    """A value valid against ``schema``; ``variant`` picks a different but equally small one."""
    root = schema if isinstance(schema, Mapping) else {}
    return _Generator(root).value(schema, variant, 0)


class _Generator:
    __slots__ = ("_root",)

    def __init__(self, root: Mapping[str, Any]) -> None:
        self._root = root

    def value(self, schema: Mapping[str, Any] | bool, variant: int, depth: int) -> Any:
        if schema is True:
            return _letters(variant)
        if schema is False:
            raise SchemaValueError("The schema `false` accepts no value")
        if not isinstance(schema, Mapping):
            raise SchemaValueError(f"A schema must be an object or a boolean, got {schema!r}")
        if depth > _MAX_DEPTH:
            raise SchemaValueError(
                f"The schema nests deeper than {_MAX_DEPTH} levels with required members "
                "(a recursive schema with no way to end)"
            )
        schema = self._flatten(schema)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self._enum_member(schema, variant)
        for keyword in ("anyOf", "oneOf"):
            if keyword in schema:
                branch = self._choose_branch(schema[keyword], depth)
                rest = {k: v for k, v in schema.items() if k != keyword}
                return self.value(_merge(rest, branch), variant, depth)
        kind = _choose_type(schema, deep=depth >= _FULL_DEPTH)
        if kind == "object":
            return self._object(schema, depth)
        if kind == "array":
            return self._array(schema, depth)
        if kind == "string":
            return _string(schema, variant)
        if kind == "integer":
            return _number(schema, variant, integer=True)
        if kind == "number":
            return _number(schema, variant, integer=False)
        if kind == "boolean":
            return variant % 2 == 0
        if kind == "null":
            return None
        raise SchemaValueError(f"Unknown JSON Schema type {kind!r} in {dict(schema)}")

    def _resolve(self, reference: str) -> Mapping[str, Any]:
        if not reference.startswith("#"):
            raise SchemaValueError(f"Only local $refs (#/...) can be followed, got {reference!r}")
        node: Any = self._root
        for part in reference[1:].split("/")[1:]:
            key = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                raise SchemaValueError(f"The $ref {reference!r} points to nothing in the schema")
        if not isinstance(node, Mapping):
            raise SchemaValueError(f"The $ref {reference!r} does not point to a schema object")
        return node

    def _flatten(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        """Inline ``$ref`` and ``allOf`` so the remaining keywords sit on one object."""
        for _ in range(_MAX_DEPTH):
            if "$ref" in schema:
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                schema = _merge(self._resolve(schema["$ref"]), rest)
            elif "allOf" in schema:
                merged: Mapping[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
                for part in schema["allOf"]:
                    if part is False:
                        raise SchemaValueError("allOf contains `false`: no value is valid")
                    if isinstance(part, Mapping):
                        merged = _merge(merged, part)
                schema = merged
            else:
                return schema
        raise SchemaValueError(f"$ref / allOf chain longer than {_MAX_DEPTH} steps")

    def _enum_member(self, schema: Mapping[str, Any], variant: int) -> Any:
        members = schema["enum"]
        if not members:
            raise SchemaValueError("An empty enum accepts no value")
        types = schema.get("type")
        allowed = {types} if isinstance(types, str) else set(types or ())
        for offset in range(len(members)):
            member = members[(variant + offset) % len(members)]
            if (
                not allowed
                or _json_type(member) in allowed
                or ("number" in allowed and _json_type(member) == "integer")
            ):
                return member
        raise SchemaValueError(f"No enum member {members!r} has the type {types!r}")

    def _choose_branch(self, branches: Sequence[Any], depth: int) -> Mapping[str, Any]:
        usable = [b for b in branches if b is not False]
        if not usable:
            raise SchemaValueError("anyOf/oneOf has no branch that accepts a value")
        schemas = [b if isinstance(b, Mapping) else {} for b in usable]
        nulls = [b for b in schemas if b.get("type") == "null"]
        others = [b for b in schemas if b.get("type") != "null"]
        # Deep inside a recursive schema, end with null; otherwise show a real value.
        if depth >= _FULL_DEPTH and nulls:
            return nulls[0]
        return (others or nulls)[0]

    def _object(self, schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        properties: Mapping[str, Any] = schema.get("properties") or {}
        required: list[str] = list(schema.get("required") or ())
        names = required + [
            name for name in properties if name not in required and depth < _FULL_DEPTH
        ]
        maximum = schema.get("maxProperties")
        if maximum is not None:
            names = names[: max(int(maximum), len(required))]
        result: dict[str, Any] = {}
        for name in names:
            result[name] = self.value(self._property_schema(schema, name), 0, depth + 1)
        for name in list(result):
            for dependency in (schema.get("dependentRequired") or {}).get(name, ()):
                if dependency not in result:
                    result[dependency] = self.value(
                        self._property_schema(schema, dependency), 0, depth + 1
                    )
        minimum = int(schema.get("minProperties") or 0)
        extra = schema.get("additionalProperties", True)
        spare = [name for name in properties if name not in result]
        index = 0
        while len(result) < minimum:
            if spare:
                name = spare.pop(0)
                result[name] = self.value(properties[name], 0, depth + 1)
            elif extra is not False:
                result[f"key{index}"] = self.value(
                    extra if isinstance(extra, Mapping) else True, index, depth + 1
                )
                index += 1
            else:
                raise SchemaValueError(
                    f"minProperties {minimum} cannot be met: only {len(result)} properties are "
                    "allowed"
                )
        return result

    def _property_schema(self, schema: Mapping[str, Any], name: str) -> Any:
        properties = schema.get("properties") or {}
        if name in properties:
            return properties[name]
        for pattern, sub in (schema.get("patternProperties") or {}).items():
            if re.search(pattern, name):
                return sub
        extra = schema.get("additionalProperties", True)
        if extra is False:
            # A "required" name with no property: any value will do for the validator's
            # `required` check, but additionalProperties forbids it; report the contradiction.
            raise SchemaValueError(
                f"Property {name!r} is required but not defined, and additionalProperties is false"
            )
        return extra

    def _array(self, schema: Mapping[str, Any], depth: int) -> list[Any]:
        prefix: Sequence[Any] = schema.get("prefixItems") or ()
        items = schema.get("items", True)
        minimum = int(schema.get("minItems") or 0)
        count = max(minimum, 0 if depth >= _FULL_DEPTH else 1)
        if schema.get("maxItems") is not None:
            count = min(count, int(schema["maxItems"]))
        if items is False:
            count = min(count, len(prefix))
        contains = schema.get("contains")
        needed = int(schema.get("minContains", 1)) if contains is not None else 0
        count = max(count, needed)
        result: list[Any] = []
        for index in range(count):
            item_schema = prefix[index] if index < len(prefix) else items
            if index < needed:
                item_schema = _merge(
                    item_schema if isinstance(item_schema, Mapping) else {}, contains
                )
            result.append(self.value(item_schema, index, depth + 1))
        if schema.get("uniqueItems"):
            encoded = [json.dumps(item, sort_keys=True) for item in result]
            if len(set(encoded)) != len(encoded):
                raise SchemaValueError(
                    f"Could not generate {count} distinct items for a uniqueItems array"
                )
        return result


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any] | Any) -> dict[str, Any]:
    """Both schemas' constraints on one object (properties and required united)."""
    if not isinstance(extra, Mapping):
        return dict(base)
    merged = {**base, **extra}
    if "properties" in base and "properties" in extra:
        merged["properties"] = {**base["properties"], **extra["properties"]}
    if "required" in base and "required" in extra:
        merged["required"] = list(dict.fromkeys([*base["required"], *extra["required"]]))
    return merged


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


_TYPE_HINTS = (
    ("object", ("properties", "required", "additionalProperties", "patternProperties")),
    ("array", ("items", "prefixItems", "minItems", "maxItems", "contains")),
    ("string", ("pattern", "minLength", "maxLength", "format")),
    ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")),
)


def _choose_type(schema: Mapping[str, Any], *, deep: bool) -> str:
    declared = schema.get("type")
    if isinstance(declared, str):
        return declared
    if isinstance(declared, list) and declared:
        non_null = [t for t in declared if t != "null"]
        if deep and "null" in declared:
            return "null"
        return str((non_null or declared)[0])
    for kind, keywords in _TYPE_HINTS:
        if any(keyword in schema for keyword in keywords):
            return kind
    return "string"


def _letters(variant: int) -> str:
    """ "a", "b", ..., "z", "ba", ...: a different short word for each variant."""
    text = ""
    variant_left = variant
    while True:
        text = chr(ord("a") + variant_left % 26) + text
        variant_left //= 26
        if variant_left == 0:
            return text


def _string(schema: Mapping[str, Any], variant: int) -> str:
    minimum = int(schema.get("minLength") or 0)
    maximum = schema.get("maxLength")
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            text = regex_example(pattern)
            if len(text) < minimum:
                text = regex_example(pattern, stretch=minimum)
        except ValueError as exc:
            raise SchemaValueError(str(exc)) from exc
    else:
        formatted = _formatted(str(schema.get("format", "")), variant)
        text = formatted if formatted is not None else _letters(variant)
        if len(text) < minimum:
            text += "a" * (minimum - len(text))
    if maximum is not None and len(text) > int(maximum):
        text = text[: int(maximum)]
    if len(text) < minimum:
        raise SchemaValueError(
            f"Could not build a string of at least {minimum} characters for {dict(schema)}"
        )
    return text


def _bounds(schema: Mapping[str, Any]) -> tuple[float | None, bool, float | None, bool]:
    """(low, low exclusive, high, high exclusive), reading both the 2020-12 numeric form of
    ``exclusiveMinimum`` / ``exclusiveMaximum`` and the draft-4 boolean form."""
    low, low_exclusive = _bound(schema.get("minimum"), schema.get("exclusiveMinimum"), max)
    high, high_exclusive = _bound(schema.get("maximum"), schema.get("exclusiveMaximum"), min)
    return low, low_exclusive, high, high_exclusive


def _bound(inclusive: Any, exclusive: Any, tighter: Any) -> tuple[float | None, bool]:
    if exclusive is True:
        return inclusive, True
    if not isinstance(exclusive, int | float) or isinstance(exclusive, bool):
        return inclusive, False
    if inclusive is None or tighter(inclusive, exclusive) == exclusive:
        return exclusive, True
    return inclusive, False


def _number(schema: Mapping[str, Any], variant: int, *, integer: bool) -> int | float:
    low, low_exclusive, high, high_exclusive = _bounds(schema)
    step = schema.get("multipleOf")
    candidate: float = 1 + variant
    if low is not None and (candidate < low or (low_exclusive and candidate <= low)):
        candidate = low + variant
        if low_exclusive:
            candidate += 1 if integer or step else 0.5
    if high is not None and (candidate > high or (high_exclusive and candidate >= high)):
        candidate = high - (1 if high_exclusive and (integer or step) else 0)
        if high_exclusive and not (integer or step):
            candidate = (high + low) / 2 if low is not None else high - 0.5
    if step:
        candidate = math.ceil(candidate / step) * step
        if high is not None and (candidate > high or (high_exclusive and candidate >= high)):
            candidate = math.floor(high / step) * step
            if high_exclusive and candidate >= high:
                candidate -= step
    if integer:
        candidate = math.ceil(candidate)
    value: int | float = int(candidate) if float(candidate).is_integer() else candidate
    if not _within(value, low, low_exclusive, high, high_exclusive):
        raise SchemaValueError(f"No {'integer' if integer else 'number'} fits {dict(schema)}")
    return value


def _within(
    value: float, low: float | None, low_exclusive: bool, high: float | None, high_exclusive: bool
) -> bool:
    if low is not None and (value < low or (low_exclusive and value <= low)):
        return False
    return not (high is not None and (value > high or (high_exclusive and value >= high)))
