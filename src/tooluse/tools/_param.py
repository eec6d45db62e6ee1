"""``ToolParam``: per-parameter description and required flag, used through ``Annotated``."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import GetJsonSchemaHandler
    from pydantic.json_schema import JsonSchemaValue
    from pydantic_core import CoreSchema


@dataclasses.dataclass(frozen=True, slots=True)
class ToolParam:
    """Describes one tool parameter: ``city: Annotated[str, ToolParam(description="...")]``.

    ``required=None`` (the default) applies the usual rule: required unless the parameter has a
    default or is ``Optional``. ``True`` or ``False`` overrides that rule for the tool's top-level
    parameters. Inside pydantic models, dataclasses and TypedDicts only the description applies
    (their own field rules decide what is required).
    """

    description: str | None = None
    required: bool | None = None

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # Makes the description work on fields of models, dataclasses and TypedDicts too.
        schema: dict[str, Any] = handler(core_schema)
        if self.description:
            schema["description"] = self.description
        return schema


def find_tool_param(metadata: tuple[Any, ...]) -> ToolParam | None:
    """The last ``ToolParam`` among ``Annotated`` metadata, if any."""
    for item in reversed(metadata):
        if isinstance(item, ToolParam):
            return item
    return None
