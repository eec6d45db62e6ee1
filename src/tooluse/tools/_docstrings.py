"""Tool and parameter descriptions read from Google, NumPy and Sphinx docstrings."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import docstring_parser


@dataclasses.dataclass(frozen=True, slots=True)
class Docstring:
    """The free text of a docstring (summary plus any further paragraphs, without the
    parameter/returns sections) and each documented parameter's description."""

    description: str | None
    parameters: Mapping[str, str]


_EMPTY = Docstring(None, MappingProxyType({}))


def parse_docstring(function: Callable[..., Any]) -> Docstring:
    text = inspect.getdoc(function)
    if not text or not text.strip():
        return _EMPTY
    parsed = docstring_parser.parse(text)
    description = (parsed.description or "").strip() or None
    parameters = {
        param.arg_name: _one_line(param.description)
        for param in parsed.params
        if param.description and param.description.strip()
    }
    return Docstring(description, MappingProxyType(parameters))


def _one_line(text: str) -> str:
    # Docstring continuation lines are layout, not content.
    return " ".join(text.split())
