"""Chat models: the protocol, and providers over the official SDKs.

The provider classes load their SDK on first use (``openai`` and ``anthropic`` take seconds
to import), so ``import tooluse`` stays fast for code that never talks to a provider.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tooluse.models._base import BaseChatModel, ChatModel
from tooluse.models._errors import (
    ProviderConnectionError,
    ProviderContextLengthError,
    ProviderError,
    ProviderResponseError,
    ProviderTimeoutError,
)
from tooluse.models._names import ToolNameAliases, provider_safe_name

if TYPE_CHECKING:
    from tooluse.models._anthropic import AnthropicChatModel
    from tooluse.models._config import MODEL_ENV, from_config
    from tooluse.models._local import LocalChatModel
    from tooluse.models._openai import OpenAIChatModel
    from tooluse.models._openai_responses import OpenAIResponsesChatModel

__all__ = [
    "MODEL_ENV",
    "AnthropicChatModel",
    "BaseChatModel",
    "ChatModel",
    "LocalChatModel",
    "OpenAIChatModel",
    "OpenAIResponsesChatModel",
    "ProviderConnectionError",
    "ProviderContextLengthError",
    "ProviderError",
    "ProviderResponseError",
    "ProviderTimeoutError",
    "ToolNameAliases",
    "from_config",
    "provider_safe_name",
]

_LAZY = {
    "AnthropicChatModel": "tooluse.models._anthropic",
    "LocalChatModel": "tooluse.models._local",
    "OpenAIChatModel": "tooluse.models._openai",
    "OpenAIResponsesChatModel": "tooluse.models._openai_responses",
    "MODEL_ENV": "tooluse.models._config",
    "from_config": "tooluse.models._config",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tooluse.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
