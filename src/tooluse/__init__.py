"""tooluse: LLM tool calling and tool search for Python.

The public names are imported when first used (``tooluse._lazy``): ``import tooluse`` and the
loop's names load neither numpy nor the embedding model, the stores or the provider SDKs. They
are listed once, in ``__init__.pyi``, which type checkers read instead of this file."""

from tooluse._lazy import stub_exports

__getattr__, __dir__ = stub_exports(__name__)
