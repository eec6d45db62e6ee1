"""Shaped tool schemas, computed once per schema instead of once per request.

The tool loop sends the same definitions every round; shaping walks the whole schema, so the
result is cached by the identity of the definition's ``input_schema`` dict (tool schemas are
built once and treated as immutable, like the frozen ``ToolDefinition`` that holds them).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Literal

from tooluse._fork import ProcessLock
from tooluse.models._schema_shaping import (
    StrictSchemaError,
    anthropic_strict_schema,
    openai_strict_schema,
    plain_schema,
)
from tooluse.tools import ToolDefinition

__all__ = ["StrictMode", "shaped_schema", "tool_input_schema"]

logger = logging.getLogger("tooluse.models")

StrictMode = Literal["openai-strict", "anthropic-strict"]
Mode = Literal["plain", StrictMode]
_STRICT = {"openai-strict": openai_strict_schema, "anthropic-strict": anthropic_strict_schema}
_MAX_ENTRIES = 4096

# (id(schema), mode) -> (the schema itself, keeping the id valid; its shaped form or None)
_cache: OrderedDict[tuple[int, Mode], tuple[dict[str, Any], dict[str, Any] | None]] = OrderedDict()
_lock = ProcessLock()


def shaped_schema(definition: ToolDefinition, mode: Mode) -> dict[str, Any] | None:
    """The definition's input schema shaped for ``mode``; ``None`` when strict mode cannot
    express it (a warning names the tool and the reason, once per schema)."""
    schema = definition.input_schema
    key = (id(schema), mode)
    with _lock:
        entry = _cache.get(key)
        if entry is not None and entry[0] is schema:
            _cache.move_to_end(key)
            return entry[1]
    shaped: dict[str, Any] | None
    if mode == "plain":
        shaped = plain_schema(schema)
    else:
        try:
            shaped = _STRICT[mode](schema)
        except StrictSchemaError as exc:
            logger.warning("tool %r is sent without strict mode: %s", definition.name, exc)
            shaped = None
    with _lock:
        _cache[key] = (schema, shaped)
        if len(_cache) > _MAX_ENTRIES:
            _cache.popitem(last=False)
    return shaped


def tool_input_schema(
    definition: ToolDefinition,
    strict: StrictMode | None,
    strict_schemas: dict[str, Mapping[str, Any]],
) -> tuple[dict[str, Any], bool]:
    """The schema to send for ``definition`` and whether it went strict: shaped for
    ``strict`` when that mode can express it (the original schema is then recorded in
    ``strict_schemas``, to drop the nulls strict mode forces into the calls), else plain."""
    if strict is not None:
        schema = shaped_schema(definition, strict)
        if schema is not None:
            strict_schemas[definition.name] = definition.input_schema
            return schema, True
    plain = shaped_schema(definition, "plain")
    assert plain is not None  # plain shaping always succeeds
    return plain, False
