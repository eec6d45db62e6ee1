"""Every raw schema of the BFCL v4 (3,420) and ACEBench (4,348) corpora, repaired by
``ensure_valid_input_schema``, is a valid draft 2020-12 schema and keeps its properties.

``Draft202012Validator.check_schema`` takes about 7 ms per schema on this corpus (the
2020-12 meta-schema resolves a ``$dynamicRef`` for every sub-schema), which would make this
test take a minute. ``assert_valid_2020_12`` below is the same check made cheaper, exactly:
the meta-schema judges each sub-schema on its own keywords and checks nested sub-schemas
recursively against itself, so a schema is valid exactly when every node of it, with its
nested sub-schemas replaced by ``true`` ("shallow"), is valid. Values the meta-schema does not
constrain beyond their JSON type (descriptions, defaults, enum members, property names) are
replaced by values of the same type, so equal shapes are checked once (about 700 instead of
50,000 nodes). The positions of sub-schemas are listed here from the 2020-12 meta-schema,
independently of the code under test; a position missed here would only leave a node
un-shallowed, i.e. checked in full. ``test_shortcut_agrees_with_check_schema`` confirms the
equivalence on a sample and ``test_shortcut_finds_deep_errors`` that the shortcut can fail.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tooluse.schema import ensure_valid_input_schema

CORPORA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "schemas"
EXPECTED_ROWS = {"bfcl-v4": 3420, "acebench": 4348}

# Sub-schema positions in the draft 2020-12 meta-schema (core, applicator, unevaluated,
# content vocabularies, plus the deprecated "definitions").
_ONE = {
    "additionalProperties",
    "propertyNames",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
}
_MANY = {"allOf", "anyOf", "oneOf", "prefixItems"}
_NAMED = {"properties", "$defs", "definitions", "dependentSchemas"}  # names unconstrained
_PATTERNS = {"patternProperties"}  # names must be regular expressions: kept
# Keywords the meta-schema constrains only by JSON type (or not at all).
_STRING_ONLY = {"description", "title", "$comment"}
_ANYTHING = {"default", "const"}
_ANY_ARRAY = {"enum", "examples"}

_META = Draft202012Validator(
    Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
)


def _shallow(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _ONE and isinstance(value, dict | bool):
            out[key] = True
        elif key in _MANY and isinstance(value, list):
            out[key] = [True] * len(value)
        elif key in _NAMED and isinstance(value, dict):
            out[key] = {f"p{i}": True for i in range(len(value))}
        elif key in _PATTERNS and isinstance(value, dict):
            out[key] = dict.fromkeys(value, True)
        elif key in _STRING_ONLY and isinstance(value, str):
            out[key] = ""
        elif key in _ANYTHING:
            out[key] = None
        elif key in _ANY_ARRAY and isinstance(value, list):
            out[key] = []
        elif key == "required" and isinstance(value, list):
            # a unique array of strings: keep the type of each item and which ones repeat
            out[key] = [f"r{value.index(v)}" if isinstance(v, str) else v for v in value]
        else:
            out[key] = value
    return out


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(node, dict):
        return
    yield node
    for key, value in node.items():
        if key in _ONE and isinstance(value, dict):
            yield from _nodes(value)
        elif key in _MANY and isinstance(value, list):
            for item in value:
                yield from _nodes(item)
        elif (key in _NAMED or key in _PATTERNS) and isinstance(value, dict):
            for item in value.values():
                yield from _nodes(item)


@cache
def _shape_is_valid(shape: str) -> bool:
    return _META.is_valid(json.loads(shape))


def invalid_nodes(schema: Any) -> list[dict[str, Any]]:
    """The nodes of ``schema`` that break the 2020-12 meta-schema (empty: the schema is valid)."""
    if not isinstance(schema, dict | bool):
        return [{"not a schema": schema}]
    return [
        node
        for node in _nodes(schema)
        if not _shape_is_valid(json.dumps(_shallow(node), sort_keys=True))
    ]


def _declared_property_paths(schema: Any, path: str = "") -> Iterator[str]:
    if not isinstance(schema, dict):
        return
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            yield f"{path}/{name}"
            yield from _declared_property_paths(sub, f"{path}/{name}")
    items = schema.get("items")
    if isinstance(items, dict):
        yield from _declared_property_paths(items, f"{path}[]")


def _rows(corpus: str) -> list[dict[str, Any]]:
    return _read_rows(CORPORA / corpus / "tools.jsonl")


@cache
def _read_rows(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


@pytest.mark.parametrize("corpus", sorted(EXPECTED_ROWS))
def test_every_repaired_corpus_schema_is_valid_and_keeps_its_properties(corpus: str) -> None:
    rows = _rows(corpus)
    assert len(rows) == EXPECTED_ROWS[corpus]
    failures: list[str] = []
    for row in rows:
        raw = row.get("parameters") or {}  # one ACEBench row has none: no input
        fixed = ensure_valid_input_schema(raw)
        if bad := invalid_nodes(fixed):
            failures.append(f"{row['name']}: invalid node {json.dumps(bad[0])[:200]}")
        if fixed.get("type") != "object" or not isinstance(fixed.get("properties"), dict):
            failures.append(f"{row['name']}: root is not an object with properties")
        lost = set(_declared_property_paths(raw)) - set(_declared_property_paths(fixed))
        if lost:
            failures.append(f"{row['name']}: lost properties {sorted(lost)[:5]}")
    assert not failures, f"{len(failures)} problems, first: {failures[:5]}"


def test_shortcut_agrees_with_check_schema() -> None:
    rows = _rows("bfcl-v4")[::300] + _rows("acebench")[::300]
    for row in rows:
        fixed = ensure_valid_input_schema(row.get("parameters") or {})
        Draft202012Validator.check_schema(fixed)
        assert invalid_nodes(fixed) == []
        raw = row.get("parameters") or {}
        assert (invalid_nodes(raw) == []) == _META.is_valid(raw), row["name"]


@pytest.mark.parametrize(
    "broken",
    [
        {"type": "object", "properties": {"a": {"properties": {"b": {"type": "float"}}}}},
        {"anyOf": [{"type": "string"}, {"items": {"minLength": -1}}]},
        {"$defs": {"X": {"pattern": "[unclosed"}}},
        {"required": ["a", "a"]},
        {"properties": {"a": {"description": 3}}},
        {"properties": {"a": {"enum": "not an array"}}},
    ],
)
def test_shortcut_finds_deep_errors(broken: dict[str, Any]) -> None:
    assert invalid_nodes(broken)
    assert not _META.is_valid(broken)


def test_raw_corpora_really_need_repair() -> None:
    invalid = [r for r in _rows("bfcl-v4")[:50] if invalid_nodes(r["parameters"])]
    assert len(invalid) == 50  # every BFCL schema says "type": "dict"
