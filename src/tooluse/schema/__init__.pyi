"""The names of ``tooluse.schema``, one per line: type checkers read this stub instead of
``__init__.py``, and ``tooluse._lazy`` imports each from its module on first use."""

from tooluse.models._schema_shaping import StrictSchemaError as StrictSchemaError
from tooluse.models._schema_shaping import anthropic_strict_schema as anthropic_strict_schema
from tooluse.models._schema_shaping import drop_injected_nulls as drop_injected_nulls
from tooluse.models._schema_shaping import openai_strict_schema as openai_strict_schema
from tooluse.models._schema_shaping import plain_schema as plain_schema
from tooluse.schema._function_input import (
    generate_for_function_input as generate_for_function_input,
)
from tooluse.schema._generate import DRAFT_2020_12 as DRAFT_2020_12
from tooluse.schema._generate import generate_for_type as generate_for_type
from tooluse.schema._repair import ensure_valid_input_schema as ensure_valid_input_schema
