"""Structured output: the format instructions for a type, and reading an answer as that type."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import pydantic

__all__ = ["EntityValidationError", "correction_request", "format_instructions", "parse_entity"]

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)


class EntityValidationError(ValueError):
    """The model's answer did not validate as the requested type, even after one corrective
    retry. ``errors`` holds both attempts' validation messages, ``text`` the last answer."""

    def __init__(self, message: str, *, text: str, errors: list[str]) -> None:
        super().__init__(message)
        self.text = text
        self.errors = errors


@functools.lru_cache(maxsize=256)
def _adapter(target: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(target)


def _type_name(target: Any) -> str:
    return getattr(target, "__name__", None) or repr(target)


def _schema_text(target: Any) -> str:
    return json.dumps(_adapter(target).json_schema(), ensure_ascii=False)


def format_instructions(target: Any) -> str:
    """What the system message says so the final answer comes back as ``target``."""
    return (
        "Your final answer must be only a JSON value (no prose, no code fence) that is valid "
        f"against this JSON Schema:\n{_schema_text(target)}"
    )


def correction_request(target: Any, error: str) -> str:
    """The user message of the one corrective retry."""
    return (
        f"Your answer could not be read as {_type_name(target)}: {error}\n"
        "Answer again with only a JSON value (no prose, no code fence) that is valid against "
        f"this JSON Schema:\n{_schema_text(target)}"
    )


def parse_entity(target: Any, text: str) -> Any:
    """``text`` (a JSON answer, optionally inside a Markdown code fence) validated as
    ``target``; raises ``ValueError`` with the validation message."""
    fenced = _FENCE.match(text)
    payload = fenced.group(1) if fenced else text.strip()
    if not payload:
        raise ValueError("the answer is empty")
    try:
        return _adapter(target).validate_json(payload)
    except pydantic.ValidationError as exc:
        raise ValueError(_summarise(exc)) from exc


def _summarise(exc: pydantic.ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        location = ".".join(str(part) for part in error["loc"]) or "(root)"
        parts.append(f"{location}: {error['msg']}")
    return "; ".join(parts)
