"""``ensure_valid_input_schema``: repairing foreign tool schemas (MCP, OpenAPI, BFCL, ACEBench,
hand-written)."""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tooluse.schema import ensure_valid_input_schema


def repaired(schema: dict[str, Any]) -> dict[str, Any]:
    result = ensure_valid_input_schema(schema)
    Draft202012Validator.check_schema(result)
    return result


# Spring AI's rules -----------------------------------------------------------------------------


@pytest.mark.parametrize("blank", ["", "   "])
def test_blank_text_is_returned_unchanged(blank: str) -> None:
    assert ensure_valid_input_schema(blank) == blank


def test_none_is_returned_unchanged() -> None:
    assert ensure_valid_input_schema(None) is None


def test_empty_object_becomes_object_with_properties() -> None:
    assert repaired({}) == {"type": "object", "properties": {}}
    assert json.loads(ensure_valid_input_schema("{}")) == {"type": "object", "properties": {}}


def test_missing_type_becomes_object() -> None:
    assert repaired({"properties": {"a": {"type": "string"}}}) == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
    }


def test_object_without_properties_gets_empty_properties() -> None:
    assert repaired({"type": "object", "description": "x"}) == {
        "type": "object",
        "properties": {},
        "description": "x",
    }


def test_other_root_types_are_left_alone() -> None:
    assert repaired({"type": "string"}) == {"type": "string"}


def test_json_text_in_json_text_out() -> None:
    text = ensure_valid_input_schema('{"type": "dict", "properties": {"名字": {"type": "str"}}}')
    assert isinstance(text, str)
    assert "名字" in text  # not \\u-escaped
    assert json.loads(text) == {"type": "object", "properties": {"名字": {"type": "string"}}}


def test_text_that_is_not_a_json_object_is_rejected() -> None:
    with pytest.raises(ValueError, match="not valid JSON"):
        ensure_valid_input_schema("{type: object")
    with pytest.raises(ValueError, match="must be a JSON object"):
        ensure_valid_input_schema("[1, 2]")
    with pytest.raises(TypeError, match="mapping or JSON text"):
        ensure_valid_input_schema(42)  # type: ignore[call-overload]


# type names ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("dict", {"type": "object"}),
        ("HashMap", {"type": "object"}),
        ("Map", {"type": "object"}),
        ("float", {"type": "number"}),
        ("double", {"type": "number"}),
        ("long", {"type": "integer"}),
        ("int", {"type": "integer"}),
        ("String", {"type": "string"}),
        ("char", {"type": "string"}),
        ("Boolean", {"type": "boolean"}),
        ("bool", {"type": "boolean"}),
        ("list", {"type": "array"}),
        ("Array", {"type": "array"}),
        ("ArrayList", {"type": "array"}),
        ("tuple", {"type": "array"}),
        ("any", {}),
        ("", {}),
        ("NoSuchType", {}),
        ("String[]", {"type": "array", "items": {"type": "string"}}),
        ("ArrayList<Integer>", {"type": "array", "items": {"type": "integer"}}),
        ("Map<String, Integer>", {"type": "object"}),
        ("date", {"type": "string", "format": "date"}),
        ("DateTime", {"type": "string", "format": "date-time"}),
        (["String", "NULL"], {"type": ["string", "null"]}),
        (["int", "long"], {"type": ["integer"]}),
        (["string", "any"], {}),
    ],
)
def test_type_names_are_normalised(name: Any, expected: dict[str, Any]) -> None:
    result = repaired({"type": "object", "properties": {"p": {"type": name}}})
    assert result["properties"]["p"] == expected


def test_types_are_repaired_everywhere() -> None:
    schema = {
        "type": "dict",
        "properties": {
            "points": {"type": "tuple", "items": {"type": "float"}},
            "nested": {
                "type": "dict",
                "properties": {"deep": {"type": "Array", "items": {"type": "HashMap"}}},
            },
            "either": {"anyOf": [{"type": "String"}, {"type": "long"}]},
            "map": {"type": "dict", "additionalProperties": {"type": "double"}},
        },
        "$defs": {"X": {"type": "bool"}},
    }
    result = repaired(schema)
    props = result["properties"]
    assert props["points"] == {"type": "array", "items": {"type": "number"}}
    assert props["nested"]["properties"]["deep"] == {"type": "array", "items": {"type": "object"}}
    assert props["either"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert props["map"]["additionalProperties"] == {"type": "number"}
    assert result["$defs"] == {"X": {"type": "boolean"}}


def test_bare_type_name_where_a_schema_belongs() -> None:
    result = repaired(
        {
            "type": "object",
            "properties": {"city": "string", "n": "weird"},
            "additionalProperties": "String",
        }
    )
    assert result["properties"] == {"city": {"type": "string"}, "n": {}}
    assert result["additionalProperties"] == {"type": "string"}


# optional / required ---------------------------------------------------------------------------


def test_bfcl_optional_flags_remove_names_from_required() -> None:
    schema = {
        "type": "dict",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "integer", "optional": True, "default": 2023},
            "c": {"type": "string", "optional": "True"},
            "d": {"type": "string", "optional": "yes"},
            "e": {"type": "string", "optional": False},
        },
        "required": ["a", "b", "c", "d"],
    }
    result = repaired(schema)
    assert result["required"] == ["a", "e"]
    assert all("optional" not in prop for prop in result["properties"].values())


def test_object_level_optional_list() -> None:
    schema = {
        "type": "dict",
        "properties": {"a": {"type": "string"}, "weight": {"type": "number"}},
        "required": ["a", "weight"],
        "optional": ["weight"],
    }
    assert repaired(schema)["required"] == ["a"]
    assert "optional" not in repaired(schema)
    empty = repaired({"type": "dict", "properties": {}, "required": [], "optional": []})
    assert empty == {"type": "object", "properties": {}, "required": []}


