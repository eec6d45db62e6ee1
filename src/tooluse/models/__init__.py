"""Chat models: the protocol, and providers over the official SDKs."""

from tooluse.models._anthropic import AnthropicChatModel
from tooluse.models._base import ChatModel
from tooluse.models._config import MODEL_ENV, from_config
from tooluse.models._errors import ProviderError, ProviderTimeoutError
from tooluse.models._names import ToolNameAliases, provider_safe_name
from tooluse.models._openai import OpenAIChatModel

__all__ = [
    "MODEL_ENV",
    "AnthropicChatModel",
    "ChatModel",
    "OpenAIChatModel",
    "ProviderError",
    "ProviderTimeoutError",
    "ToolNameAliases",
    "from_config",
    "provider_safe_name",
]
