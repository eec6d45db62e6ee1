"""Schema shaping for providers: OpenAI strict mode and plain mode, and undoing the nulls
strict mode forces on optional parameters."""

from __future__ import annotations

import copy
import json
from typing import Any, Literal

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from tooluse.schema import (
    StrictSchemaError,
    anthropic_strict_schema,
    drop_injected_nulls,
    generate_for_function_input,
    openai_strict_schema,
    plain_schema,
)

STRICT_KEYWORDS = {
    "type", "description", "title", "enum", "const", "default", "$ref", "$defs", "pattern",
    "format", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "minItems", "maxItems", "properties", "required", "additionalProperties", "items", "anyOf",
}  # fmt: skip


def assert_strict(schema: Any, path: str = "#") -> None:
    """OpenAI strict-mode rules on every node."""
    assert isinstance(schema, dict) and schema, f"{path}: empty or non-object schema"
    assert set(schema) <= STRICT_KEYWORDS, f"{path}: {set(schema) - STRICT_KEYWORDS}"
    if "$ref" in schema:
        assert set(schema) == {"$ref"}, f"{path}: $ref with siblings"
    if schema.get("type") == "object" or "properties" in schema:
        assert schema["additionalProperties"] is False, path
        assert schema["required"] == list(schema["properties"]), path
    for name, sub in schema.get("properties", {}).items():
        assert_strict(sub, f"{path}/properties/{name}")
    for name, sub in schema.get("$defs", {}).items():
        assert_strict(sub, f"{path}/$defs/{name}")
    for i, sub in enumerate(schema.get("anyOf", ())):
        assert_strict(sub, f"{path}/anyOf/{i}")
    if "items" in schema:
        assert_strict(schema["items"], f"{path}/items")


class Address(BaseModel):
    street: str
    zip_code: str | None = None


class Filter(BaseModel):
    field: str
    value: str


def book_trip(
    city: str,
    unit: Literal["c", "f"] = "c",
    days: int | None = None,
    address: Address | None = None,
    filters: list[Filter] | None = None,
    nights: int = 1,
) -> str:
    """Book a trip."""
    return city


def test_a_generated_tool_schema_becomes_strict() -> None:
    original = generate_for_function_input(book_trip)
    before = copy.deepcopy(original)
    strict = openai_strict_schema(original)

    assert original == before  # never modified in place
    assert_strict(strict)
    assert "$schema" not in strict
    properties = strict["properties"]
    assert properties["city"] == {"type": "string"}
    assert properties["unit"] == {
        "type": ["string", "null"],
        "enum": ["c", "f", None],
        "default": "c",
    }
    assert properties["days"] == {
        "anyOf": [{"type": "integer"}, {"type": "null"}]
    }  # null default gone
    assert properties["address"] == {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]}
    assert properties["nights"] == {"type": ["integer", "null"], "default": 1}
    assert strict["$defs"]["Address"]["required"] == ["street", "zip_code"]


