"""Hoisting parameter ``$defs`` to the root (Spring AI's JsonSchemaUtils.hoistDefsToRoot)."""

from __future__ import annotations

import copy
from typing import Any

from tooluse.schema._defs import hoist_defs

ADDRESS = {"type": "object", "properties": {"street": {"type": "string"}}}
OTHER_ADDRESS = {"type": "object", "properties": {"lines": {"type": "array"}}}


def test_schema_without_defs_is_returned_without_change() -> None:
    root: dict[str, Any] = {}
    assert hoist_defs(root, {"type": "string"}) == {"type": "string"}
    assert root == {}


def test_new_definitions_move_to_the_root() -> None:
    root: dict[str, Any] = {}
    body = hoist_defs(root, {"$ref": "#/$defs/Address", "$defs": {"Address": ADDRESS}})
    assert body == {"$ref": "#/$defs/Address"}
    assert root == {"Address": ADDRESS}


def test_equal_definitions_are_shared() -> None:
    root: dict[str, Any] = {"Address": copy.deepcopy(ADDRESS)}
    body = hoist_defs(root, {"$ref": "#/$defs/Address", "$defs": {"Address": ADDRESS}})
    assert body == {"$ref": "#/$defs/Address"}
    assert list(root) == ["Address"]


def test_different_definition_is_renamed_and_refs_rewritten_including_pointer_tails() -> None:
    root: dict[str, Any] = {"Address": ADDRESS}
    schema = {
        "type": "object",
        "properties": {
            "home": {"$ref": "#/$defs/Address"},
            "lines": {"$ref": "#/$defs/Address/properties/lines"},
            "other": {"$ref": "#/$defs/AddressBook"},  # a prefix of another name: untouched
        },
        "$defs": {"Address": OTHER_ADDRESS, "AddressBook": {"type": "array"}},
    }
    body = hoist_defs(root, schema)
    assert body["properties"] == {
        "home": {"$ref": "#/$defs/Address_2"},
        "lines": {"$ref": "#/$defs/Address_2/properties/lines"},
        "other": {"$ref": "#/$defs/AddressBook"},
    }
    assert root == {
        "Address": ADDRESS,
        "Address_2": OTHER_ADDRESS,
        "AddressBook": {"type": "array"},
    }


def test_rename_skips_suffixes_taken_in_root_or_in_the_incoming_batch() -> None:
    root: dict[str, Any] = {"Address": ADDRESS, "Address_2": {"type": "null"}}
    schema = {
        "$ref": "#/$defs/Address",
        "$defs": {"Address": OTHER_ADDRESS, "Address_3": {"type": "boolean"}},
    }
    body = hoist_defs(root, schema)
    assert body == {"$ref": "#/$defs/Address_4"}
    assert root["Address_4"] == OTHER_ADDRESS
    assert root["Address_3"] == {"type": "boolean"}


def test_refs_inside_incoming_definitions_are_rewritten() -> None:
    root: dict[str, Any] = {"Address": ADDRESS}
    schema = {
        "$ref": "#/$defs/Person",
        "$defs": {
            "Address": OTHER_ADDRESS,
            "Person": {"type": "object", "properties": {"home": {"$ref": "#/$defs/Address"}}},
        },
    }
    hoist_defs(root, schema)
    assert root["Person"]["properties"]["home"] == {"$ref": "#/$defs/Address_2"}


def test_definition_equal_in_text_but_pointing_at_a_renamed_one_is_renamed_too() -> None:
    person = {"type": "object", "properties": {"home": {"$ref": "#/$defs/Address"}}}
    root: dict[str, Any] = {"Address": ADDRESS, "Person": copy.deepcopy(person)}
    schema = {"$ref": "#/$defs/Person", "$defs": {"Address": OTHER_ADDRESS, "Person": person}}
    body = hoist_defs(root, schema)
    # the incoming Person means "Person with the other Address": it cannot share the root's
    assert body == {"$ref": "#/$defs/Person_2"}
    assert root["Person"]["properties"]["home"] == {"$ref": "#/$defs/Address"}
    assert root["Person_2"]["properties"]["home"] == {"$ref": "#/$defs/Address_2"}


def test_data_that_looks_like_a_ref_is_not_rewritten() -> None:
    root: dict[str, Any] = {"Address": ADDRESS}
    schema = {
        "type": "object",
        "default": {"$ref": "#/$defs/Address"},
        "enum": [{"$ref": "#/$defs/Address"}],
        "properties": {"a": {"$ref": "#/$defs/Address"}},
        "$defs": {"Address": OTHER_ADDRESS},
    }
    body = hoist_defs(root, schema)
    assert body["default"] == {"$ref": "#/$defs/Address"}
    assert body["enum"] == [{"$ref": "#/$defs/Address"}]
    assert body["properties"]["a"] == {"$ref": "#/$defs/Address_2"}


def test_input_schema_is_not_mutated() -> None:
    schema = {"$ref": "#/$defs/Address", "$defs": {"Address": OTHER_ADDRESS}}
    before = copy.deepcopy(schema)
    hoist_defs({"Address": ADDRESS}, schema)
    assert schema == before
