"""Chat models: the protocol, and providers over the official SDKs.

The provider classes load their SDK on first use (``openai`` and ``anthropic`` take seconds
to import), so ``import tooluse`` stays fast for code that never talks to a provider.

The names are imported when first used (``tooluse._lazy``), as listed in ``__init__.pyi``.
"""

from tooluse._lazy import stub_exports

__getattr__, __dir__ = stub_exports(__name__)
