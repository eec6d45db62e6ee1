"""What the two adapters over the ``openai`` SDK share (Chat Completions in
:mod:`~tooluse.models._openai`, Responses in :mod:`~tooluse.models._openai_responses`): the
SDK's clients and settings, its errors made :class:`~tooluse.models.ProviderError`, and a
tool's function fields (name as sent, description, schema shaped for strict mode or plain)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import openai

from tooluse.models._errors import ProviderError, from_sdk_error, sdk_failures
from tooluse.models._names import ToolNameAliases
from tooluse.models._schema_cache import StrictMode, tool_input_schema
from tooluse.models._sdk_model import SdkChatModel
from tooluse.tools import ToolDefinition

__all__ = ["FAILURES", "OpenAISdkChatModel"]

# What a request through the SDK may raise: its errors and its transport's.
FAILURES = sdk_failures(openai.OpenAIError)


class OpenAISdkChatModel(SdkChatModel[openai.AsyncOpenAI]):
    """Base of the chat models over the ``openai`` SDK."""

    provider = "openai"
    _new_client = openai.AsyncOpenAI
    _client_type = openai.AsyncOpenAI  # Azure's and Bedrock's clients subclass it
    _client_name = "openai.AsyncOpenAI"
    _blocking_client_type = openai.OpenAI

    def _provider_error(self, exc: Exception, *, chunks_received: int = 0) -> ProviderError:
        return from_sdk_error(self.provider, exc, openai, chunks_received=chunks_received)

    def _function(
        self,
        definition: ToolDefinition,
        aliases: ToolNameAliases,
        strict_schemas: dict[str, Mapping[str, Any]],
    ) -> tuple[dict[str, Any], bool]:
        """The tool's function fields (``name``, ``description`` when it has one,
        ``parameters``) and whether its schema went strict (``strict_tools`` and a schema
        strict mode can express)."""
        function: dict[str, Any] = {"name": aliases.to_provider(definition.name)}
        if definition.description:
            function["description"] = definition.description
        mode: StrictMode | None = "openai-strict" if self.strict_tools else None
        function["parameters"], strict = tool_input_schema(definition, mode, strict_schemas)
        return function, strict
