"""JSON Schema (draft 2020-12) generated from Python types by pydantic: of one type, and of an
object built property by property (a tool's parameters, read by ``tooluse.tools``).

The rules (SPEC section 2, following Spring AI's ``JsonSchemaGenerator``):

- root keys in the order ``$schema, type, properties, required, additionalProperties`` (then
  ``$defs`` when there are any);
- an object's properties in the order given, each with its description and, when optional,
  its default (when JSON can hold it) as ``default``;
- a property's top-level ``format`` is dropped (some providers reject OpenAPI formats), nested
  ones are kept;
- each property's ``$defs`` are hoisted to the root (see ``_defs``);
- ``additionalProperties: false`` on every node that has ``properties`` and says nothing itself,
  so ``dict[str, X]`` keeps its value schema;
- titles pydantic adds are dropped: they repeat the property or class name and cost tokens.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import PydanticUserError, TypeAdapter
from pydantic_core import to_jsonable_python

from tooluse.schema._defs import DEFS_PREFIX, hoist_defs
from tooluse.schema._keywords import Schema, map_subschemas

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
_ROOT_ORDER = ("$schema", "type", "properties", "required", "additionalProperties")
_NODE_FIRST = ("type", "description")
# keywords whose value is data that may hold an infinite number; an infinite bound is no bound
_NUMERIC_DATA = (
    "default",
    "examples",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
)


def generate_for_type(tp: Any) -> Schema:
    """The schema of one type, with ``$schema`` and the same post-processing as tool inputs.

    ``None`` means "no input": an object with no properties. A root that is only a ``$ref``
    (a recursive model) is replaced by the definition it points to, so an object type always
    gives an object root.
    """
    if tp is None or tp is type(None):
        root: Schema = {"type": "object", "properties": {}}
    else:
        root = _inline_root_ref(_type_schema(tp, where=f"type {tp!r}"))
    root = _finalize(root)
    if root.get("type") == "object" and "properties" in root:
        root.setdefault("required", [])
    return _ordered_root({"$schema": DRAFT_2020_12, **root})


NO_DEFAULT = inspect.Parameter.empty
_NO_JSON = object()


@dataclasses.dataclass(frozen=True, slots=True)
class Property:
    """One property of an object schema: ``name`` as the JSON sends it, the ``annotation``
    whose schema it has, whether it is ``required``, its ``description`` and ``default``
    (``NO_DEFAULT``: none); ``where`` names it in errors (``Tool 'f', parameter 'x'``)."""

    name: str
    annotation: Any
    required: bool
    description: str | None = None
    default: Any = NO_DEFAULT
    where: str = ""


def generate_for_object(properties: Iterable[Property]) -> Schema:
    """The closed object schema with these properties, in order, with ``$schema``."""
    defs: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    required: list[str] = []
    for prop in properties:
        schema = hoist_defs(defs, _type_schema(prop.annotation, where=prop.where))
        schema.pop("format", None)
        if prop.description:
            schema["description"] = prop.description
        if prop.required:
            required.append(prop.name)
        elif (
            prop.default is not NO_DEFAULT
            and (default := _json_default(prop.default)) is not _NO_JSON
        ):
            schema["default"] = default
        schemas[prop.name] = schema
    root: Schema = {
        "$schema": DRAFT_2020_12,
        "type": "object",
        "properties": schemas,
        "required": required,
        "additionalProperties": False,
    }
    if defs:
        root["$defs"] = defs
    return _ordered_root(_finalize(root))


def _type_schema(annotation: Any, *, where: str) -> Schema:
    """pydantic's schema of ``annotation``; ``ValueError`` saying where, when it has none."""
    try:
        schema: Schema = TypeAdapter(annotation).json_schema()
    except (PydanticUserError, TypeError) as exc:
        raise ValueError(f"{where}: type {annotation!r} has no JSON schema: {exc}") from exc
    return schema


def _json_default(value: Any) -> Any:
    try:
        jsonable = to_jsonable_python(value)
    except ValueError:
        # PydanticSerializationError (a sentinel object), UnicodeDecodeError (bytes that are
        # not UTF-8), a circular list: the schema just omits the default, as pydantic does
        return _NO_JSON
    return jsonable if _is_strict_json(jsonable) else _NO_JSON


def _is_strict_json(value: Any) -> bool:
    """Whether ``value`` has no NaN or infinity: JSON has no such numbers, and clients that
    send the schema (httpx, so the OpenAI SDK) refuse to encode them."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(_is_strict_json(item) for item in value)
    if isinstance(value, dict):
        return all(_is_strict_json(item) for item in value.values())
    return True


def _finalize(node: Any) -> Any:
    if not isinstance(node, Mapping):
        return node
    result = map_subschemas(node, _finalize)
    if isinstance(result.get("title"), str):
        del result["title"]
    for key in _NUMERIC_DATA:
        if key in result and not _is_strict_json(result[key]):
            del result[key]  # pydantic writes `= math.inf` or `le=math.inf` as is
    if "properties" in result and "additionalProperties" not in result:
        result["additionalProperties"] = False
    # "type" and "description" first: that is what a model (or a person) reads first.
    return {
        **{key: result[key] for key in _NODE_FIRST if key in result},
        **{key: value for key, value in result.items() if key not in _NODE_FIRST},
    }


def _inline_root_ref(schema: Schema) -> Schema:
    ref = schema.get("$ref")
    defs = schema.get("$defs")
    if not (isinstance(ref, str) and ref.startswith(DEFS_PREFIX) and isinstance(defs, dict)):
        return schema
    target = defs.get(ref[len(DEFS_PREFIX) :])
    if not isinstance(target, dict) or set(schema) - {"$ref", "$defs"}:
        return schema
    return {**target, "$defs": defs}


def _ordered_root(root: Schema) -> Schema:
    ordered = {key: root[key] for key in _ROOT_ORDER if key in root}
    ordered.update((k, v) for k, v in root.items() if k not in ordered and k != "$defs")
    if "$defs" in root:
        ordered["$defs"] = root["$defs"]
    return ordered
