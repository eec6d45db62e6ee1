"""Hand-written ``ToolCallback``s for the loop, client and test-double tests: each records its
calls (arguments and tool context) and answers from a plain function."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tooluse import ToolContext, ToolDefinition, ToolExecutionException, ToolMetadata

OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


class RecordingTool:
    """Tool ``name`` with ``schema``; ``fn(arguments: dict, context) -> str`` gives the result
    (default: ``"<name> ok"``). Every call is appended to :attr:`calls`."""

    def __init__(
        self,
        name: str,
        fn: Callable[[dict[str, Any], ToolContext | None], str] | None = None,
        *,
        schema: dict[str, Any] | None = None,
        description: str = "",
        **metadata: Any,
    ) -> None:
        self._definition = ToolDefinition(
            name=name,
            description=description or f"The {name} tool.",
            input_schema=schema if schema is not None else OBJECT_SCHEMA,
        )
        self._metadata = ToolMetadata(**metadata)
        self._fn = fn or (lambda arguments, context: f"{name} ok")
        self.calls: list[tuple[dict[str, Any], ToolContext | None]] = []

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def metadata(self) -> ToolMetadata:
        return self._metadata

    def call(self, arguments: str, context: ToolContext | None = None) -> str:
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError as exc:
            raise ToolExecutionException(f"Arguments are not JSON: {exc}") from exc
        self.calls.append((parsed, context))
        return self._fn(parsed, context)

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str:
        return self.call(arguments, context)