def test_ref_with_siblings_is_inlined_and_keywords_strict_mode_rejects_are_described() -> None:
    schema = {
        "type": "object",
        "properties": {
            "home": {"$ref": "#/$defs/Place", "description": "Where you live"},
            "code": {"type": "string", "minLength": 2, "maxLength": 8, "format": "iso-3166"},
            "when": {"type": "string", "format": "date-time"},
            "pick": {"oneOf": [{"type": "integer"}, {"type": "string"}], "discriminator": {}},
            "one": {"allOf": [{"$ref": "#/$defs/Place"}], "description": "single allOf"},
            "ids": {
                "type": "array",
                "items": {"type": "integer"},
                "uniqueItems": True,
                "maxItems": 5,
            },
        },
        "required": ["home", "code", "when", "pick", "one", "ids"],
        "$defs": {
            "Place": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            }
        },
    }
    strict = openai_strict_schema(schema)
    assert_strict(strict)
    place = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    properties = strict["properties"]
    assert properties["home"] == {**place, "description": "Where you live"}
    assert properties["one"] == {**place, "description": "single allOf"}
    assert properties["code"] == {
        "type": "string",
        "description": "(minLength: 2; maxLength: 8; format: iso-3166)",
    }
    assert properties["when"] == {"type": "string", "format": "date-time"}
    assert properties["pick"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert properties["ids"] == {
        "type": "array",
        "items": {"type": "integer"},
        "maxItems": 5,
        "description": "(uniqueItems: true)",
    }


def test_tools_without_parameters_are_strict_too() -> None:
    assert openai_strict_schema({"type": "object"}) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "array"}, "root of a strict tool schema must be an object, got type 'array'"),
        (
            {
                "type": "object",
                "properties": {
                    "tags": {"type": "object", "additionalProperties": {"type": "string"}}
                },
            },
            r'#/properties/tags: additionalProperties \{"type": "string"\} \(free-form keys\)',
        ),
        (
            {"type": "object", "properties": {"meta": {"type": "object"}}},
            "#/properties/meta: an object with free-form keys",
        ),
        (
            {"type": "object", "properties": {"x": {}}},
            r"#/properties/x: a value of any type \(\{\}\)",
        ),
        (
            {"type": "object", "properties": {"x": {"description": "anything"}}},
            "a value of any type",
        ),
        ({"type": "object", "properties": {"x": True}}, "boolean schemas"),
        (
            {
                "type": "object",
                "properties": {"p": {"type": "array", "prefixItems": [{"type": "integer"}]}},
            },
            r"tuple items \(prefixItems\) have no strict equivalent",
        ),
        (
            {
                "type": "object",
                "properties": {"p": {"type": "object", "patternProperties": {"^x": {}}}},
            },
            "pattern-keyed properties",
        ),
        (
            {
                "type": "object",
                "properties": {"p": {"allOf": [{"type": "integer"}, {"minimum": 1}]}},
            },
            "allOf with 2 schemas",
        ),
        (
            {
                "type": "object",
                "properties": {"p": {"$ref": "#/$defs/Missing", "description": "d"}},
            },
            "does not resolve",
        ),
    ],
)
def test_schemas_strict_mode_cannot_express_are_refused_with_the_reason(
    schema: dict[str, Any], message: str
) -> None:
    with pytest.raises(StrictSchemaError, match=message):
        openai_strict_schema(schema)


def test_generated_dict_parameters_are_refused() -> None:
    def tag(tags: dict[str, str]) -> None:
        """Tag."""

    with pytest.raises(StrictSchemaError, match="#/properties/tags"):
        openai_strict_schema(generate_for_function_input(tag))


def test_plain_mode_only_drops_the_dialect_marker() -> None:
    original = generate_for_function_input(book_trip)
    plain = plain_schema(original)
    assert "$schema" in original and "$schema" not in plain
    assert plain == {k: v for k, v in original.items() if k != "$schema"}


# -- dropping the nulls strict mode forces ---------------------------------------------------


def test_injected_nulls_are_dropped_at_every_depth_and_real_nulls_kept() -> None:
    schema = generate_for_function_input(book_trip)
    arguments = json.dumps(
        {
            "city": "Oslo",
            "unit": None,  # optional, not nullable: injected
            "nights": None,  # injected
            "days": None,  # declared int | None: a real null
            "address": {"street": "Main", "zip_code": None},
            "filters": [{"field": "a", "value": "b"}],
        }
    )
    cleaned = json.loads(drop_injected_nulls(arguments, schema))
    assert cleaned == {
        "city": "Oslo",
        "days": None,
        "address": {"street": "Main", "zip_code": None},
        "filters": [{"field": "a", "value": "b"}],
    }


def test_nested_injected_nulls_behind_refs_and_in_arrays() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
            "owner": {"anyOf": [{"$ref": "#/$defs/Item"}, {"type": "null"}]},
        },
        "required": ["items"],
        "$defs": {
            "Item": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "size": {"type": "integer"}},
                "required": ["name"],
            }
        },
    }
    arguments = '{"items": [{"name": "a", "size": null}], "owner": {"name": "b", "size": null}}'
    assert json.loads(drop_injected_nulls(arguments, schema)) == {
        "items": [{"name": "a"}],
        "owner": {"name": "b"},
    }


