"""``FunctionToolCallback``: validating arguments, calling sync/async functions, the three input
modes, context injection, errors for the model."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import json
import threading
import warnings
from typing import Annotated, Any

import pytest
from pydantic import AliasChoices, BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from tooluse import (
    FunctionToolCallback,
    ToolCallback,
    ToolContext,
    ToolExecutionException,
    ToolParam,
    tool,
)
from tooluse.testing import generate_arguments


class Address(BaseModel):
    street: str
    number: int


class Order(BaseModel):
    item: str
    quantity: int = 1


@dataclasses.dataclass
class Move:
    x: int
    y: int


class Query(TypedDict):
    text: str
    limit: int


def book(
    city: str,
    nights: int,
    address: Address | None = None,
    tags: list[str] | None = None,
    breakfast: bool = False,
) -> dict[str, Any]:
    return {
        "city": city,
        "nights": nights,
        "address": address,
        "tags": tags,
        "breakfast": breakfast,
    }


BOOK = FunctionToolCallback(book)


def error_of(callback: FunctionToolCallback, arguments: str) -> str:
    with pytest.raises(ToolExecutionException) as info:
        callback.call(arguments)
    assert info.value.definition is callback.definition
    return str(info.value)


def test_implements_the_protocol() -> None:
    assert isinstance(BOOK, ToolCallback)
    assert BOOK.definition.name == "book"
    assert BOOK.function is book


def test_lax_validation_and_defaults() -> None:
    result = BOOK.call(
        '{"city": "Paris", "nights": "3", "address": {"street": "Main", "number": "7"}}'
    )
    assert result == (
        '{"city":"Paris","nights":3,"address":{"street":"Main","number":7},"tags":null,'
        '"breakfast":false}'
    )


def test_numbers_are_accepted_for_text() -> None:
    assert '"city":"75001"' in BOOK.call('{"city": 75001, "nights": 1}')


def test_null_for_an_optional_parameter_means_its_default() -> None:
    # OpenAI strict mode sends null for optional fields it does not fill
    result = BOOK.call('{"city": "Rome", "nights": 1, "breakfast": null, "tags": null}')
    assert '"breakfast":false' in result
    assert '"tags":null' in result


@pytest.mark.parametrize("empty", ["", "   ", "null", " null ", "{}"])
def test_empty_or_null_arguments_mean_no_arguments(empty: str) -> None:
    def now() -> str:
        return "noon"

    assert FunctionToolCallback(now).call(empty) == '"noon"'


def test_missing_required_fields_named_with_expected_types() -> None:
    message = error_of(BOOK, "{}")
    assert message.splitlines() == [
        "Invalid arguments for tool 'book':",
        "- 'city': required but missing (expected string)",
        "- 'nights': required but missing (expected integer)",
        "Expected arguments: {city: string, nights: integer, address?: Address | null, "
        "tags?: array of string | null, breakfast?: boolean}",
    ]


def test_wrong_type_says_field_expected_and_received() -> None:
    message = error_of(BOOK, '{"city": "Oslo", "nights": "three"}')
    assert "- 'nights': Input should be a valid integer" in message
    assert 'got "three"' in message


def test_nested_field_locations() -> None:
    message = error_of(
        BOOK, '{"city": "Oslo", "nights": 1, "address": {"street": 5}, "tags": ["a", {}]}'
    )
    assert "'address.number': required but missing" in message
    assert "'tags[1]': Input should be a valid string; got {}" in message


def test_extra_fields_are_rejected_with_the_parameter_list() -> None:
    message = error_of(BOOK, '{"city": "Oslo", "nights": 1, "nigths": 2}')
    assert (
        "- 'nigths': not a parameter of this tool (parameters: city, nights, address, tags, "
        "breakfast)" in message
    )


def test_extra_fields_of_nested_pydantic_models_are_rejected_as_the_schema_says() -> None:
    # a model ignores unknown fields by default: a misspelt "quantity" would silently be 1
    def place(order: Order) -> str:
        return f"{order.quantity} x {order.item}"

    def place_one(order: Order) -> str:
        return place(order)

    nested = FunctionToolCallback(place)
    assert nested.definition.input_schema["properties"]["order"]["additionalProperties"] is False
    message = error_of(nested, '{"order": {"item": "tea", "quantiy": 5}}')
    assert "- 'order.quantiy': unexpected field" in message
    whole = FunctionToolCallback(place_one, input_type=Order)
    assert whole.definition.input_schema["additionalProperties"] is False
    message = error_of(whole, '{"item": "tea", "quantiy": 5}')
    assert "- 'quantiy': not a parameter of this tool (parameters: item, quantity)" in message
    assert nested.call('{"order": {"item": "tea", "quantity": 5}}') == '"5 x tea"'


class OpenItem(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


def test_a_model_that_allows_extra_fields_keeps_them() -> None:
    def keep(item: OpenItem) -> dict[str, Any]:
        return item.model_dump()

    callback = FunctionToolCallback(keep)
    assert callback.definition.input_schema["properties"]["item"]["additionalProperties"] is True
    assert callback.call('{"item": {"name": "a", "colour": "red"}}') == (
        '{"name":"a","colour":"red"}'
    )


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"city": "Oslo"', "the arguments are not valid JSON (EOF while parsing"),
        ("[1, 2]", "the arguments must be a JSON object, got a JSON array"),
        ('"Oslo"', "the arguments must be a JSON object, got a JSON string"),
        ("42", "the arguments must be a JSON object, got a JSON number"),
        ("true", "the arguments must be a JSON object, got a JSON boolean"),
        ("city=Oslo", "the arguments are not valid JSON"),
    ],
)
def test_not_an_object(arguments: str, expected: str) -> None:
    message = error_of(BOOK, arguments)
    assert message.startswith(f"Invalid arguments for tool 'book': {expected}")
    assert message.endswith(
        "{city: string, nights: integer, address?: Address | null, "
        "tags?: array of string | null, breakfast?: boolean}"
    )


def test_long_received_values_are_cut_short() -> None:
    message = error_of(BOOK, '{"city": "Oslo", "nights": "' + "x" * 5000 + '"}')
    assert len(message) < 400


def test_many_errors_are_summarised() -> None:
    def f(a: int, b: int, c: int, d: int, e: int, g: int, h: int) -> None: ...

    message = error_of(FunctionToolCallback(f), "{}")
    assert "- and 2 more problems" in message


class Cat(BaseModel):
    name: str


class Dog(BaseModel):
    bark: int


def test_union_members_are_not_shown_as_fields_to_nest() -> None:
    # pydantic's error locations name the union member tried ('pet.Cat.name', 'size.int'),
    # which reads as {"pet": {"Cat": {...}}}; the model is told the field and the member
    def f(pet: Cat | Dog, size: int | list[int], pets: list[Cat | Dog]) -> None: ...

    message = error_of(
        FunctionToolCallback(f), '{"pet": {"name": 1}, "size": "x", "pets": [{"bark": "b"}]}'
    )
    assert message.splitlines()[1:6] == [
        "- 'pet.name' (as Cat): Input should be a valid string; got 1",
        "- 'pet.bark' (as Dog): required but missing",
        "- 'pet.name' (as Dog): unexpected field",
        "- 'size' (as int): Input should be a valid integer, unable to parse string as an "
        'integer; got "x"',
        "- 'size' (as list[int]): Input should be a valid array; got \"x\"",
    ]
    message = error_of(FunctionToolCallback(f), '{"pet": {"bark": 1}, "size": 1, "pets": [{}]}')
    assert "- 'pets[0].name' (as Cat): required but missing" in message


def test_optional_without_default_missing_is_none() -> None:
    def f(a: int | None, b: Annotated[str, ToolParam(required=False)]) -> str:
        return f"{a}-{b}"

    assert FunctionToolCallback(f).call("{}") == '"None-None"'


def test_field_constraints_are_enforced() -> None:
    def f(count: Annotated[int, Field(ge=1, le=10)]) -> int:
        return count

    callback = FunctionToolCallback(f)
    assert callback.call('{"count": 10}') == "10"
    assert "Input should be less than or equal to 10" in error_of(callback, '{"count": 11}')


def test_a_field_alias_is_the_argument_name_in_schema_and_validation() -> None:
    def f(city: Annotated[str, Field(alias="town")], nights: int = 1) -> str:
        return f"{city}/{nights}"

    callback = FunctionToolCallback(f)
    assert list(callback.definition.input_schema["properties"]) == ["town", "nights"]
    # the call the schema describes succeeds ...
    assert callback.call(json.dumps(generate_arguments(callback.definition.input_schema)))
    assert callback.call('{"town": "Oslo"}') == '"Oslo/1"'
    # ... and the parameter's own name is not an argument, as the schema says
    message = error_of(callback, '{"city": "Oslo"}')
    assert "- 'town': required but missing (expected string)" in message
    assert "- 'city': not a parameter of this tool (parameters: town, nights)" in message


def test_alias_choices_accept_each_choice() -> None:
    def f(q: Annotated[str, Field(validation_alias=AliasChoices("query", "q"))]) -> str:
        return q

    callback = FunctionToolCallback(f)
    assert callback.definition.input_schema["required"] == ["query"]
    assert callback.call('{"query": "a"}') == callback.call('{"q": "a"}') == '"a"'


def test_an_aliased_parameter_with_a_default_takes_null_as_its_default() -> None:
    def f(
        a: Annotated[int, Field(alias="b")], /, city: Annotated[str, Field(alias="town")] = "Rome"
    ) -> str:
        return f"{a}{city}"

    callback = FunctionToolCallback(f)
    assert callback.call('{"b": 1}') == callback.call('{"b": 1, "town": null}') == '"1Rome"'
    assert callback.call('{"b": 1, "town": "Oslo"}') == '"1Oslo"'


def test_a_field_default_is_used_for_a_missing_or_null_argument() -> None:
    def f(
        count: Annotated[int, Field(default=5, ge=1)],
        tags: Annotated[list[str], Field(default_factory=list)],
    ) -> str:
        tags.append("seen")  # a fresh list each call
        return f"{count}{tags}"

    callback = FunctionToolCallback(f)
    assert callback.definition.input_schema["required"] == []
    assert callback.call("{}") == callback.call("{}") == "\"5['seen']\""
    assert callback.call('{"count": null, "tags": null}') == "\"5['seen']\""
    assert callback.call('{"count": 2, "tags": ["a"]}') == "\"2['a', 'seen']\""
    assert "greater than or equal to 1" in error_of(callback, '{"count": 0}')


def test_positional_only_parameters() -> None:
    def f(a: int, ctx: ToolContext, /, b: int = 2, *, c: int = 3) -> str:
        return f"{a}{ctx.get('k')}{b}{c}"

    callback = FunctionToolCallback(f)
    assert callback.call('{"a": 1, "c": 9}', ToolContext({"k": "K"})) == '"1K29"'


# context ------------------------------------------------------------------------------------


def test_context_is_injected_and_never_in_the_schema() -> None:
    # Spring raises when a method takes a ToolContext and none is given; here it gets an empty one.
    seen: list[ToolContext] = []

    def f(city: str, context: ToolContext) -> str:
        seen.append(context)
        return city

    callback = FunctionToolCallback(f)
    assert list(callback.definition.input_schema["properties"]) == ["city"]
    callback.call('{"city": "x"}', ToolContext({"user": "u1"}))
    callback.call('{"city": "x"}')
    assert seen[0] == {"user": "u1"}
    assert isinstance(seen[1], ToolContext)
    assert dict(seen[1]) == {}


def test_context_key_sent_by_the_model_is_rejected() -> None:
    def f(city: str, context: ToolContext) -> str:
        return city

    message = error_of(FunctionToolCallback(f), '{"city": "x", "context": {"admin": true}}')
    assert "'context': not a parameter of this tool" in message


def test_every_context_parameter_gets_the_context() -> None:
    # as in Spring AI; only the last one was filled in, so every call failed with a TypeError
    def f(first: ToolContext, second: ToolContext | None = None) -> str:
        return f"{first['k']}{second and second['k']}"

    callback = FunctionToolCallback(f)
    assert callback.definition.input_schema["properties"] == {}
    assert callback.call("{}", ToolContext({"k": "v"})) == '"vv"'


# sync / async --------------------------------------------------------------------------------


async def test_acall_runs_sync_functions_in_a_worker_thread() -> None:
    loop_thread = threading.get_ident()

    def where() -> bool:
        return threading.get_ident() != loop_thread

    assert await FunctionToolCallback(where).acall("") == "true"


async def test_an_inline_sync_tool_runs_on_the_loops_thread() -> None:
    loop_thread = threading.get_ident()

    @tool(inline=True)
    def where(x: int) -> bool:
        return threading.get_ident() == loop_thread

    assert await FunctionToolCallback(where).acall('{"x": 1}') == "true"
    assert await FunctionToolCallback(where, inline=False).acall('{"x": 1}') == "false"
    with pytest.raises(ToolExecutionException, match="x"):  # still validated
        await FunctionToolCallback(where).acall('{"x": "one"}')


async def test_a_round_of_inline_calls_runs_in_the_callers_task_in_order() -> None:
    from tooluse.calling import ToolCallingManager
    from tooluse.messages import ChatOptions, Prompt, UserMessage
    from tooluse.testing import chat_response, tool_call

    ran: list[tuple[int, asyncio.Task[Any] | None]] = []

    def note(n: int) -> int:
        ran.append((n, asyncio.current_task()))
        return n

    inline, pooled = FunctionToolCallback(note, inline=True), FunctionToolCallback(note)
    assert inline.inline and not pooled.inline
    calls = [tool_call("note", {"n": n}, id=f"c{n}") for n in range(3)]
    prompt = Prompt(messages=[UserMessage(text="go")], options=ChatOptions(tool_callbacks=[inline]))
    result = await ToolCallingManager().aexecute_tool_calls(prompt, chat_response(tool_calls=calls))
    assert [r.data for r in result.conversation_history[-1].responses] == ["0", "1", "2"]  # type: ignore[union-attr]
    # no task per call: each ran in this task, one after another
    assert ran == [(n, asyncio.current_task()) for n in range(3)]


async def test_an_inline_tool_that_raises_stop_iteration_raises_runtime_error() -> None:
    def first() -> int:
        return next(iter([]))

    with pytest.raises(RuntimeError, match=r"first\(\) raised StopIteration"):
        await FunctionToolCallback(first, inline=True).acall("")


def test_inline_is_refused_for_async_functions_and_with_a_timeout() -> None:
    async def remote() -> str:
        return ""

    def cheap() -> str:
        return ""

    with pytest.raises(ValueError, match="Tool 'remote': inline= is for plain def"):
        FunctionToolCallback(remote, inline=True)
    with pytest.raises(ValueError, match="Tool 'cheap': inline= is for plain def"):
        FunctionToolCallback(cheap, inline=True, timeout=1.0)
    with pytest.raises(ValueError, match="without a timeout"):
        FunctionToolCallback(tool(inline=True, timeout=1.0)(cheap))


async def test_acall_awaits_async_functions_on_the_loop() -> None:
    loop_thread = threading.get_ident()

    async def where() -> bool:
        await asyncio.sleep(0)
        return threading.get_ident() == loop_thread

    assert await FunctionToolCallback(where).acall("") == "true"


async def test_sync_tools_run_concurrently_in_acall() -> None:
    # More calls than the loop's default executor has threads on a small machine (CPUs + 4).
    calls = 12
    barrier = threading.Barrier(calls, timeout=5)

    def wait() -> str:
        barrier.wait()  # raises BrokenBarrierError unless all calls run at the same time
        return "ok"

    callback = FunctionToolCallback(wait)
    assert await asyncio.gather(*(callback.acall("") for _ in range(calls))) == ['"ok"'] * calls


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


async def test_context_variables_reach_sync_tools() -> None:
    def which() -> str:
        return REQUEST_ID.get()

    REQUEST_ID.set("r-42")
    assert await FunctionToolCallback(which).acall("") == '"r-42"'


def test_call_runs_async_functions_from_sync_code() -> None:
    async def double(n: int) -> int:
        await asyncio.sleep(0)
        return 2 * n

    assert FunctionToolCallback(double).call('{"n": 4}') == "8"


async def test_call_on_an_async_tool_inside_a_running_loop_is_a_clear_error() -> None:
    async def double(n: int) -> int:
        return 2 * n

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited"
        with pytest.raises(RuntimeError, match=r"use `await callback.acall\(...\)`"):
            FunctionToolCallback(double).call('{"n": 4}')


def test_sync_wrapper_around_an_async_function() -> None:
    async def inner(n: int) -> int:
        return n + 1

    @functools.wraps(inner)
    def wrapper(n: int) -> Any:
        return inner(n)

    callback = FunctionToolCallback(wrapper)
    assert callback.call('{"n": 1}') == "2"
    assert asyncio.run(callback.acall('{"n": 1}')) == "2"


def test_async_generators_are_rejected() -> None:
    async def stream() -> Any:
        yield 1

    with pytest.raises(ValueError, match="async generator"):
        FunctionToolCallback(stream)


# exceptions ----------------------------------------------------------------------------------


class Boom(Exception):
    pass


def test_exceptions_from_the_function_propagate_unchanged() -> None:
    error = Boom("no such city")

    def fail(city: str) -> str:
        raise error

    async def afail(city: str) -> str:
        raise error

    for function in (fail, afail):
        callback = FunctionToolCallback(function)
        with pytest.raises(Boom) as info:
            asyncio.run(callback.acall('{"city": "x"}'))
        assert info.value is error
    with pytest.raises(Boom):
        FunctionToolCallback(fail).call('{"city": "x"}')


async def test_a_stop_iteration_from_a_sync_tool_is_an_error_not_a_hang() -> None:
    # a bare next() in a tool: an asyncio future refuses StopIteration, and acall waited forever
    def first_match(q: str) -> str:
        return next(x for x in ["a", "b"] if x == q)

    with pytest.raises(RuntimeError, match=r"first_match\(\) raised StopIteration") as info:
        await asyncio.wait_for(FunctionToolCallback(first_match).acall('{"q": "z"}'), 5)
    assert isinstance(info.value.__cause__, StopIteration)


def test_tool_execution_exception_from_the_function_passes_through() -> None:
    error = ToolExecutionException("city must be in Europe")

    def f(city: str) -> str:
        raise error

    with pytest.raises(ToolExecutionException) as info:
        FunctionToolCallback(f).call('{"city": "x"}')
    assert info.value is error


def test_validation_errors_raised_inside_the_function_are_not_argument_errors() -> None:
    def f() -> None:
        Address.model_validate({})

    with pytest.raises(Exception) as info:
        FunctionToolCallback(f).call("")
    assert not isinstance(info.value, ToolExecutionException)


# input_type / input_schema --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("input_type", "arguments", "expected"),
    [
        (Order, '{"item": "tea", "quantity": "2"}', Order(item="tea", quantity=2)),
        (Move, '{"x": 1, "y": "2"}', Move(1, 2)),
        (Query, '{"text": "a", "limit": 3}', {"text": "a", "limit": 3}),
    ],
)
def test_input_type_receives_the_validated_value(
    input_type: Any, arguments: str, expected: Any
) -> None:
    received: list[Any] = []

    def handle(value: Any, ctx: ToolContext) -> str:
        received.append(value)
        return "ok"

    callback = FunctionToolCallback(handle, name="handle", input_type=input_type)
    assert callback.definition.input_schema["type"] == "object"
    assert callback.call(arguments) == '"ok"'
    assert received == [expected]


def test_input_type_errors_name_the_field() -> None:
    def place(order: Order) -> str:
        return order.item

    callback = FunctionToolCallback(place, input_type=Order)
    assert callback.definition.input_schema["required"] == ["item"]
    assert "- 'item': required but missing (expected string)" in error_of(callback, "{}")


def test_input_type_must_be_an_object_type() -> None:
    with pytest.raises(ValueError, match="input_type must describe a JSON object"):
        FunctionToolCallback(lambda n: n, name="n", input_type=int)


def test_input_type_needs_a_one_parameter_function() -> None:
    def two(a: Order, b: int) -> None: ...

    with pytest.raises(ValueError, match=r"exactly one input parameter .* it takes: a, b"):
        FunctionToolCallback(two, input_type=Order)


def test_input_schema_gets_the_parsed_dict_and_is_repaired() -> None:
    received: list[dict[str, Any]] = []

    def handle(arguments: dict[str, Any]) -> str:
        received.append(arguments)
        return "ok"

    raw = {
        "type": "dict",
        "properties": {"x": {"type": "float"}, "y": {"type": "float", "optional": True}},
        "required": ["x", "y"],
    }
    callback = FunctionToolCallback(handle, name="point", input_schema=raw)
    assert callback.definition.input_schema == {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        "required": ["x"],
    }
    assert callback.call('{"x": 1.5, "z": true}') == '"ok"'
    assert received == [{"x": 1.5, "z": True}]
    message = error_of(callback, '{"y": 2}')
    assert "- 'x': required but missing (expected number)" in message


def test_input_schema_as_json_text() -> None:
    callback = FunctionToolCallback(
        lambda args: args["q"], name="search", input_schema='{"properties": {"q": {}}}'
    )
    assert callback.definition.input_schema == {"type": "object", "properties": {"q": {}}}
    assert callback.call('{"q": "hi"}') == '"hi"'


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("{not json", "input_schema is not valid JSON"),
        ('{"type": "string"}', "input_schema must describe a JSON object"),
        ("[1]", "input_schema must be a JSON object"),
    ],
)
def test_bad_input_schema(schema: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FunctionToolCallback(lambda a: a, name="t", input_schema=schema)


def test_input_type_and_input_schema_are_exclusive() -> None:
    with pytest.raises(ValueError, match="either input_type= or input_schema="):
        FunctionToolCallback(lambda a: a, name="t", input_type=Order, input_schema={})


# other callables and caching ------------------------------------------------------------------


def test_partial_and_callable_objects() -> None:
    def scale(value: int, factor: int) -> int:
        return value * factor

    class Adder:
        def __call__(self, a: int, b: int) -> int:
            return a + b

    by_two = FunctionToolCallback(functools.partial(scale, factor=2))
    assert by_two.definition.name == "scale"
    assert by_two.call('{"value": 4}') == "8"
    adder = FunctionToolCallback(Adder(), name="add")
    assert list(adder.definition.input_schema["properties"]) == ["a", "b"]
    assert adder.call('{"a": 1, "b": 2}') == "3"
    with pytest.raises(ValueError, match="pass name="):
        FunctionToolCallback(Adder())


def test_arguments_bound_by_a_partial_are_hidden_from_the_model() -> None:
    def delete_files(path: str, user_id: int, context: ToolContext | None = None) -> str:
        return f"{user_id}:{path}:{dict(context or {})}"

    bound = functools.partial(delete_files, user_id=42, context=ToolContext({"fixed": 1}))
    callback = FunctionToolCallback(bound)
    schema = callback.definition.input_schema
    assert list(schema["properties"]) == ["path"]
    assert schema["required"] == ["path"]
    assert callback.call('{"path": "/a"}', ToolContext({"other": 2})) == "\"42:/a:{'fixed': 1}\""
    with pytest.raises(ToolExecutionException, match="'user_id': not a parameter"):
        callback.call('{"path": "/a", "user_id": 7}')


def test_not_callable() -> None:
    with pytest.raises(TypeError, match="needs a callable"):
        FunctionToolCallback("f")  # type: ignore[arg-type]


def test_schema_and_validator_are_built_once_per_function() -> None:
    class Tools:
        def lookup(self, key: str) -> str:
            return key

    first, second = Tools(), Tools()
    a = FunctionToolCallback(first.lookup)
    b = FunctionToolCallback(second.lookup)
    assert a.definition.input_schema is b.definition.input_schema
    assert a.call('{"key": "k"}') == '"k"'
    assert FunctionToolCallback(book).definition.input_schema is BOOK.definition.input_schema


def test_method_tool_binds_its_instance() -> None:
    class Counter:
        def __init__(self, start: int) -> None:
            self.value = start

        def add(self, n: int) -> int:
            self.value += n
            return self.value

    one, ten = Counter(1), Counter(10)
    assert FunctionToolCallback(one.add).call('{"n": 1}') == "2"
    assert FunctionToolCallback(ten.add).call('{"n": 1}') == "11"


def test_result_converter_must_return_text() -> None:
    callback = FunctionToolCallback(lambda: 1, name="one", result_converter=lambda v: v)
    with pytest.raises(TypeError, match="returned int, not str"):
        callback.call("")


def test_a_field_as_the_signature_default_describes_the_argument() -> None:
    # pydantic's `= Field(...)` spelling means what Annotated[..., Field(...)] means; the Field
    # itself was once passed to the function as the argument's value
    def f(
        city: str = Field(description="where"),
        count: int = Field(5, ge=1),
        tags: list[str] = Field(default_factory=list),  # noqa: B008 (the spelling under test)
        note: str = Field(None, alias="remark"),
    ) -> str:
        tags.append("seen")  # a fresh list each call
        return f"{city}{count}{tags}{note}"

    callback = FunctionToolCallback(f)
    schema = callback.definition.input_schema
    assert schema["required"] == ["city"]
    assert list(schema["properties"]) == ["city", "count", "tags", "remark"]
    assert schema["properties"]["city"]["description"] == "where"
    assert schema["properties"]["count"] == {"type": "integer", "minimum": 1, "default": 5}
    assert callback.call('{"city": "Oslo"}') == callback.call('{"city": "Oslo"}')
    assert callback.call('{"city": "Oslo"}') == "\"Oslo5['seen']None\""
    assert callback.call('{"city": "Oslo", "remark": "r"}') == "\"Oslo5['seen']r\""
    assert "greater than or equal to 1" in error_of(callback, '{"city": "Oslo", "count": 0}')


def test_one_function_under_two_tool_names_validates_for_each_name() -> None:
    # The function schema is cached per function: nothing in it may be one tool's.
    def lookup(city: str) -> str:
        return city

    FunctionToolCallback(lookup, name="lookup_city").call('{"city": "Paris"}')
    second = FunctionToolCallback(lookup, name="find_city")
    with pytest.raises(ToolExecutionException) as info:
        second.call('{"city": []}')
    assert "find_city" in str(info.value)
    assert info.value.__cause__ is not None and "lookup_city" not in str(info.value.__cause__)
