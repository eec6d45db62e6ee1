"""``from_config``: a chat model from a ``"<provider>:<model>"`` string and the environment.

- ``openai:gpt-4o-mini``: ``OPENAI_BASE_URL`` or OpenAI's API; key ``OPENAI_API_KEY``.
- ``openai-responses:gpt-5-mini``: the same endpoint and key, over the Responses API
  (:class:`~tooluse.models.OpenAIResponsesChatModel`).
- ``anthropic:claude-sonnet-4-5``: ``ANTHROPIC_BASE_URL`` or Anthropic's API; key
  ``ANTHROPIC_API_KEY``.
- ``deepseek:deepseek-chat``: ``https://api.deepseek.com``; key ``DEEPSEEK_API_KEY``.
- ``qwen:qwen-plus``: DashScope compatible mode; key ``DASHSCOPE_API_KEY``.
- ``ollama:qwen2.5``: ``http://localhost:11434/v1``; no key.
- ``openai-compatible:<model>@<base_url>`` (vLLM, llama.cpp, gateways): the URL given, else
  ``OPENAI_BASE_URL``; key ``OPENAI_API_KEY`` when set.
- ``local:qwen2.5-coder-1.5b``, ``local:qwen2.5-coder-0.5b``, ``local:/path/to/model.gguf``:
  a :class:`~tooluse.models.LocalChatModel` on this machine (llama.cpp, the ``local``
  extra); the engine starts here. Engine options follow a ``?``, joined by ``&``:
  ``local:qwen2.5-coder-1.5b?slots=2&context=4096&threads=1`` (``slots``: requests served
  side by side, each keeping its prompt cached; ``context``: tokens per slot).

The spec comes from the argument or ``TOOLUSE_MODEL``. Everything after the first ``:`` is the
model name, so Ollama tags work (``ollama:qwen2.5:7b``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Literal

from tooluse.messages import ChatOptions
from tooluse.models._base import ChatModel

__all__ = ["MODEL_ENV", "MissingApiKeyError", "from_config"]

MODEL_ENV = "TOOLUSE_MODEL"


@dataclasses.dataclass(frozen=True, slots=True)
class _Provider:
    api: Literal["openai", "openai-responses", "anthropic"]
    key_env: str | None  # where the API key comes from
    key_required: bool
    base_url: str | None = None
    base_url_env: str | None = None
    # Local servers ignore the key, but the SDK insists on one.
    placeholder_key: str | None = None
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"


LOCAL_PROVIDER = "local"

_PROVIDERS: dict[str, _Provider] = {
    # The official URLs are given, not left to the SDKs: they would read their *_BASE_URL
    # from os.environ even when from_config was handed another environment.
    "openai": _Provider(
        "openai",
        "OPENAI_API_KEY",
        key_required=True,
        base_url="https://api.openai.com/v1",
        base_url_env="OPENAI_BASE_URL",
        max_tokens_field="max_completion_tokens",
    ),
    "openai-responses": _Provider(
        "openai-responses",
        "OPENAI_API_KEY",
        key_required=True,
        base_url="https://api.openai.com/v1",
        base_url_env="OPENAI_BASE_URL",
    ),
    "anthropic": _Provider(
        "anthropic",
        "ANTHROPIC_API_KEY",
        key_required=True,
        base_url="https://api.anthropic.com",
        base_url_env="ANTHROPIC_BASE_URL",
    ),
    "deepseek": _Provider(
        "openai", "DEEPSEEK_API_KEY", key_required=True, base_url="https://api.deepseek.com"
    ),
    "qwen": _Provider(
        "openai",
        "DASHSCOPE_API_KEY",
        key_required=True,
        base_url="https://dashscope.aliyuncs.com/compatible-mode/v1",
    ),
    "ollama": _Provider(
        "openai",
        None,
        key_required=False,
        base_url="http://localhost:11434/v1",
        placeholder_key="ollama",
    ),
    "openai-compatible": _Provider(
        "openai",
        "OPENAI_API_KEY",
        key_required=False,
        base_url_env="OPENAI_BASE_URL",
        placeholder_key="EMPTY",
    ),
}


# The engine options a local: spec takes after "?", and LocalChatModel's names for them.
_LOCAL_ENGINE_OPTIONS = {"slots": "slots", "threads": "threads", "context": "context_size"}


def local_model_name(spec: str) -> str:
    """The model a ``local:`` spec names, without its engine options."""
    return _local_engine_options(spec, spec.strip().partition(":")[2])[0]


def _local_engine_options(spec: str, model: str) -> tuple[str, dict[str, int]]:
    """The model name of a ``local:`` spec and its engine options (``?slots=2&...``)."""
    name, _, query = model.strip().partition("?")
    if not name.strip():
        raise ValueError(f"Model spec {spec!r} names no model")
    options: dict[str, int] = {}
    for item in filter(None, query.split("&")):
        key, _, value = item.partition("=")
        option = _LOCAL_ENGINE_OPTIONS.get(key.strip())
        if option is None:
            raise ValueError(
                f"Unknown engine option {key!r} in {spec!r}; "
                f"known: {', '.join(_LOCAL_ENGINE_OPTIONS)}"
            )
        try:
            options[option] = int(value)
        except ValueError:
            raise ValueError(f"{key} takes a whole number in {spec!r}, got {value!r}") from None
    return name.strip(), options


class MissingApiKeyError(ValueError):
    """``from_config`` found no API key for a provider that needs one: ``key_env`` is the
    variable it reads (commands word their own advice from it)."""

    def __init__(self, spec: str, key_env: str) -> None:
        super().__init__(f"{spec!r} needs an API key: set {key_env} or pass api_key=")
        self.spec = spec
        self.key_env = key_env


def from_config(
    spec: str | None = None,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float | None = None,
    max_retries: int = 2,
    default_options: ChatOptions | None = None,
    env: Mapping[str, str] | None = None,
    slots: int | None = None,
) -> ChatModel:
    """Build the model ``spec`` names (default: ``$TOOLUSE_MODEL``).

    Explicit ``api_key`` / ``base_url`` win over the environment; ``env`` replaces
    ``os.environ`` (for tests and embedding). ``slots``: a ``local:`` model's engine slots,
    winning over the spec's ``?slots=`` (``ValueError`` for another provider).
    """
    environ = os.environ if env is None else env
    spec = spec if spec is not None else environ.get(MODEL_ENV)
    if not spec or not spec.strip():
        raise ValueError(
            f"No model configured: pass a spec such as 'openai:gpt-4o-mini' or set {MODEL_ENV}"
        )
    provider_name, sep, model = spec.strip().partition(":")
    if not sep:
        raise ValueError(
            f"Model spec {spec!r} needs a provider prefix, '<provider>:<model>', with provider "
            f"one of {', '.join(sorted([*_PROVIDERS, LOCAL_PROVIDER]))}"
        )
    provider_name = provider_name.lower()
    if provider_name == LOCAL_PROVIDER:
        from tooluse.models._llama_engine import DEFAULT_SLOTS
        from tooluse.models._local import LocalChatModel

        name, engine = _local_engine_options(spec, model)
        return LocalChatModel(
            name,
            threads=engine.get("threads"),
            slots=slots if slots is not None else engine.get("slots", DEFAULT_SLOTS),
            context_size=engine.get("context_size"),
            timeout=timeout,
            default_options=default_options,
        )
    if slots is not None:
        raise ValueError(f"slots= is an option of local: models, not of {spec!r}")
    provider = _PROVIDERS.get(provider_name)
    if provider is None:
        raise ValueError(
            f"Unknown model provider {provider_name!r} in {spec!r}; "
            f"known providers: {', '.join(sorted([*_PROVIDERS, LOCAL_PROVIDER]))}"
        )
    if provider_name == "openai-compatible" and "@" in model:
        model, _, url = model.partition("@")
        base_url = base_url or url
    if not model.strip():
        raise ValueError(f"Model spec {spec!r} names no model")
    base_url = base_url or (environ.get(provider.base_url_env) if provider.base_url_env else None)
    base_url = base_url or provider.base_url
    if provider_name == "openai-compatible" and not base_url:
        raise ValueError(
            f"{spec!r} needs a base URL: write 'openai-compatible:<model>@<base_url>' "
            "or set OPENAI_BASE_URL"
        )
    key = api_key or (environ.get(provider.key_env) if provider.key_env else None)
    key = key or provider.placeholder_key
    if not key and provider.key_required:
        raise MissingApiKeyError(spec, provider.key_env or "")
    # Imported here so configuring one provider never loads the other's SDK.
    if provider.api == "anthropic":
        from tooluse.models._anthropic import AnthropicChatModel

        return AnthropicChatModel(
            model,
            api_key=key,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            default_options=default_options,
        )
    if provider.api == "openai-responses":
        from tooluse.models._openai_responses import OpenAIResponsesChatModel

        return OpenAIResponsesChatModel(
            model,
            api_key=key,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            default_options=default_options,
        )
    from tooluse.models._openai import OpenAIChatModel

    return OpenAIChatModel(
        model,
        api_key=key,
        base_url=base_url,
        timeout=timeout,
        max_retries=max_retries,
        default_options=default_options,
        max_tokens_field=provider.max_tokens_field,
    )
