"""JSON Schema for tools: generation from type hints and repair of foreign schemas.

Type-level: this package never imports ``tooluse.tools``, which builds on it. The input schema
of a function is the function schema's (``tooluse.tools``), reached at call time for the
public name ``generate_for_function_input``.

The provider shaping (``plain_schema``, ``openai_strict_schema``, ``anthropic_strict_schema``,
``drop_injected_nulls``, ``StrictSchemaError``) lives with the providers that use it, in
``tooluse.models``, and is re-exported here, where the public API names it.

The names are imported when first used (``tooluse._lazy``), as listed in ``__init__.pyi``.
"""

from tooluse._lazy import stub_exports

__getattr__, __dir__ = stub_exports(__name__)
