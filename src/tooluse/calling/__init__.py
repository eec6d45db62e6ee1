"""Execution: one round of tool calls (lookup, concurrency, limits, timeouts, approval holds,
exceptions, tracing). See :class:`ToolCallingManager`.

The names are imported when first used (``tooluse._lazy``), as listed in ``__init__.pyi``."""

from tooluse._lazy import stub_exports

__getattr__, __dir__ = stub_exports(__name__)
