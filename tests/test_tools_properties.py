"""Property tests: whatever argument text a model sends, a tool call either succeeds or raises
``ToolExecutionException`` with a message naming the tool, never anything else."""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
from typing import Annotated, Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from tooluse import FunctionToolCallback, ToolContext, ToolExecutionException
from tooluse.tools import convert_result


class Size(enum.Enum):
    SMALL = "s"
    LARGE = "l"


class Item(BaseModel):
    name: str
    price: float
    tags: list[str] = []


def order(
    customer: str,
    items: list[Item],
    quantity: Annotated[int, Field(ge=1)],
    size: Size,
    mode: Literal["fast", "cheap"] = "fast",
    when: datetime.date | None = None,
    notes: dict[str, str] | None = None,
    context: ToolContext | None = None,
) -> str:
    return "ok"


async def async_order(customer: str, quantity: int) -> dict[str, Any]:
    return {"customer": customer, "quantity": quantity}


def take_item(item: Item) -> str:
    return item.name


def schema_tool(arguments: dict[str, Any]) -> str:
    return "ok"


class Cat(BaseModel):
    name: str


class Dog(BaseModel):
    bark: int


def adopt(pet: Cat | Dog, size: int | list[int] = 1) -> str:
    return "ok"


TOOLS = [
    FunctionToolCallback(order),
    FunctionToolCallback(async_order),
    FunctionToolCallback(take_item, input_type=Item),
    FunctionToolCallback(
        schema_tool,
        input_schema={"type": "dict", "properties": {"q": {"type": "String"}}, "required": ["q"]},
    ),
    FunctionToolCallback(adopt),
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
field_names = st.sampled_from(
    [
        "customer",
        "items",
        "quantity",
        "size",
        "mode",
        "when",
        "notes",
        "context",
        "name",
        "price",
        "tags",
        "q",
        "pet",
        "size",
        "bark",
        "extra",
    ]
)
argument_objects = st.dictionaries(field_names, json_values, max_size=6).map(json.dumps)
lone_surrogates = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1)
nested = st.integers(min_value=1, max_value=400).map(lambda depth: "[" * depth + "]" * depth)
argument_text = (
    st.text()
    | argument_objects
    | json_values.map(json.dumps)
    | nested
    | lone_surrogates.map(lambda s: '{"customer": "' + s + '", "quantity": 1}')
    | st.sampled_from(["", "null", "{", '{"customer": "\\ud800"}', "1e999999", "NaN", "{}"])
)


def _check(outcome: Any, tool_name: str) -> None:
    if isinstance(outcome, ToolExecutionException):
        assert tool_name in str(outcome)
        assert str(outcome).strip()
    else:
        assert isinstance(outcome, str)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments=argument_text, index=st.integers(min_value=0, max_value=len(TOOLS) - 1))
def test_call_raises_only_tool_execution_exceptions(arguments: str, index: int) -> None:
    callback = TOOLS[index]
    try:
        outcome: Any = callback.call(arguments)
    except ToolExecutionException as exc:
        outcome = exc
    _check(outcome, callback.definition.name)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments=st.lists(argument_text, min_size=1, max_size=4))
def test_acall_raises_only_tool_execution_exceptions(arguments: list[str]) -> None:
    async def run_all() -> list[Any]:
        return await asyncio.gather(
            *(TOOLS[i % len(TOOLS)].acall(text) for i, text in enumerate(arguments)),
            return_exceptions=True,
        )

    for i, outcome in enumerate(asyncio.run(run_all())):
        _check(outcome, TOOLS[i % len(TOOLS)].definition.name)


@settings(max_examples=100, deadline=None)
@given(
    customer=st.text(),
    items=st.lists(
        st.builds(Item, name=st.text(), price=st.floats(allow_nan=False, allow_infinity=False)),
        max_size=3,
    ),
    quantity=st.integers(min_value=1, max_value=10**30),
    size=st.sampled_from(Size),
)
def test_valid_arguments_always_succeed(
    customer: str, items: list[Item], quantity: int, size: Size
) -> None:
    arguments = json.dumps(
        {
            "customer": customer,
            "items": [i.model_dump() for i in items],
            "quantity": quantity,
            "size": size.value,
        }
    )
    assert TOOLS[0].call(arguments) == '"ok"'


@settings(max_examples=200, deadline=None)
@given(arguments=argument_objects)
def test_error_locations_are_fields_never_union_members(arguments: str) -> None:
    try:
        FunctionToolCallback(adopt).call(arguments)
    except ToolExecutionException as exc:
        locations = [line.split("'")[1] for line in str(exc).splitlines() if line.startswith("- '")]
        for location in locations:
            assert not {"Cat", "Dog", "int", "list[int]"} & set(location.split(".")), str(exc)


# one surrogate between other characters: lone (JSON reads an escaped pair as one character)
with_a_lone_surrogate = st.tuples(
    st.text(max_size=4),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    st.text(max_size=4),
).map("".join)


@given(value=st.dictionaries(st.text(max_size=8) | with_a_lone_surrogate, json_values, max_size=4))
def test_a_dict_result_is_json_that_loads_back_whatever_its_keys(value: dict[str, Any]) -> None:
    # file names from os.listdir may hold lone surrogates; the result must not be lost
    text = convert_result({"listing": value})
    text.encode("utf-8")
    assert json.loads(text) == {"listing": value}
