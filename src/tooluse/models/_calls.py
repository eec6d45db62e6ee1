"""Tool calls coming back from a provider, made ours again."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tooluse.messages import ToolCall
from tooluse.models._names import ToolNameAliases
from tooluse.models._schema_shaping import drop_injected_nulls
from tooluse.models._utf16 import joined_surrogates

__all__ = ["IncomingCalls"]


@dataclasses.dataclass(frozen=True, slots=True)
class IncomingCalls:
    """One request's way back: provider-safe names mapped to the real ones, and the nulls
    strict mode forced into optional arguments dropped (``strict_schemas``: real name ->
    the tool's original schema, for the tools sent strict)."""

    aliases: ToolNameAliases
    strict_schemas: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

    def tool_call(self, call_id: str, name: str | None, arguments: str | None) -> ToolCall:
        real_name = self.aliases.to_real(name or "")
        text = joined_surrogates(arguments or "")
        schema = self.strict_schemas.get(real_name)
        if schema is not None:
            text = drop_injected_nulls(text, schema)
        return ToolCall(id=call_id, name=real_name, arguments=text)