@pytest.mark.parametrize("arguments", ['{"city": "Oslo"}', '{"city": ', "[1, 2]", "", "null"])
def test_arguments_needing_no_change_are_returned_as_sent(arguments: str) -> None:
    assert drop_injected_nulls(arguments, generate_for_function_input(book_trip)) == arguments


# A flat tool schema with random parameter types and optionality, and arguments for it.
PARAMETER_TYPES: dict[str, tuple[dict[str, Any], st.SearchStrategy[Any]]] = {
    "string": ({"type": "string"}, st.text(max_size=5)),
    "integer": ({"type": "integer"}, st.integers()),
    "boolean": ({"type": "boolean"}, st.booleans()),
    "enum": ({"type": "string", "enum": ["a", "b"]}, st.sampled_from(["a", "b"])),
    "nullable": (
        {"anyOf": [{"type": "number"}, {"type": "null"}]},
        st.none() | st.floats(allow_nan=False, allow_infinity=False),
    ),
    "list": ({"type": "array", "items": {"type": "integer"}}, st.lists(st.integers(), max_size=3)),
}


@st.composite
def schema_and_arguments(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    names = draw(st.lists(st.from_regex(r"[a-z]{1,6}", fullmatch=True), max_size=6, unique=True))
    properties: dict[str, Any] = {}
    required: list[str] = []
    arguments: dict[str, Any] = {}
    for name in names:
        schema, values = PARAMETER_TYPES[draw(st.sampled_from(sorted(PARAMETER_TYPES)))]
        properties[name] = schema
        is_required = draw(st.booleans())
        if is_required:
            required.append(name)
        if is_required or draw(st.booleans()):
            arguments[name] = draw(values)
    schema = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return schema, arguments


@given(schema_and_arguments())
def test_strict_round_trip_preserves_the_arguments(
    case: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    schema, arguments = case
    # Validators without the (slow) meta-schema check on every example.
    jsonschema.Draft202012Validator(schema).validate(arguments)
    strict = openai_strict_schema(schema)
    assert_strict(strict)
    # What a strict-mode model must send: every property, null for the ones left out.
    sent = {name: arguments.get(name) for name in schema["properties"]}
    jsonschema.Draft202012Validator(strict).validate(sent)
    # Back to the arguments; an omitted parameter that accepts null arrives as null (strict
    # mode cannot tell "omitted" from "null" there, and null is a value it accepts).
    expected = {
        name: arguments.get(name)
        for name, prop in schema["properties"].items()
        if name in arguments or "anyOf" in prop
    }
    assert json.loads(drop_injected_nulls(json.dumps(sent), schema)) == expected


# -- Anthropic strict tool use --------------------------------------------------------------------

ANTHROPIC_KEYWORDS = {
    "type", "description", "enum", "const", "$ref", "$defs", "format", "minItems",
    "properties", "required", "additionalProperties", "items", "anyOf",
}  # fmt: skip
ANTHROPIC_FORMATS = {"date-time", "time", "date", "email", "uri", "uuid", "ipv4", "ipv6"}


def assert_anthropic_strict(schema: Any, path: str = "#") -> None:
    """Anthropic's strict subset on every node (no numeric, length or pattern constraints,
    minItems 0 or 1, its formats), plus the shape rules strict shaping gives."""
    assert isinstance(schema, dict) and schema, f"{path}: empty or non-object schema"
    assert set(schema) <= ANTHROPIC_KEYWORDS, f"{path}: {set(schema) - ANTHROPIC_KEYWORDS}"
    assert schema.get("minItems", 0) <= 1, path
    assert schema.get("format", "date") in ANTHROPIC_FORMATS, path
    if schema.get("type") == "object" or "properties" in schema:
        assert schema["additionalProperties"] is False, path
    for key in ("properties", "$defs"):
        for name, sub in schema.get(key, {}).items():
            assert_anthropic_strict(sub, f"{path}/{key}/{name}")
    for i, sub in enumerate(schema.get("anyOf", ())):
        assert_anthropic_strict(sub, f"{path}/anyOf/{i}")
    if "items" in schema:
        assert_anthropic_strict(schema["items"], f"{path}/items")


def test_anthropic_strict_describes_the_constraints_it_cannot_enforce() -> None:
    schema = {
        "type": "object",
        "title": "Order",
        "properties": {
            "quantity": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$", "format": "hostname"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "notes": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "when": {"type": "string", "format": "date"},
        },
        "required": ["code", "tags", "notes", "when"],
    }
    strict = anthropic_strict_schema(schema)
    assert_anthropic_strict(strict)
    properties = strict["properties"]
    assert properties["quantity"] == {
        "type": ["integer", "null"],  # optional: nullable, the null dropped on the way back
        "description": "(minimum: 1; maximum: 10; default: 1)",
    }
    assert properties["code"] == {
        "type": "string",
        "description": '(pattern: "^[A-Z]{3}$"; format: hostname)',
    }
    assert properties["tags"]["description"] == "(minItems: 2)"
    assert properties["notes"]["minItems"] == 1
    assert properties["when"] == {"type": "string", "format": "date"}
    assert strict["required"] == list(schema["properties"])
    # OpenAI's strict mode keeps what it can enforce.
    assert openai_strict_schema(schema)["properties"]["code"]["pattern"] == "^[A-Z]{3}$"


class Node(BaseModel):
    name: str
    children: list[Node] = []


def tree(root: Node) -> str:
    return root.name


def test_anthropic_strict_refuses_recursive_schemas() -> None:
    schema = generate_for_function_input(tree)
    assert_strict(openai_strict_schema(schema))  # OpenAI accepts recursion
    with pytest.raises(StrictSchemaError, match="recursive schema has no Anthropic strict"):
        anthropic_strict_schema(schema)


class Folder(BaseModel):
    name: str
    parent: Folder = Field(None, description="the folder this one is in")  # type: ignore[assignment]


def move(folder: Folder) -> str:
    return folder.name


def test_a_recursive_ref_with_a_description_is_shaped_not_inlined_forever() -> None:
    # {"$ref": "#/$defs/Folder", "description": ...} inside Folder itself: inlining the
    # target to drop the sibling met the same $ref again, without end (RecursionError,
    # which failed every request offering the tool with strict_tools=True)
    schema = generate_for_function_input(move)
    strict = openai_strict_schema(schema)
    assert_strict(strict)
    parent = strict["$defs"]["Folder"]["properties"]["parent"]
    assert parent == {
        "anyOf": [{"$ref": "#/$defs/Folder"}, {"type": "null"}],
        "description": "the folder this one is in",
    }
    assert strict["properties"]["folder"] == {"$ref": "#/$defs/Folder"}
    sent = {"folder": {"name": "a", "parent": {"name": "root", "parent": None}}}
    jsonschema.Draft202012Validator(strict).validate(sent)
    assert json.loads(drop_injected_nulls(json.dumps(sent), schema)) == {
        "folder": {"name": "a", "parent": {"name": "root"}}
    }


def test_a_generated_tool_schema_is_anthropic_strict_and_round_trips() -> None:
    schema = generate_for_function_input(book_trip)
    strict = anthropic_strict_schema(schema)
    assert_anthropic_strict(strict)
    sent = {name: None for name in strict["properties"]} | {"city": "Paris"}
    jsonschema.Draft202012Validator(strict).validate(sent)
    # unit and nights are left out (their defaults apply); the others accept null themselves.
    expected = {"city": "Paris", "days": None, "address": None, "filters": None}
    assert json.loads(drop_injected_nulls(json.dumps(sent), schema)) == expected


def test_a_null_an_enum_admits_is_a_real_null_and_is_kept() -> None:
    def sort(order: Literal["asc", "desc", None] = "asc", limit: int = 10) -> str:
        """Sort; order None keeps the stored order."""
        return str(order)

    schema = generate_for_function_input(sort)
    assert schema["properties"]["order"]["enum"] == ["asc", "desc", None]
    for shaped in (openai_strict_schema(schema), anthropic_strict_schema(schema)):
        assert shaped["properties"]["order"]["enum"] == ["asc", "desc", None]  # not re-wrapped
    arguments = json.dumps({"order": None, "limit": None})
    # order=None is a value the tool accepts (not its default "asc"); limit's null is injected.
    assert json.loads(drop_injected_nulls(arguments, schema)) == {"order": None}
