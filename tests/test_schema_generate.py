"""Input schemas generated from type hints (SPEC section 2; Spring AI's JsonSchemaGenerator)."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import warnings
from typing import Annotated, Any, Literal, Optional

import pytest
from jsonschema import Draft202012Validator
from pydantic import AliasChoices, AliasPath, BaseModel, Field
from typing_extensions import TypedDict

from tooluse import ToolContext, ToolParam
from tooluse.schema import DRAFT_2020_12, generate_for_function_input, generate_for_type


class Address(BaseModel):
    """A postal address."""

    street: str
    zip_code: Annotated[str, ToolParam(description="postal code")]
    since: datetime.date | None = None
    tags: dict[str, int] = {}


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


class Filters(TypedDict):
    term: str
    limit: int


class Node(BaseModel):
    value: int
    children: list[Node] = []


def test_root_has_spring_key_order_and_closed_object() -> None:
    def get_weather(city: str, days: int) -> str:
        return ""

    schema = generate_for_function_input(get_weather)
    assert schema == {
        "$schema": DRAFT_2020_12,
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
        "additionalProperties": False,
    }
    assert list(schema) == ["$schema", "type", "properties", "required", "additionalProperties"]


def test_no_parameters_gives_empty_object_with_required_present() -> None:
    def now() -> str:
        return ""

    schema = generate_for_function_input(now)
    assert schema["properties"] == {}
    assert schema["required"] == []
    assert schema["additionalProperties"] is False


def test_parameters_keep_declaration_order() -> None:
    def f(zeta: int, alpha: str, mid: bool) -> None: ...

    assert list(generate_for_function_input(f)["properties"]) == ["zeta", "alpha", "mid"]


def test_required_rules() -> None:
    def f(
        plain: str,
        with_default: int = 3,
        optional: Optional[str] = None,  # noqa: UP045 (the Optional spelling is under test)
        union_none: int | None = None,
        nullable_no_default: str | None = None,
        forced: Annotated[int, ToolParam(required=True)] = 5,
        relaxed: Annotated[str, ToolParam(required=False)] = "x",
        relaxed_no_default: Annotated[str, ToolParam(required=False)] = ...,  # type: ignore[assignment]
    ) -> None: ...

    schema = generate_for_function_input(f)
    assert schema["required"] == ["plain", "forced"]


def test_optional_without_default_is_not_required() -> None:
    def f(name: str | None) -> None: ...

    assert generate_for_function_input(f)["required"] == []


def test_tool_param_description_wins_over_docstring() -> None:
    def f(city: Annotated[str, ToolParam(description="from ToolParam")], days: int) -> None:
        """Weather.

        Args:
            city: from docstring
            days: number of days
        """

    props = generate_for_function_input(f)["properties"]
    assert props["city"] == {"type": "string", "description": "from ToolParam"}
    assert props["days"] == {"type": "integer", "description": "number of days"}


GOOGLE = """Search.

    Args:
        query: the words
            to find
        limit (int): at most this many
    """
NUMPY = """Search.

    Parameters
    ----------
    query : str
        the words to find
    limit : int
        at most this many
    """
SPHINX = """Search.

    :param query: the words to find
    :param int limit: at most this many
    """


@pytest.mark.parametrize("doc", [GOOGLE, NUMPY, SPHINX], ids=["google", "numpy", "sphinx"])
def test_docstring_parameter_descriptions(doc: str) -> None:
    def search(query: str, limit: int = 10) -> list[str]:
        return []

    search.__doc__ = doc
    props = generate_for_function_input(search)["properties"]
    assert props["query"]["description"] == "the words to find"
    assert props["limit"]["description"] == "at most this many"


def test_default_is_shown_for_optional_parameters() -> None:
    def f(days: int = 3, color: Color = Color.RED, tags: tuple[str, ...] = ("a",)) -> None: ...

    props = generate_for_function_input(f)["properties"]
    assert props["days"]["default"] == 3
    assert props["color"]["default"] == "red"
    assert props["tags"]["default"] == ["a"]


def test_unserialisable_default_is_omitted() -> None:
    sentinel = object()

    def f(marker: Any = sentinel) -> None: ...

    assert generate_for_function_input(f)["properties"]["marker"] == {}


def test_a_default_json_cannot_hold_is_omitted_not_a_crash() -> None:
    # bytes that are not UTF-8 raised UnicodeDecodeError, a circular list ValueError, when
    # the tool was built (pydantic omits such a default of a model field with a warning)
    loop: list[Any] = []
    loop.append(loop)

    def f(raw: bytes = b"\xff\xfe", nested: list[Any] = loop, text: bytes = b"ok") -> None: ...

    props = generate_for_function_input(f)["properties"]
    assert props["raw"] == {"type": "string"}
    assert props["nested"] == {"type": "array", "items": {}}
    assert props["text"] == {"type": "string", "default": "ok"}


class SearchArea(BaseModel):
    radius_km: float = math.inf
    floor: Annotated[float, Field(ge=-math.inf)] = 0.0


def test_infinite_defaults_and_bounds_are_left_out_so_the_schema_is_json() -> None:
    # json.dumps would write `Infinity`, which is not JSON: httpx (so the OpenAI SDK) refuses
    # to encode such a request, and every request offering the tool fails
    def f(
        area: SearchArea, limit: float = math.inf, weights: tuple[float, ...] = (math.nan,)
    ) -> None: ...

    schema = generate_for_function_input(f)
    json.dumps(schema, allow_nan=False)
    json.dumps(generate_for_type(SearchArea), allow_nan=False)
    props = schema["properties"]
    assert props["limit"] == {"type": "number"}
    assert props["weights"] == {"type": "array", "items": {"type": "number"}}
    assert props["area"]["properties"] == {
        "radius_km": {"type": "number"},
        "floor": {"type": "number", "default": 0.0},
    }


def test_top_level_format_dropped_nested_format_kept() -> None:
    # Spring: generateSchemaForMethodWithComplexParameters
    def f(
        when: datetime.datetime, day: datetime.date, span: datetime.timedelta, address: Address
    ) -> None: ...

    schema = generate_for_function_input(f)
    props = schema["properties"]
    assert props["when"] == {"type": "string"}
    assert props["day"] == {"type": "string"}
    assert props["span"] == {"type": "string"}
    since = props["address"]["properties"]["since"]
    assert {"type": "string", "format": "date"} in since["anyOf"]


def test_tool_context_parameters_are_skipped() -> None:
    def f(ctx: ToolContext, city: str, maybe: ToolContext | None = None) -> None: ...

    schema = generate_for_function_input(f)
    assert list(schema["properties"]) == ["city"]
    assert schema["required"] == ["city"]


def test_any_and_object_and_unannotated_are_empty_schemas() -> None:
    def f(a: Any, b: object, c) -> None: ...  # type: ignore[no-untyped-def]

    props = generate_for_function_input(f)["properties"]
    assert props == {"a": {}, "b": {}, "c": {}}


def test_models_dataclasses_typeddicts_enums_literals() -> None:
    def f(
        address: Address, point: Point, filters: Filters, color: Color, mode: Literal["a", "b"]
    ) -> None: ...

    schema = generate_for_function_input(f)
    props = schema["properties"]
    address = props["address"]
    assert address["type"] == "object"
    assert address["description"] == "A postal address."
    assert address["additionalProperties"] is False
    assert address["required"] == ["street", "zip_code"]
    assert address["properties"]["zip_code"]["description"] == "postal code"
    assert props["point"]["required"] == ["x"]
    assert props["point"]["additionalProperties"] is False
    assert props["filters"]["required"] == ["term", "limit"]
    assert props["color"] == {"type": "string", "enum": ["red", "green"]}
    assert props["mode"] == {"type": "string", "enum": ["a", "b"]}
    Draft202012Validator.check_schema(schema)


def test_maps_keep_their_value_schema() -> None:
    def f(counts: dict[str, int], address: Address) -> None: ...

    props = generate_for_function_input(f)["properties"]
    assert props["counts"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["address"]["properties"]["tags"]["additionalProperties"] == {"type": "integer"}


def test_no_titles_anywhere() -> None:
    def f(address: Address, nodes: list[Node], color: Color) -> None: ...

    assert '"title"' not in repr(generate_for_function_input(f)).replace("'", '"')


def test_explicit_field_constraints_survive() -> None:
    def f(count: Annotated[int, Field(ge=1, le=10, description="how many")]) -> None: ...

    assert generate_for_function_input(f)["properties"]["count"] == {
        "type": "integer",
        "description": "how many",
        "maximum": 10,
        "minimum": 1,
    }


def test_a_field_alias_names_the_property_as_validation_expects() -> None:
    # validation takes the alias (as on a pydantic model), so the schema must say it
    def f(
        city: Annotated[str, Field(alias="town", description="where")],
        when: Annotated[str, Field(validation_alias="day")],
        note: Annotated[str, Field(serialization_alias="remark")] = "",
    ) -> None: ...

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pydantic warns when it is handed alias= outside a field
        schema = generate_for_function_input(f)
    assert schema["properties"] == {
        "town": {"type": "string", "description": "where"},
        "day": {"type": "string"},
        "note": {"type": "string", "default": ""},  # serialization_alias: output only
    }
    assert schema["required"] == ["town", "day"]


def test_alias_choices_show_the_first_plain_name_and_alias_paths_are_rejected() -> None:
    def choices(
        q: Annotated[str, Field(validation_alias=AliasChoices(AliasPath("a", 0), "query", "q"))],
    ) -> None: ...

    def path(q: Annotated[str, Field(validation_alias=AliasPath("a", 0))]) -> None: ...

    assert list(generate_for_function_input(choices)["properties"]) == ["query"]
    with pytest.raises(ValueError, match=r"parameter 'q': validation_alias=AliasPath.*plain alias"):
        generate_for_function_input(path)


def test_a_field_default_makes_the_parameter_optional() -> None:
    # as on a pydantic model (and as validation does): Field(default=...) is a default
    def f(
        count: Annotated[int, Field(default=5, ge=1)],
        tags: Annotated[list[str], Field(default_factory=list)],
    ) -> None: ...

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        schema = generate_for_function_input(f)
    assert schema["properties"] == {
        "count": {"type": "integer", "minimum": 1, "default": 5},
        "tags": {"type": "array", "items": {"type": "string"}},  # a factory: no one value
    }
    assert schema["required"] == []


def test_contradictory_defaults_are_rejected() -> None:
    # pydantic would quietly prefer one; which one the model is told must be the one it gets
    def two_values(count: Annotated[int, Field(default=5)] = 3) -> None: ...

    def value_and_factory(
        tags: Annotated[tuple[int, ...], Field(default_factory=tuple)] = (),
    ) -> None: ...

    def required_with_default(
        count: Annotated[int, Field(default=5), ToolParam(required=True)],
    ) -> None: ...

    with pytest.raises(ValueError, match="parameter 'count': has two defaults, 3 in the signature"):
        generate_for_function_input(two_values)
    with pytest.raises(ValueError, match="parameter 'tags': has two defaults"):
        generate_for_function_input(value_and_factory)
    with pytest.raises(
        ValueError, match=r"ToolParam\(required=True\) but its pydantic Field gives"
    ):
        generate_for_function_input(required_with_default)


def test_two_parameters_sent_under_one_name_are_rejected() -> None:
    def f(a: Annotated[int, Field(alias="b")], b: int) -> None: ...

    with pytest.raises(ValueError, match="parameters 'a' and 'b' are both sent as 'b'"):
        generate_for_function_input(f)


def test_defs_of_parameters_are_hoisted_and_shared() -> None:
    def f(first: list[Node], second: Node, third: list[Address]) -> None: ...

    schema = generate_for_function_input(f)
    assert list(schema) == [
        "$schema",
        "type",
        "properties",
        "required",
        "additionalProperties",
        "$defs",
    ]
    assert set(schema["$defs"]) == {"Node", "Address"}
    assert schema["properties"]["first"]["items"] == {"$ref": "#/$defs/Node"}
    assert schema["properties"]["second"] == {"$ref": "#/$defs/Node"}
    node = schema["$defs"]["Node"]
    assert node["additionalProperties"] is False
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    validator = Draft202012Validator(schema)
    validator.validate(
        {"first": [{"value": 1, "children": [{"value": 2}]}], "second": {"value": 3}, "third": []}
    )


def _other_item_class() -> type[BaseModel]:
    class Item(BaseModel):
        price: float

    return Item


class Item(BaseModel):
    name: str


class Holder(BaseModel):
    item: Item


OtherItem = _other_item_class()  # another class named "Item"


class OtherHolder(BaseModel):
    item: OtherItem  # type: ignore[valid-type]


class Opaque:
    """A type pydantic has no schema for."""


def test_different_definitions_with_the_same_name_are_renamed() -> None:
    def f(a: list[Holder], b: list[OtherHolder]) -> None: ...

    schema = generate_for_function_input(f)
    defs = schema["$defs"]
    assert defs["Item"]["properties"] == {"name": {"type": "string"}}
    assert defs["Item_2"]["properties"] == {"price": {"type": "number"}}
    assert defs["OtherHolder"]["properties"]["item"] == {"$ref": "#/$defs/Item_2"}
    assert defs["Holder"]["properties"]["item"] == {"$ref": "#/$defs/Item"}
    Draft202012Validator(schema).validate(
        {"a": [{"item": {"name": "x"}}], "b": [{"item": {"price": 1.5}}]}
    )


def test_generated_schemas_are_valid_2020_12() -> None:
    def f(
        a: Address,
        b: list[Node],
        c: dict[str, Point],
        d: Color | None,
        e: tuple[int, str],
        g: set[str],
        h: bytes,
        i: float = 1.5,
    ) -> None: ...

    Draft202012Validator.check_schema(generate_for_function_input(f))


def test_unsupported_type_names_tool_and_parameter() -> None:
    def lookup(key: str, thing: Opaque) -> None: ...

    with pytest.raises(ValueError, match=r"Tool 'lookup', parameter 'thing'"):
        generate_for_function_input(lookup)


def test_var_args_are_rejected() -> None:
    def f(*names: str) -> None: ...

    with pytest.raises(ValueError, match=r"'names' is \*args or \*\*kwargs"):
        generate_for_function_input(f)


def test_unresolvable_hints_are_a_clear_error() -> None:
    def f(x: Missing) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(ValueError, match="cannot resolve the type hints"):
        generate_for_function_input(f)


def test_bound_method_excludes_self() -> None:
    class Tools:
        def lookup(self, key: str) -> str:
            return key

    assert list(generate_for_function_input(Tools().lookup)["properties"]) == ["key"]


# generate_for_type ---------------------------------------------------------------------------


def test_generate_for_type_model() -> None:
    schema = generate_for_type(Address)
    assert list(schema)[:5] == ["$schema", "type", "properties", "required", "additionalProperties"]
    assert schema["$schema"] == DRAFT_2020_12
    assert schema["description"] == "A postal address."
    Draft202012Validator.check_schema(schema)


def test_generate_for_type_none_is_empty_object() -> None:
    # Spring: generateForType(Void) adds an empty "properties"
    assert generate_for_type(None) == {
        "$schema": DRAFT_2020_12,
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_generate_for_type_enum_and_scalar() -> None:
    assert generate_for_type(Color) == {
        "$schema": DRAFT_2020_12,
        "type": "string",
        "enum": ["red", "green"],
    }
    assert generate_for_type(int) == {"$schema": DRAFT_2020_12, "type": "integer"}


def test_generate_for_type_keeps_top_level_format() -> None:
    assert generate_for_type(datetime.date)["format"] == "date"


def test_generate_for_type_recursive_model_has_object_root() -> None:
    schema = generate_for_type(Node)
    assert schema["type"] == "object"
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    Draft202012Validator(schema).validate({"value": 1, "children": [{"value": 2}]})


def test_generate_for_type_unsupported() -> None:
    with pytest.raises(ValueError, match="has no JSON schema"):
        generate_for_type(Opaque)


def test_generated_schema_is_a_fresh_copy() -> None:
    def f(a: int) -> None: ...

    first = generate_for_function_input(f)
    first["properties"]["a"]["type"] = "changed"
    assert generate_for_function_input(f)["properties"]["a"]["type"] == "integer"
