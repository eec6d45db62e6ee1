"""Schema-valid value generation (what TestModel sends as arguments), checked with jsonschema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooluse.testing import SchemaValueError, generate_arguments, generate_value

FORMAT_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
CORPUS = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "tool-search"


def assert_valid(schema: dict[str, Any] | bool, value: Any) -> None:
    jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER).validate(value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": r"^[A-Z]{2}-\d{3}$", "maxLength": 6},
        {"type": "string", "pattern": r"^[a-z]+$", "minLength": 4},
        {"type": "string", "format": "date-time"},
        {"type": "string", "format": "email"},
        {"type": "string", "format": "uuid"},
        {"type": "integer", "exclusiveMinimum": 10, "multipleOf": 4},
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        {"type": "integer", "minimum": -5, "maximum": -3},
        {"type": "number", "minimum": 2.5, "maximum": 2.5},
        {"type": "array", "items": {"type": "integer"}, "minItems": 3, "uniqueItems": True},
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "boolean"}],
            "items": False,
            "minItems": 2,
        },
        {"type": "array", "contains": {"const": 7}},
        {"type": ["null", "boolean"]},
        {"enum": [1, "two", None]},
        {"type": "string", "enum": [3, "three"]},
        {"type": "object", "minProperties": 2, "additionalProperties": {"type": "integer"}},
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "dependentRequired": {"a": ["b"]},
        },
        {"anyOf": [{"type": "null"}, {"type": "string", "format": "ipv4"}]},
        {
            "allOf": [
                {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"const": "x"}}, "required": ["b"]},
            ]
        },
        {
            "$defs": {
                "Point": {
                    "type": "object",
                    "properties": {"x": {"type": "number"}},
                    "required": ["x"],
                }
            },
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/Point"}},
            "required": ["p"],
        },
    ],
)
def test_generated_values_are_valid(schema: dict[str, Any]) -> None:
    assert_valid(schema, generate_value(schema))


def test_recursive_schema_ends() -> None:
    schema = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    "parent": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
                },
                "required": ["name"],
            }
        },
        "$ref": "#/$defs/Node",
    }
    assert_valid(schema, generate_value(schema))


def test_variants_differ() -> None:
    values = {
        json.dumps(generate_value({"type": "string", "format": "date"}, variant=v))
        for v in range(5)
    }
    assert len(values) == 5


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (False, "accepts no value"),
        ({"enum": []}, "empty enum"),
        ({"type": "integer", "minimum": 3, "maximum": 2}, "No integer fits"),
        (
            {"type": "object", "required": ["a"], "additionalProperties": False},
            "'a' is required but not defined",
        ),
        ({"type": "string", "pattern": "(unclosed"}, "Invalid regular expression"),
        ({"$ref": "#/$defs/Missing"}, "points to nothing"),
        ({"$ref": "http://example.com/s.json"}, "Only local"),
        (
            {"type": "array", "items": {"enum": ["x"]}, "minItems": 2, "uniqueItems": True},
            "distinct items",
        ),
        (
            {
                "$defs": {
                    "L": {
                        "type": "object",
                        "properties": {"next": {"$ref": "#/$defs/L"}},
                        "required": ["next"],
                    }
                },
                "$ref": "#/$defs/L",
            },
            "deeper than",
        ),
    ],
)
def test_unsatisfiable_schemas_are_reported(schema: Any, message: str) -> None:
    with pytest.raises(SchemaValueError, match=message):
        generate_value(schema)


def test_generate_arguments_needs_an_object_schema() -> None:
    with pytest.raises(SchemaValueError, match="must describe an object"):
        generate_arguments({"type": "string"})


_SCALARS = st.sampled_from(
    [
        {"type": "string"},
        {"type": "string", "minLength": 2, "maxLength": 5},
        {"type": "string", "format": "date"},
        {"type": "string", "pattern": r"^[a-f0-9]{4}$"},
        {"type": "integer", "minimum": -3},
        {"type": "integer", "maximum": -10},
        {"type": "number", "multipleOf": 0.5, "minimum": 1},
        {"type": "boolean"},
        {"type": "null"},
        {"enum": ["a", "b", 3]},
        {"const": {"k": [1]}},
    ]
)


def _schemas() -> st.SearchStrategy[dict[str, Any]]:
    return st.recursive(
        _SCALARS,
        lambda inner: st.one_of(
            st.builds(
                lambda props, required_count, extra: {
                    "type": "object",
                    "properties": props,
                    "required": list(props)[:required_count],
                    "additionalProperties": extra,
                },
                st.dictionaries(st.text(min_size=1, max_size=5), inner, max_size=4),
                st.integers(min_value=0, max_value=4),
                st.booleans(),
            ),
            st.builds(
                lambda items, low: {"type": "array", "items": items, "minItems": low},
                inner,
                st.integers(min_value=0, max_value=3),
            ),
            st.builds(
                lambda branches: {"anyOf": branches}, st.lists(inner, min_size=1, max_size=3)
            ),
            st.builds(lambda branch: {"anyOf": [{"type": "null"}, branch]}, inner),
        ),
        max_leaves=12,
    )


@settings(max_examples=150, deadline=None)
@given(_schemas())
def test_generated_values_validate_against_generated_schemas(schema: dict[str, Any]) -> None:
    assert_valid(schema, generate_value(schema))


def _corpus_schemas() -> list[tuple[str, dict[str, Any]]]:
    """Real tool schemas with constraints (patterns, formats, bounds, nesting), every fourth
    one up to 250 so the test stays quick (validating all 6,294 takes a minute here)."""
    rows: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(CORPUS.glob("**/tools.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if any(key in line for key in ('"pattern"', '"format"', '"minimum"', '"items"')):
                row = json.loads(line)
                rows.append((row["name"], row["parameters"]))
    return rows[::4][:250]


def test_generated_arguments_are_valid_for_real_tool_schemas() -> None:
    failures = []
    for name, schema in _corpus_schemas():
        try:
            arguments = generate_arguments(schema)
        except SchemaValueError:
            continue  # a contradictory schema (e.g. an array type with string enum members)
        errors = list(
            jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER).iter_errors(
                arguments
            )
        )
        if errors:
            failures.append((name, errors[0].message))
    assert failures == []
