"""The names of ``tooluse.models``, one per line: type checkers read this stub instead of
``__init__.py``, and ``tooluse._lazy`` imports each from its module on first use (a provider's
SDK loads with its class)."""

from tooluse.models._anthropic import AnthropicChatModel as AnthropicChatModel
from tooluse.models._base import BaseChatModel as BaseChatModel
from tooluse.models._base import ChatModel as ChatModel
from tooluse.models._config import MODEL_ENV as MODEL_ENV
from tooluse.models._config import from_config as from_config
from tooluse.models._errors import ProviderConnectionError as ProviderConnectionError
from tooluse.models._errors import ProviderContextLengthError as ProviderContextLengthError
from tooluse.models._errors import ProviderError as ProviderError
from tooluse.models._errors import ProviderResponseError as ProviderResponseError
from tooluse.models._errors import ProviderTimeoutError as ProviderTimeoutError
from tooluse.models._local import LocalChatModel as LocalChatModel
from tooluse.models._names import ToolNameAliases as ToolNameAliases
from tooluse.models._names import provider_safe_name as provider_safe_name
from tooluse.models._openai import OpenAIChatModel as OpenAIChatModel
from tooluse.models._openai_responses import OpenAIResponsesChatModel as OpenAIResponsesChatModel
