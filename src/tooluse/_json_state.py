"""JSON text for the states a paused run is stored as (``RunState``, ``QaPause``): written so
that any text survives a UTF-8 store, read back with the envelope checked (an object, the
version this tooluse writes, exactly the expected keys) before the fields are."""

from __future__ import annotations

import json
from collections.abc import Mapping, Set
from typing import Any

__all__ = ["dump_state", "load_state"]


def dump_state(data: dict[str, Any]) -> str:
    """``data`` as JSON text, readable where it can be and UTF-8 encodable always."""
    text = json.dumps(data, ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:
        # A lone surrogate (a model's "\ud800" escape, decoded) cannot be stored as UTF-8;
        # escaped, it survives and json.loads reads it back.
        return json.dumps(data)
    return text


def load_state(
    text: str | bytes,
    *,
    kind: str,
    version: int,
    keys: Set[str],
    older: Mapping[int, Set[str]] | None = None,
) -> dict[str, Any]:
    """The JSON object in ``text``, with ``version`` and exactly ``keys`` (or an ``older``
    version and exactly its keys, ``{version: keys}``); ``ValueError`` naming ``kind`` and what
    is wrong otherwise."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{kind} JSON is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{kind} JSON must be an object, got {type(data).__name__}")
    readable = {**(older or {}), version: keys}
    found = data.get("version")
    expected = readable.get(found) if type(found) is int else None  # not True for 1
    if expected is None:
        versions = " or ".join(str(v) for v in sorted(readable))
        raise ValueError(
            f"{kind} JSON has version {found!r}; this tooluse reads version {versions}"
        )
    missing, unknown = sorted(expected - set(data)), sorted(set(data) - expected)
    if missing or unknown:
        raise ValueError(f"{kind} JSON lacks keys {missing} / has unknown keys {unknown}")
    return data
