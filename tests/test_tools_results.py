"""Converting tool return values to text for the model (SPEC section 2; Spring AI's
DefaultToolCallResultConverter, with the strict JSON check SPEC asks for)."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import uuid
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

from tooluse import FunctionToolCallback
from tooluse.tools import Image, ToolResult, convert_result


class Weather(BaseModel):
    city: str
    celsius: float


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Level(enum.Enum):
    LOW = "low"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('{"a": 1}', '{"a": 1}'),  # JSON text passes through untouched
        ("[1, 2]", "[1, 2]"),
        ("42", "42"),
        ("true", "true"),
        ('"quoted"', '"quoted"'),
        ("plain text", '"plain text"'),
        # Spring forwards this unquoted (it only checks that the text *starts* with JSON);
        # SPEC asks for a strict json.loads check, so it is quoted here.
        ("3 strings processed: [one, two, three]", '"3 strings processed: [one, two, three]"'),
        ("Object processed: {x}", '"Object processed: {x}"'),
        ("", '""'),
        ("天气晴", '"天气晴"'),  # no \\u escapes
        ('line\n"two"', '"line\\n\\"two\\""'),
        (42, "42"),
        (1.5, "1.5"),
        (True, "true"),
        ([], "[]"),
        ({}, "{}"),
        (["one", "two", "three"], '["one","two","three"]'),
        ((1, "a"), '[1,"a"]'),
        ({"k": [1, {"n": None}]}, '{"k":[1,{"n":null}]}'),
        (Weather(city="Oslo", celsius=-3.5), '{"city":"Oslo","celsius":-3.5}'),
        (Point(1, 2), '{"x":1,"y":2}'),
        ([Point(1, 2)], '[{"x":1,"y":2}]'),
        (Level.LOW, '"low"'),
        (datetime.date(2026, 4, 22), '"2026-04-22"'),
        (datetime.datetime(2026, 4, 22, 9, 30), '"2026-04-22T09:30:00"'),
        (datetime.timedelta(minutes=90), '"PT1H30M"'),
        (Decimal("1.10"), '"1.10"'),
        (uuid.UUID(int=1), '"00000000-0000-0000-0000-000000000001"'),
        (b"\x00\xff", '"AP8="'),
    ],
)
def test_default_conversion(value: Any, expected: str) -> None:
    assert convert_result(value) == expected


def test_sets_become_arrays() -> None:
    assert sorted(json.loads(convert_result({3, 1, 2}))) == [1, 2, 3]


def test_deeply_nested_text_that_json_cannot_parse_is_quoted() -> None:
    text = "[" * 100_000
    assert json.loads(convert_result(text)) == text


def test_lone_surrogates_in_values_are_escaped_not_fatal() -> None:
    # Text decoded from a "\ud800" escape cannot be UTF-8 encoded; it stays readable as JSON.
    value = {"name": "x\ud800", "data": b"\x00", "when": datetime.date(2026, 1, 2)}
    text = convert_result(value)
    text.encode("utf-8")
    assert json.loads(text) == {"name": "x\ud800", "data": "AA==", "when": "2026-01-02"}
    assert json.loads(convert_result("x\udfff")) == "x\udfff"


def test_lone_surrogates_in_keys_are_escaped_not_fatal() -> None:
    # os.listdir gives such names for bytes that are not UTF-8: {name: size} must survive
    name = b"report-\xff.txt".decode("utf-8", "surrogateescape")
    value = {name: 3, "nested": [{name: b"\x00"}], "point": Point(1, 2), 7: "seven"}
    text = convert_result(value)
    text.encode("utf-8")
    assert json.loads(text) == {
        name: 3,
        "nested": [{name: "AA=="}],
        "point": {"x": 1, "y": 2},
        "7": "seven",
    }


@dataclasses.dataclass
class Listing:
    sizes: dict[str, int]


def test_lone_surrogates_in_keys_inside_dataclasses_survive() -> None:
    listing = Listing({"x\udcff": 1})
    assert json.loads(convert_result(listing)) == {"sizes": {"x\udcff": 1}}


def test_unknown_objects_become_their_str() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque!"

    assert convert_result({"v": Opaque()}) == '{"v":"opaque!"}'


def test_none_gives_done_for_none_annotated_functions_else_empty() -> None:
    # "Done" as a JSON string, as Spring's converter gives for void methods; other None
    # results give "" (SPEC; Spring's manager turns a null result into "").
    assert convert_result(None, returns_none=True) == '"Done"'
    assert convert_result(None) == ""

    def log(message: str) -> None:
        pass

    def maybe(message: str) -> str | None:
        return None

    def unannotated(message):  # type: ignore[no-untyped-def]
        return None

    assert FunctionToolCallback(log).call('{"message": "x"}') == '"Done"'
    assert FunctionToolCallback(maybe).call('{"message": "x"}') == ""
    assert FunctionToolCallback(unannotated).call('{"message": "x"}') == ""


async def test_async_none_annotated_function_gives_done() -> None:
    async def log(message: str) -> None:
        pass

    assert await FunctionToolCallback(log).acall('{"message": "x"}') == '"Done"'


def test_images_travel_beside_the_text_never_as_base64() -> None:
    png = Image(b"\x89PNG\r\n\x1a\n fake")
    assert convert_result(png) == ToolResult("", [png])
    jpeg = Image(b"\xff\xd8", mime_type="image/jpeg")
    nested = convert_result({"caption": "two", "thumbs": [jpeg, png]})
    assert isinstance(nested, ToolResult)
    assert json.loads(nested.text) == {
        "caption": "two",
        "thumbs": [{"image": 1, "mimeType": "image/jpeg"}, {"image": 2, "mimeType": "image/png"}],
    }
    assert nested.images == (jpeg, png)
    # The path for text that is not UTF-8 finds the images too.
    odd = convert_result({"name": "\ud800", "shot": png})
    assert isinstance(odd, ToolResult)
    assert json.loads(odd.text) == {"name": "\ud800", "shot": {"image": 1, "mimeType": "image/png"}}
    assert odd.images == (png,)
    with pytest.raises(TypeError, match="ToolResult images must be Image objects, got bytes"):
        ToolResult("x", [b"raw"])  # type: ignore[list-item]


def test_image_validation() -> None:
    with pytest.raises(TypeError, match="must be bytes"):
        Image("not bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mime_type cannot be empty"):
        Image(b"x", mime_type=" ")
    assert Image(bytearray(b"x")) == Image(b"x")
    assert "1 bytes" in repr(Image(b"x"))
