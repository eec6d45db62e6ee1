"""Shaping tool input schemas for a provider.

Three modes:

- **plain**: the schema as generated, minus the ``$schema`` key no provider needs (tokens).
- **OpenAI strict** (``"strict": true`` on a function tool): OpenAI's constrained decoding only
  accepts a subset of JSON Schema. Every object lists all its properties in ``required`` and
  has ``additionalProperties: false``; a property that was optional becomes nullable instead
  (the model sends ``null`` for "not given", which :func:`drop_injected_nulls` turns back into
  an omitted key before the tool sees it); keywords strict mode rejects are removed, and value
  constraints among them (``maxLength``...) are appended to the description so the model
  still reads them. The tool layer keeps validating against the original schema, so nothing
  is lost by loosening. Schemas that strict mode cannot express without changing their meaning
  (free-form ``dict`` values, tuples, ``{}`` "any" values) raise :class:`StrictSchemaError`;
  the adapter then sends that tool in plain mode.
- **Anthropic strict** (``"strict": true`` on a Claude tool): the same shaping for Anthropic's
  subset, which is narrower: no numeric, string-length or pattern constraints and no
  ``minItems`` above 1 (all moved into the description), fewer formats, and no recursive
  schemas (:class:`StrictSchemaError`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "StrictSchemaError",
    "anthropic_strict_schema",
    "drop_injected_nulls",
    "openai_strict_schema",
    "plain_schema",
]

_CONSTRAINTS = frozenset(
    {
        "pattern", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
        "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "minProperties",
        "maxProperties", "contains",
    }
)  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class _Dialect:
    """What one provider's strict mode accepts."""

    name: str
    kept: frozenset[str]  # keywords accepted as they are
    formats: frozenset[str]
    max_min_items: int | None  # a larger minItems goes into the description
    recursion: bool  # whether $defs may refer to themselves

    @property
    def described(self) -> frozenset[str]:
        """Value constraints it rejects: moved into the description."""
        return _CONSTRAINTS - self.kept


