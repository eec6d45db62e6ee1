"""JSON Schema (draft 2020-12) for a tool's input, generated from Python type hints by pydantic.

The rules (SPEC section 2, following Spring AI's ``JsonSchemaGenerator``):

- root keys in the order ``$schema, type, properties, required, additionalProperties`` (then
  ``$defs`` when there are any);
- one property per parameter in declaration order, named as the model sends it (the alias of
  its pydantic ``Field``, else its name); the ``ToolContext`` parameter is skipped;
- required unless the parameter has a default (its own or its ``Field``'s), is
  ``Optional``/``| None`` or says ``ToolParam(required=False)``;
- a parameter's description comes from ``ToolParam(description=...)`` else its docstring entry;
  its default (when JSON-serialisable) is shown as ``default``;
- a parameter's top-level ``format`` is dropped (some providers reject OpenAPI formats), nested
  ones are kept;
- each parameter's ``$defs`` are hoisted to the root (see ``_defs``);
- ``additionalProperties: false`` on every node that has ``properties`` and says nothing itself,
  so ``dict[str, X]`` keeps its value schema;
- titles pydantic adds are dropped: they repeat the property or class name and cost tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import PydanticUserError, TypeAdapter
from pydantic_core import to_jsonable_python

from tooluse.schema._defs import DEFS_PREFIX, hoist_defs
from tooluse.schema._keywords import Schema, map_subschemas
from tooluse.tools._fields import without_argument_attributes
from tooluse.tools._signature import EMPTY, ToolSignature, read_signature

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


def generate_for_function_input(function: Callable[..., Any]) -> Schema:
    """The input schema of a tool backed by ``function`` (a function, bound method, partial or
    callable object). Raises ``ValueError`` naming the parameter whose type has no schema."""
    name = getattr(function, "__name__", None) or type(function).__name__
    return schema_for_signature(read_signature(function, tool_name=name), tool_name=name)


def generate_for_type(tp: Any) -> Schema:
    """The schema of one type, with ``$schema`` and the same post-processing as tool inputs.

    ``None`` means "no input": an object with no properties. A root that is only a ``$ref``
    (a recursive model) is replaced by the definition it points to, so an object type always
    gives an object root.
    """
    if tp is None or tp is type(None):
        root: Schema = {"type": "object", "properties": {}}
    else:
        root = _inline_root_ref(type_schema(tp, where=f"type {tp!r}"))
    root = _finalize(root)
    if root.get("type") == "object" and "properties" in root:
        root.setdefault("required", [])
    return _ordered_root({"$schema": DRAFT_2020_12, **root})


def schema_for_signature(signature: ToolSignature, *, tool_name: str) -> Schema:
    defs: dict[str, Any] = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in signature.parameters:
        where = f"Tool '{tool_name}', parameter '{param.name}'"
        annotation = without_argument_attributes(param.annotation)  # shown below instead
        prop = hoist_defs(defs, type_schema(annotation, where=where))
        prop.pop("format", None)
        if param.description:
            prop["description"] = param.description
        if param.required:
            required.append(param.argument_name)
        elif (
            param.default is not EMPTY and (default := _json_default(param.default)) is not _NO_JSON
        ):
            prop["default"] = default
        properties[param.argument_name] = prop
    root: Schema = {
        "$schema": DRAFT_2020_12,
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    if defs:
        root["$defs"] = defs
    return _ordered_root(_finalize(root))


def type_schema(annotation: Any, *, where: str) -> Schema:
    """pydantic's schema of ``annotation``; ``ValueError`` saying where, when it has none."""
    try:
        schema: Schema = TypeAdapter(annotation).json_schema()
    except (PydanticUserError, TypeError) as exc:
        raise ValueError(f"{where}: type {annotation!r} has no JSON schema: {exc}") from exc
    return schema


_NO_JSON = object()


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
