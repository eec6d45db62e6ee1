"""Turning what a tool function returns into the text the model reads.

- ``str`` that is JSON (strictly: ``json.loads`` accepts it) passes through unchanged; any other
  ``str`` is JSON-encoded (quoted), so every default result is JSON. Spring AI forwards any
  string that merely *starts* with a JSON value; we do not (``"3 items: [a, b]"`` is quoted).
- ``None`` from a function annotated ``-> None`` gives ``"Done"`` as a JSON string (the text
  ``"Done"`` with its quotes, as in Spring AI); ``None`` from any other function gives ``""``.
- ``Image`` (bytes with a mime type) gives a ``ToolResult``: the image travels beside the text
  and reaches the model as an image, never as base64 text. A returned ``Image`` has empty
  text; an ``Image`` nested in lists or dicts stands in the text as
  ``{"image": n, "mimeType": ...}``, ``n`` counting the value's images from 1. Bare ``bytes``
  become a base64 string.
- everything else is serialised with pydantic (models, dataclasses, TypedDicts, lists, tuples,
  sets, dicts, enums, datetimes, UUIDs, Decimals, ...); objects pydantic does not know become
  their ``str()``. Non-ASCII text is kept as is (no ``\\u`` escapes: fewer tokens).
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_core import (
    PydanticSerializationError,
    SchemaSerializer,
    core_schema,
    to_json,
    to_jsonable_python,
)

ResultConverter = Callable[[Any], "str | ToolResult"]
"""A function from a tool's return value to what the model reads: text, or a ``ToolResult``
when images go with it."""

DONE = json.dumps("Done")
_JSON_START = frozenset('{["-0123456789tfnNI')
# pydantic's Python-mode dump: models and dataclasses become dicts, text stays Python text
_TO_PYTHON = SchemaSerializer(core_schema.any_schema())


class Image:
    """An image a tool returns: raw bytes and their mime type (``image/png`` by default)."""

    __slots__ = ("data", "mime_type")

    def __init__(self, data: bytes, mime_type: str = "image/png") -> None:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"Image data must be bytes, got {type(data).__name__}")
        if not mime_type or not mime_type.strip():
            raise ValueError("Image mime_type cannot be empty")
        self.data = bytes(data)
        self.mime_type = mime_type

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Image):
            return NotImplemented
        return self.data == other.data and self.mime_type == other.mime_type

    def __hash__(self) -> int:
        return hash((self.data, self.mime_type))

    def __repr__(self) -> str:
        return f"Image(<{len(self.data)} bytes>, mime_type={self.mime_type!r})"

    def to_json_object(self) -> dict[str, str]:
        return {"mimeType": self.mime_type, "data": base64.b64encode(self.data).decode("ascii")}


@dataclasses.dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's result with images: ``text`` for the model and ``images`` shown to it as
    images. A ``ToolCallback`` returns one instead of ``str`` when its result has images
    (``convert_result`` gives one for values holding ``Image``); the ``ToolCallingManager``
    makes the ``ToolResponse`` of it, keeping the images the model can be shown."""

    text: str
    images: tuple[Image, ...] = ()

    def __init__(self, text: str, images: Sequence[Image] = ()) -> None:
        if not isinstance(text, str):
            raise TypeError(f"ToolResult text must be str, got {type(text).__name__}")
        images = tuple(images)
        wrong = [type(image).__name__ for image in images if not isinstance(image, Image)]
        if wrong:
            raise TypeError(f"ToolResult images must be Image objects, got {', '.join(wrong)}")
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "images", images)


def convert_result(value: Any, *, returns_none: bool = False) -> str | ToolResult:
    """The default conversion (see the module docstring); ``returns_none`` says the function
    is annotated ``-> None``. Text, unless ``value`` holds images."""
    if value is None:
        return DONE if returns_none else ""
    if isinstance(value, str):
        return value if is_json(value) else json.dumps(value, ensure_ascii=False)
    if isinstance(value, Image):
        return ToolResult("", (value,))
    if isinstance(value, ToolResult):  # a function that words its own text beside its images
        return value
    images = _Images()
    try:
        text = to_json(value, bytes_mode="base64", fallback=images.to_json).decode()
    except PydanticSerializationError:
        # A lone surrogate (text decoded from a "\ud800" escape, a file name from os.listdir
        # that is not UTF-8) is not UTF-8: the standard library writes it escaped.
        images = _Images()
        text = json.dumps(_with_surrogates(value, images), separators=(",", ":"))
    return ToolResult(text, tuple(images.found)) if images.found else text


class _Images:
    """The serialiser's fallback for one conversion: collects the ``Image`` objects it meets,
    leaving ``{"image": n, "mimeType": ...}`` in their place, and gives other unknown objects
    their ``str()``."""

    __slots__ = ("found",)

    def __init__(self) -> None:
        self.found: list[Image] = []

    def to_json(self, value: Any) -> Any:
        if not isinstance(value, Image):
            return str(value)
        self.found.append(value)
        return {"image": len(self.found), "mimeType": value.mime_type}


def is_json(text: str) -> bool:
    """Whether ``json.loads`` accepts ``text`` (a quick first-character test skips plain
    prose without parsing it)."""
    start = text.lstrip()[:1]
    if not start or start not in _JSON_START:
        return False
    try:
        json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: text nested deeper than json allows
        return False
    return True


def _with_surrogates(value: Any, images: _Images) -> Any:
    """``value`` as JSON data, lone surrogates kept as Python text. pydantic encodes every
    dict key as UTF-8 (a surrogate in a key fails even in ``to_jsonable_python``), so dicts
    and sequences are walked here and only keys that are not text and leaves go to pydantic."""
    return _plain_json(_TO_PYTHON.to_python(value, mode="python"), images)


def _plain_json(value: Any, images: _Images) -> Any:
    if isinstance(value, dict):
        return {_json_key(key, images): _plain_json(item, images) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain_json(item, images) for item in value]
    return to_jsonable_python(value, bytes_mode="base64", fallback=images.to_json)


def _json_key(key: Any, images: _Images) -> str:
    if isinstance(key, str):
        return key
    # pydantic's text for the key, as in the normal path ("1", "1,2", "2026-01-02")
    jsonable: dict[str, Any] = to_jsonable_python({key: None}, fallback=images.to_json)
    return next(iter(jsonable))
