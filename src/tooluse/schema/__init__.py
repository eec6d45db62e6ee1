"""JSON Schema for tools: generation from type hints and repair of foreign schemas."""

from tooluse.schema._generate import (
    DRAFT_2020_12,
    generate_for_function_input,
    generate_for_type,
)
from tooluse.schema._provider import (
    StrictSchemaError,
    anthropic_strict_schema,
    drop_injected_nulls,
    openai_strict_schema,
    plain_schema,
)
from tooluse.schema._repair import ensure_valid_input_schema

__all__ = [
    "DRAFT_2020_12",
    "StrictSchemaError",
    "anthropic_strict_schema",
    "drop_injected_nulls",
    "ensure_valid_input_schema",
    "generate_for_function_input",
    "generate_for_type",
    "openai_strict_schema",
    "plain_schema",
]
