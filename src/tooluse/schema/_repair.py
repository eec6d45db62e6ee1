"""``ensure_valid_input_schema``: make a foreign tool input schema valid JSON Schema 2020-12.

Tool schemas from MCP servers, OpenAPI documents, benchmark files and hand-written JSON get
many things wrong. The repair keeps everything it can (every declared property, descriptions,
constraints) and changes only what is invalid or non-standard:

- root: ``{}`` or no ``type`` -> ``"type": "object"``; an object root without ``properties``
  gets ``"properties": {}`` (Spring AI's ``ensureValidInputSchema``);
- type names from other languages, case-insensitive, everywhere (``dict``, ``HashMap``,
  ``float``, ``double``, ``long``, ``String``, ``char``, ``bool``, ``list``, ``tuple``,
  ``ArrayList<String>``, ``String[]`` ...); ``any`` and ``""`` mean "any value" (no ``type``);
  ``date``/``datetime``/``time`` become strings with that ``format``; unknown names are dropped;
- BFCL's ``"optional": true`` on a property (also ``"True"``, ``"yes"``) removes it from the
  parent's ``required``, ``"optional": false`` adds it; an object-level ``"optional": [names]``
  removes those names; a property's own ``"required": true`` (Swagger 2 style) moves into the
  parent's ``required``; ``required`` names without a property are dropped;
- OpenAPI ``"nullable": true`` -> ``"null"`` added to ``type``;
- draft-4 shapes: ``items: [...]`` -> ``prefixItems``, boolean ``exclusiveMinimum`` /
  ``exclusiveMaximum`` -> numeric;
- regular expressions Python cannot compile are fixed when they only use ECMA-262's literal
  ``-`` after a class escape (``[\\w-.]``), else dropped with a warning;
- keyword values of the wrong JSON type are coerced when unambiguous (``"minimum": "0"``,
  ``"enum": "a"``, a bare type name where a schema belongs) and dropped otherwise; defaults that
  are strings of the declared boolean/number type are converted.

Unknown keywords (``unit``, ``example``, ...) are kept: 2020-12 allows them. The input is never
modified; the result is a new structure.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from typing import Any, overload

from tooluse.schema._keywords import SCHEMA_LIST, SCHEMA_MAP, SINGLE_SCHEMA, Schema

logger = logging.getLogger("tooluse.schema")

MAX_DEPTH = 100

# Type names seen in foreign schemas (Python, Java, TypeScript, C#), lower-cased.
_TYPE_NAME_GROUPS: dict[str | None, str] = {
    "object": "object dict map hashmap treemap linkedhashmap hashtable mapping struct record "
    "jsonobject",
    "array": "array list tuple set frozenset arraylist linkedlist vector sequence collection "
    "iterable jsonarray",
    "string": "string str char character text charsequence",
    "integer": "integer int long short byte bigint biginteger int32 int64",
    "number": "number float double decimal bigdecimal float32 float64 real numeric",
    "boolean": "boolean bool",
    "null": "null none nil",
    None: "any * mixed unknown jsonvalue",  # "any value": the node keeps no type at all
}
_TYPE_NAMES: dict[str, str | None] = {
    name: json_type for json_type, names in _TYPE_NAME_GROUPS.items() for name in names.split()
}
_TYPE_NAMES[""] = None
_STRING_FORMATS = {
    "date": "date",
    "datetime": "date-time",
    "date-time": "date-time",
    "time": "time",
}
_NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "multipleOf"})
_COUNT_KEYWORDS = frozenset(
    {
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
    }
)
_TEXT_KEYWORDS = frozenset({"description", "title", "$comment"})
_STRING_ONLY_KEYWORDS = frozenset(
    {
        "format",
        "$ref",
        "$id",
        "$anchor",
        "$dynamicRef",
        "$dynamicAnchor",
        "contentEncoding",
        "contentMediaType",
    }
)
_BOOLEAN_KEYWORDS = frozenset({"uniqueItems", "deprecated", "readOnly", "writeOnly"})
_TRUE_WORDS = frozenset({"true", "yes", "1", "y"})
_FALSE_WORDS = frozenset({"false", "no", "0", "n"})
# ECMA-262 (without the "u" flag) reads "-" after a class escape inside [...] as a literal;
# Python's re rejects it as a bad range.
_CLASS_ESCAPE_DASH = re.compile(r"(\\[wWdDsS])-")
_DROP = object()


@overload
def ensure_valid_input_schema(schema: None) -> None: ...
@overload
def ensure_valid_input_schema(schema: str) -> str: ...
@overload
def ensure_valid_input_schema(schema: Mapping[str, Any]) -> Schema: ...
def ensure_valid_input_schema(schema: Mapping[str, Any] | str | None) -> Schema | str | None:
    """Repair a tool input schema (see the module docstring for every rule).

    A mapping gives a new ``dict``; JSON text gives JSON text. As in Spring AI, ``None`` and
    blank text come back unchanged. Text that is not JSON, or JSON that is not an object,
    raises ``ValueError``.
    """
    if schema is None:
        return None
    if isinstance(schema, str):
        if not schema.strip():
            return schema
        try:
            parsed = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise ValueError(f"Tool input schema is not valid JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise ValueError(
                f"Tool input schema must be a JSON object, got {type(parsed).__name__}"
            )
        return json.dumps(_repair_root(parsed), ensure_ascii=False)
    if not isinstance(schema, Mapping):
        raise TypeError(
            f"Tool input schema must be a mapping or JSON text, got {type(schema).__name__}"
        )
    return _repair_root(schema)


def _repair_root(schema: Mapping[str, Any]) -> Schema:
    node = _repair_node(schema, 0)
    if "type" not in node:
        node = {"type": "object", **node}
    if node["type"] == "object" and "properties" not in node:
        node = {"type": "object", "properties": {}, **node}
    return node


def _repair_node(node: Mapping[str, Any], depth: int) -> Schema:
    if depth > MAX_DEPTH:
        raise ValueError(f"Tool input schema is nested more than {MAX_DEPTH} levels deep")
    out: Schema = {}
    for key, value in node.items():
        if key == "type":
            _set_type(out, node, value)
        elif key in ("required", "optional", "nullable", "exclusiveMinimum", "exclusiveMaximum"):
            continue  # depend on other keywords: handled below
        elif key == "items" and isinstance(value, list):
            out.setdefault("prefixItems", [_subschema_or_empty(v, depth) for v in value])
        elif key in SINGLE_SCHEMA:
            sub = _subschema(value, depth)
            if sub is not _DROP:
                out[key] = sub
        elif key in SCHEMA_LIST:
            items = value if isinstance(value, list) else [value]
            out[key] = [_subschema_or_empty(v, depth) for v in items]
        elif key in SCHEMA_MAP:
            out[key] = _schema_map(key, value, depth)
        else:
            fixed = _fix_keyword(key, value)
            if fixed is not _DROP:
                out[key] = fixed
    _apply_exclusive_bounds(out, node)
    _apply_nullable(out, node)
    _apply_required(out, node)
    _coerce_default(out)
    if (
        "type" not in out
        and isinstance(out.get("properties"), dict)
        and not ({"$ref", "anyOf", "oneOf", "allOf"} & out.keys())
    ):
        out = {"type": "object", **out}
    return out


def _subschema(value: Any, depth: int) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, Mapping):
        return _repair_node(value, depth + 1)
    if isinstance(value, str):  # a bare type name where a schema belongs: "items": "string"
        schema: Schema = {}
        _set_type(schema, {}, value)
        return schema if schema else _DROP
    return _DROP


def _subschema_or_empty(value: Any, depth: int) -> Any:
    sub = _subschema(value, depth)
    return {} if sub is _DROP else sub


def _schema_map(key: str, value: Any, depth: int) -> dict[str, Any]:
    if key == "properties" and isinstance(value, list):
        value = _properties_from_list(value)
    if not isinstance(value, Mapping):
        logger.warning("Dropped %r from a tool schema: expected an object, got %r", key, value)
        return {}
    result: dict[str, Any] = {}
    for name, sub in value.items():
        if key == "patternProperties":
            pattern = _fix_pattern(name)
            if pattern is None:
                continue
            name = pattern
        # every declared property stays, even when its schema is unusable ({} = any value)
        result[str(name)] = _subschema_or_empty(sub, depth)
    return result


def _properties_from_list(items: list[Any]) -> dict[str, Any]:
    # ["a", "b"] or [{"name": "a", "type": ...}] (OpenAPI parameter-list style)
    properties: dict[str, Any] = {}
    for item in items:
        if isinstance(item, str):
            properties[item] = {}
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            properties[item["name"]] = {k: v for k, v in item.items() if k != "name"}
    return properties


def _set_type(out: Schema, node: Mapping[str, Any], value: Any) -> None:
    names = value if isinstance(value, list) else [value]
    types: list[str] = []
    for name in names:
        json_type = _json_type(name, out, node)
        if json_type is None:  # "any" anywhere in a type list means any value
            out.pop("type", None)
            return
        if json_type and json_type not in types:
            types.append(json_type)
    if types:
        out["type"] = types if isinstance(value, list) else types[0]


def _json_type(name: Any, out: Schema, node: Mapping[str, Any]) -> str | None:
    """The JSON type for ``name``; ``None`` for "any value"; ``""`` for unknown names (dropped).
    May add ``items`` or ``format`` to ``out`` when the name implies them."""
    if not isinstance(name, str):
        return ""
    text = name.strip()
    element: str | None = None
    if text.endswith("[]"):  # Java / TypeScript arrays: "String[]"
        text, element = "array", text[:-2]
    elif "<" in text and text.endswith(">"):  # generics: "List<String>", "Map<String, X>"
        text, _, args = text[:-1].partition("<")
        element = args if "," not in args else None
    lowered = text.strip().lower()
    if lowered in _STRING_FORMATS:
        if "format" not in node:
            out.setdefault("format", _STRING_FORMATS[lowered])
        return "string"
    if lowered not in _TYPE_NAMES:
        logger.debug("Dropped unknown type name %r from a tool schema", name)
        return ""
    json_type = _TYPE_NAMES[lowered]
    if json_type == "array" and element and "items" not in node:
        item_schema: Schema = {}
        _set_type(item_schema, {}, element)
        out.setdefault("items", item_schema)
    return json_type


def _fix_keyword(key: str, value: Any) -> Any:
    if key == "pattern":
        return _DROP if not isinstance(value, str) else (_fix_pattern(value) or _DROP)
    if key in ("enum", "examples"):
        return value if isinstance(value, list) else _DROP if value is None else [value]
    if key in _NUMBER_KEYWORDS:
        number = _number(value)
        return _DROP if number is None or (key == "multipleOf" and number <= 0) else number
    if key in _COUNT_KEYWORDS:
        number = _number(value)
        ok = number is not None and number >= 0 and float(number).is_integer()
        return int(number) if ok and number is not None else _DROP
    if key in _TEXT_KEYWORDS:
        if value is None:
            return _DROP
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if key in _STRING_ONLY_KEYWORDS:
        return value if isinstance(value, str) else _DROP
    if key in _BOOLEAN_KEYWORDS:
        flag = _boolean(value)
        return _DROP if flag is None else flag
    return value


def _apply_exclusive_bounds(out: Schema, node: Mapping[str, Any]) -> None:
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if exclusive not in node:
            continue
        value = node[exclusive]
        if isinstance(value, bool) or (isinstance(value, str) and _boolean(value) is not None):
            # draft 4: a flag that makes "minimum"/"maximum" exclusive
            if _boolean(value) and bound in out:
                out[exclusive] = out.pop(bound)
        elif (number := _number(value)) is not None:
            out[exclusive] = number


def _apply_nullable(out: Schema, node: Mapping[str, Any]) -> None:
    if "nullable" not in node:
        return
    flag = _boolean(node["nullable"])
    if flag is None:
        out["nullable"] = node["nullable"]  # not a flag we understand: keep it as it was
    elif flag and "type" in out:
        types = out["type"] if isinstance(out["type"], list) else [out["type"]]
        if "null" not in types:
            out["type"] = [*types, "null"]


def _apply_required(out: Schema, node: Mapping[str, Any]) -> None:
    declared = node.get("required")
    if isinstance(declared, list):
        names = [name for name in declared if isinstance(name, str)]
    elif isinstance(declared, str) and _boolean(declared) is None:
        names = [declared]
    else:
        names = []  # a boolean "required" is a property-level flag, read by the parent
    raw_properties = node.get("properties")
    if isinstance(raw_properties, list):
        raw_properties = _properties_from_list(raw_properties)
    if isinstance(raw_properties, Mapping):
        for name, sub in raw_properties.items():
            if not isinstance(sub, Mapping):
                continue
            flag = sub.get("required")
            if not isinstance(flag, list) and _boolean(flag):
                names.append(str(name))
            optional = _boolean(sub.get("optional")) if "optional" in sub else None
            if optional is True:
                names = [n for n in names if n != name]
            elif optional is False:
                names.append(str(name))
    object_optional = node.get("optional")
    if isinstance(object_optional, list):
        names = [n for n in names if n not in object_optional]
    elif "optional" in node and _boolean(object_optional) is None:
        out["optional"] = object_optional  # unknown form: keep the keyword as it was
    properties = out.get("properties")
    if isinstance(properties, dict):
        names = [n for n in names if n in properties]
    names = list(dict.fromkeys(names))
    if names or isinstance(declared, list):
        out["required"] = names


def _coerce_default(out: Schema) -> None:
    default = out.get("default")
    if not isinstance(default, str):
        return
    json_type = out.get("type")
    if json_type == "boolean" and (flag := _boolean(default)) is not None:
        out["default"] = flag
    elif json_type in ("integer", "number") and (number := _number(default)) is not None:
        out["default"] = number


def _fix_pattern(pattern: str) -> str | None:
    for candidate in (pattern, _CLASS_ESCAPE_DASH.sub(r"\1\\-", pattern)):
        try:
            re.compile(candidate)
        except re.error:
            continue
        return candidate
    logger.warning("Dropped pattern %r from a tool schema: not a valid regular expression", pattern)
    return None


def _boolean(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    return None


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        if not math.isfinite(number):
            return None
        return int(number) if number.is_integer() and "." not in value else number
    return None