def test_unknown_optional_value_is_kept_as_it_was() -> None:
    result = repaired({"type": "object", "properties": {"a": {"optional": "sometimes"}}})
    assert result["properties"]["a"] == {"optional": "sometimes"}


def test_property_level_required_flag_moves_to_parent() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "required": True},
            "b": {"type": "string", "required": "false"},
        },
    }
    result = repaired(schema)
    assert result["required"] == ["a"]
    assert result["properties"] == {"a": {"type": "string"}, "b": {"type": "string"}}


def test_required_naming_missing_properties_is_dropped() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a", "ghost", "a", 7],
    }
    assert repaired(schema)["required"] == ["a"]


def test_required_as_a_single_name() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"}
    assert repaired(schema)["required"] == ["a"]


# other repairs -------------------------------------------------------------------------------


def test_openapi_nullable() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "nullable": True},
            "b": {"type": "string", "nullable": False},
            "c": {"nullable": True},
        },
    }
    props = repaired(schema)["properties"]
    assert props == {"a": {"type": ["string", "null"]}, "b": {"type": "string"}, "c": {}}


def test_draft4_tuple_items_and_boolean_exclusive_bounds() -> None:
    schema = {
        "type": "object",
        "properties": {
            "pair": {"type": "array", "items": [{"type": "number"}, {"type": "float"}]},
            "rate": {
                "type": "number",
                "minimum": 0,
                "exclusiveMinimum": True,
                "maximum": 1,
                "exclusiveMaximum": False,
            },
            "count": {"type": "integer", "exclusiveMinimum": 0},
        },
    }
    props = repaired(schema)["properties"]
    assert props["pair"] == {
        "type": "array",
        "prefixItems": [{"type": "number"}, {"type": "number"}],
    }
    assert props["rate"] == {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
    assert props["count"] == {"type": "integer", "exclusiveMinimum": 0}


def test_ecma_regex_with_literal_dash_is_fixed() -> None:
    pattern = r"^[\w-\.]+@([\w-]+\.)+[\w-]{2,4}$"
    result = repaired(
        {"type": "object", "properties": {"email": {"type": "string", "pattern": pattern}}}
    )
    fixed = result["properties"]["email"]["pattern"]
    assert fixed == r"^[\w\-\.]+@([\w\-]+\.)+[\w\-]{2,4}$"


def test_unfixable_regex_is_dropped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tooluse.schema"):
        result = repaired(
            {
                "type": "object",
                "properties": {"a": {"type": "string", "pattern": "(unclosed"}},
                "patternProperties": {"[bad": {"type": "string"}, "^x": {}},
            }
        )
    assert result["properties"]["a"] == {"type": "string"}
    assert result["patternProperties"] == {"^x": {}}
    assert "(unclosed" in caplog.text


def test_keyword_values_of_the_wrong_type() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {
                "type": "string",
                "minLength": "2",
                "maxLength": -1,
                "minimum": "0.5",
                "enum": "only",
                "description": ["two", "parts"],
                "format": 5,
                "uniqueItems": "yes",
                "examples": "x",
                "multipleOf": 0,
            }
        },
    }
    prop = repaired(schema)["properties"]["a"]
    assert prop == {
        "type": "string",
        "minLength": 2,
        "minimum": 0.5,
        "enum": ["only"],
        "description": '["two", "parts"]',
        "uniqueItems": True,
        "examples": ["x"],
    }


def test_defaults_that_are_strings_of_the_declared_type() -> None:
    schema = {
        "type": "object",
        "properties": {
            "flag": {"type": "boolean", "default": "false"},
            "n": {"type": "integer", "default": "10"},
            "x": {"type": "number", "default": "1.5"},
            "label": {"type": "integer", "default": "dontcare"},
        },
    }
    props = repaired(schema)["properties"]
    assert props["flag"]["default"] is False
    assert props["n"]["default"] == 10
    assert props["x"]["default"] == 1.5
    assert props["label"]["default"] == "dontcare"


def test_properties_given_as_a_list() -> None:
    schema = {
        "type": "object",
        "properties": ["a", {"name": "b", "type": "int", "description": "bee"}],
    }
    assert repaired(schema)["properties"] == {
        "a": {},
        "b": {"type": "integer", "description": "bee"},
    }


def test_nested_properties_without_type_become_objects() -> None:
    schema = {"type": "object", "properties": {"o": {"properties": {"a": {"type": "str"}}}}}
    assert repaired(schema)["properties"]["o"] == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
    }


def test_unknown_keywords_and_valid_parts_are_kept() -> None:
    schema = {
        "type": "object",
        "properties": {
            "t": {
                "type": "number",
                "unit": "celsius",
                "example": 21.5,
                "minimum": -50,
                "description": "temperature",
                "enum": [1, 2],
            },
        },
        "required": ["t"],
        "additionalProperties": False,
    }
    assert repaired(schema) == schema


def test_input_is_not_mutated() -> None:
    schema = {
        "type": "dict",
        "properties": {"a": {"type": "float", "optional": True}},
        "required": ["a"],
    }
    before = copy.deepcopy(schema)
    ensure_valid_input_schema(schema)
    assert schema == before


def test_absurd_nesting_is_a_clear_error() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(150):
        schema = {"type": "object", "properties": {"x": schema}}
    with pytest.raises(ValueError, match="nested more than"):
        ensure_valid_input_schema(schema)