_OPENAI_KEPT = frozenset(
    {
        "type", "description", "title", "enum", "const", "default", "$ref",
        "pattern", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
        "minItems", "maxItems",
    }
)  # fmt: skip
_OPENAI = _Dialect(
    name="OpenAI",
    kept=_OPENAI_KEPT,
    formats=frozenset(
        {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
    ),
    max_min_items=None,
    recursion=True,
)
_ANTHROPIC = _Dialect(
    name="Anthropic",
    kept=frozenset({"type", "description", "enum", "const", "$ref", "minItems"}),
    formats=frozenset({"date-time", "time", "date", "email", "uri", "uuid", "ipv4", "ipv6"}),
    max_min_items=1,
    recursion=False,
)
# Keywords with no strict equivalent that change which documents are valid in a way that
# dropping them would forbid valid input (patternProperties) or misdescribe the shape.
_STRICT_IMPOSSIBLE = {
    "patternProperties": "pattern-keyed properties",
    "prefixItems": "tuple items (prefixItems)",
    "additionalItems": "tuple items (additionalItems)",
}


class StrictSchemaError(ValueError):
    """The schema cannot be expressed in a provider's strict mode; the message says where and
    why."""


def plain_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema without its ``$schema`` key (the rest is sent as-is)."""
    return {key: value for key, value in schema.items() if key != "$schema"}


def openai_strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A new schema satisfying OpenAI strict mode; ``schema`` is not modified.

    Raises :class:`StrictSchemaError` when the schema has no strict equivalent.
    """
    return _strict_schema(schema, _OPENAI)


def anthropic_strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A new schema satisfying Anthropic's strict tool use; ``schema`` is not modified.

    Raises :class:`StrictSchemaError` when the schema has no strict equivalent there.
    """
    return _strict_schema(schema, _ANTHROPIC)


def _strict_schema(schema: Mapping[str, Any], dialect: _Dialect) -> dict[str, Any]:
    if schema.get("type") != "object":
        raise StrictSchemaError(
            f"the root of a strict tool schema must be an object, got type {schema.get('type')!r}"
        )
    root = dict(schema)
    root.pop("$schema", None)
    if "properties" not in root:  # a tool without parameters
        root["properties"] = {}
    if not dialect.recursion:
        _refuse_recursion(schema, dialect)
    return _Shaper(schema, dialect).node(root, "#")


def _refuse_recursion(schema: Mapping[str, Any], dialect: _Dialect) -> None:
    """Raise when a definition refers back to itself, directly or through others."""

    def refs(node: Any) -> set[str]:
        if isinstance(node, Mapping):
            found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
            return found.union(*(refs(value) for value in node.values()))
        if isinstance(node, list):
            return set().union(*(refs(value) for value in node))
        return set()

    graph = {
        f"#/{key}/{name}": refs(sub)
        for key in ("$defs", "definitions")
        for name, sub in (schema.get(key) or {}).items()
    }

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for ref in graph.get(start, ()):
            if ref == target or (ref not in seen and reaches(ref, target, seen | {ref})):
                return True
        return False

    for name in graph:
        if reaches(name, name, {name}):
            raise StrictSchemaError(
                f"{name}: a recursive schema has no {dialect.name} strict equivalent"
            )


class _Shaper:
    def __init__(self, root: Mapping[str, Any], dialect: _Dialect) -> None:
        self._root = root
        self._dialect = dialect
        self._inlining: list[str] = []  # the $refs being inlined, outermost first

    def node(self, node: Any, path: str) -> dict[str, Any]:
        if not isinstance(node, Mapping):
            raise StrictSchemaError(f"{path}: boolean schemas are not allowed in strict mode")
        if not node or set(node) <= {"description", "title", "default"}:
            raise StrictSchemaError(f"{path}: a value of any type ({{}}) has no strict equivalent")
        shaped: dict[str, Any] = {}
        notes: list[str] = []
        for key, value in node.items():
            if key in _STRICT_IMPOSSIBLE:
                raise StrictSchemaError(
                    f"{path}: {_STRICT_IMPOSSIBLE[key]} have no strict equivalent"
                )
            dialect = self._dialect
            if key == "minItems" and dialect.max_min_items is not None:
                if isinstance(value, int) and value <= dialect.max_min_items:
                    shaped[key] = value
                else:
                    notes.append(f"{key}: {json.dumps(value)}")
            elif key in dialect.kept:
                shaped[key] = value
            elif key in ("$defs", "definitions"):
                shaped[key] = {
                    name: self._definition(f"{path}/{key}/{name}", sub)
                    for name, sub in value.items()
                }
            elif key == "items":
                if not isinstance(value, Mapping):
                    raise StrictSchemaError(f"{path}: tuple items have no strict equivalent")
                shaped["items"] = self.node(value, f"{path}/items")
            elif key in ("anyOf", "oneOf"):
                # "exactly one" loosened to "any": the tool layer still validates the original.
                shaped["anyOf"] = [self.node(v, f"{path}/{key}/{i}") for i, v in enumerate(value)]
            elif key == "allOf":
                if len(value) != 1:
                    raise StrictSchemaError(
                        f"{path}: allOf with {len(value)} schemas has no strict equivalent"
                    )
                shaped.update(
                    {
                        k: v
                        for k, v in self.node(value[0], f"{path}/allOf/0").items()
                        if k not in node
                    }
                )
            elif key == "format":
                if value in dialect.formats:
                    shaped["format"] = value
                else:
                    notes.append(f"format: {value}")
            elif key in dialect.described or key == "default":
                notes.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
            # Everything else (properties, required, additionalProperties below; annotations
            # such as examples or discriminator) is rebuilt or dropped.
        if "properties" in node or node.get("type") == "object":
            self._object(node, shaped, path)
        if shaped.get("default", ...) is None:
            del shaped["default"]  # a null default says nothing once the property is nullable
        if notes:
            described = shaped.get("description", "")
            shaped["description"] = f"{described} ({'; '.join(notes)})".lstrip()
        if "$ref" in shaped and len(shaped) > 1:
            return self._inline_ref(shaped, path)
        return shaped

    def _object(self, node: Mapping[str, Any], shaped: dict[str, Any], path: str) -> None:
        extra = node.get("additionalProperties", False)
        if extra is not False:
            raise StrictSchemaError(
                f"{path}: additionalProperties {json.dumps(extra)} (free-form keys) "
                "has no strict equivalent"
            )
        properties = node.get("properties")
        if properties is None:
            raise StrictSchemaError(
                f"{path}: an object with free-form keys has no strict equivalent"
            )
        required = set(node.get("required", ()))
        shaped_properties = {}
        for name, sub in properties.items():
            prop = self.node(sub, f"{path}/properties/{name}")
            shaped_properties[name] = prop if name in required else _nullable(prop)
        shaped["type"] = "object"
        shaped["properties"] = shaped_properties
        shaped["required"] = list(properties)
        shaped["additionalProperties"] = False

    def _definition(self, path: str, sub: Any) -> dict[str, Any]:
        # A definition is not inlined into itself: it stays referenced from within.
        self._inlining.append(path)
        try:
            return self.node(sub, path)
        finally:
            self._inlining.pop()

    def _inline_ref(self, shaped: dict[str, Any], path: str) -> dict[str, Any]:
        # Strict mode forbids keywords next to $ref (e.g. a description): inline the target.
        ref = shaped["$ref"]
        siblings = {k: v for k, v in shaped.items() if k != "$ref"}
        if ref in self._inlining:
            # The target holds this very $ref with siblings again (a recursive model whose
            # field has a description): inlining would never end. A one-variant anyOf keeps
            # the reference and takes the siblings.
            return {"anyOf": [{"$ref": ref}], **siblings}
        target = _resolve(self._root, ref, path)
        self._inlining.append(ref)
        try:
            inlined = self.node(target, f"{path}/$ref")
        finally:
            self._inlining.pop()
        inlined.update(siblings)
        return inlined


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if _admits_null(schema, None):
        return schema
    kind = schema.get("type")
    if kind is not None and "const" not in schema and "$ref" not in schema:
        result = {**schema, "type": [*kind, "null"] if isinstance(kind, list) else [kind, "null"]}
        if "enum" in schema:
            result["enum"] = [*schema["enum"], None]
        return result
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def _admits_null(schema: Any, root: Mapping[str, Any] | None) -> bool:
    """Whether ``schema`` accepts ``null`` (``$ref`` resolved against ``root`` when given)."""
    if not isinstance(schema, Mapping):
        return schema is True
    if "$ref" in schema and root is not None:
        return _admits_null(_resolve(root, schema["$ref"], "#"), root)
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return "enum" not in schema or None in schema["enum"]
    if "const" in schema:
        return schema["const"] is None
    variants = [*schema.get("anyOf", ()), *schema.get("oneOf", ())]
    if variants:
        return any(_admits_null(v, root) for v in variants)
    if "allOf" in schema:
        return all(_admits_null(v, root) for v in schema["allOf"])
    if "enum" in schema:  # with no type: Literal["a", None] is {"enum": ["a", null]}
        return kind is None and None in schema["enum"]
    return (
        kind is None
        and "enum" not in schema
        and "$ref" not in schema
        and "properties" not in schema
    )


def _resolve(root: Mapping[str, Any], ref: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise StrictSchemaError(f"{path}: only local $refs ('#/...') are supported, got {ref!r}")
    target: Any = root
    for part in filter(None, ref[1:].split("/")):
        if not isinstance(target, Mapping) or part not in target:
            raise StrictSchemaError(f"{path}: $ref {ref!r} does not resolve")
        target = target[part]
    if not isinstance(target, Mapping):
        raise StrictSchemaError(f"{path}: $ref {ref!r} does not point to a schema")
    return target


def drop_injected_nulls(arguments: str, schema: Mapping[str, Any]) -> str:
    """Undo strict mode's forced nullability on the model's arguments.

    ``schema`` is the tool's original schema. A ``null`` for a property that was optional and
    does not itself accept ``null`` means "not given", so the key is removed and the tool's
    default applies. Arguments that are not a JSON object, or need no change, are returned
    unchanged (text intact), so broken JSON still reaches the tool layer as the model wrote it.
    """
    try:
        value = json.loads(arguments) if arguments.strip() else None
    except ValueError:
        return arguments
    if not isinstance(value, dict) or not _drop(value, schema, schema):
        return arguments
    return json.dumps(value, ensure_ascii=False)


def _drop(value: Any, schema: Any, root: Mapping[str, Any]) -> bool:
    """Remove injected nulls in place; True if anything changed."""
    if not isinstance(schema, Mapping):
        return False
    if "$ref" in schema:
        try:
            schema = {**_resolve(root, schema["$ref"], "#"), **schema}
        except StrictSchemaError:
            return False
        del schema["$ref"]
    changed = False
    if isinstance(value, dict) and isinstance(schema.get("properties"), Mapping):
        properties = schema["properties"]
        required = set(schema.get("required", ()))
        for key in [k for k in value if k in properties]:
            if (
                value[key] is None
                and key not in required
                and not _admits_null(properties[key], root)
            ):
                del value[key]
                changed = True
            else:
                changed |= _drop(value[key], properties[key], root)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            changed |= _drop(item, schema["items"], root)
    else:
        variants = [
            v for v in (*schema.get("anyOf", ()), *schema.get("allOf", ())) if not _is_null_type(v)
        ]
        if len(variants) == 1:
            changed |= _drop(value, variants[0], root)
    return changed


def _is_null_type(schema: Any) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "null"
