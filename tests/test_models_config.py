"""from_config: provider strings and environment variables to configured models."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from provider_payloads import openai_completion
from provider_server import ProviderServer, Reply, shared_server
from tooluse import Prompt, UserMessage
from tooluse.models import (
    AnthropicChatModel,
    ChatModel,
    OpenAIChatModel,
    OpenAIResponsesChatModel,
    from_config,
)
from tooluse.models._sdk_model import SdkChatModel


@pytest.fixture
def server() -> ProviderServer:
    return shared_server()


@pytest.fixture
def made() -> Iterator[list[ChatModel]]:
    models: list[ChatModel] = []
    yield models
    for model in models:
        if isinstance(model, SdkChatModel):
            model.close()


def build(made: list[ChatModel], spec: str | None, **kwargs: Any) -> ChatModel:
    model = from_config(spec, **kwargs)
    made.append(model)
    return model


def sent_key(server: ProviderServer, model: ChatModel) -> str:
    server.expect(Reply.json(openai_completion("ok")))
    model.call(Prompt([UserMessage(text="hi")]))
    return server.requests[-1].headers["authorization"].removeprefix("Bearer ")


@pytest.mark.parametrize(
    ("spec", "env", "kind", "model_name", "base_url"),
    [
        (
            "openai:gpt-4o-mini",
            {"OPENAI_API_KEY": "sk"},
            OpenAIChatModel,
            "gpt-4o-mini",
            "https://api.openai.com/v1/",
        ),
        (
            "openai:gpt-4o-mini",
            {"OPENAI_API_KEY": "sk", "OPENAI_BASE_URL": "https://gateway.example/v1"},
            OpenAIChatModel,
            "gpt-4o-mini",
            "https://gateway.example/v1/",
        ),
        (
            "openai-responses:gpt-5-mini",
            {"OPENAI_API_KEY": "sk"},
            OpenAIResponsesChatModel,
            "gpt-5-mini",
            "https://api.openai.com/v1/",
        ),
        (
            "OpenAI-Responses:gpt-5",
            {"OPENAI_API_KEY": "sk", "OPENAI_BASE_URL": "https://gateway.example/v1"},
            OpenAIResponsesChatModel,
            "gpt-5",
            "https://gateway.example/v1/",
        ),
        (
            "anthropic:claude-sonnet-4-5",
            {"ANTHROPIC_API_KEY": "sk"},
            AnthropicChatModel,
            "claude-sonnet-4-5",
            "https://api.anthropic.com",
        ),
        (
            "deepseek:deepseek-chat",
            {"DEEPSEEK_API_KEY": "sk"},
            OpenAIChatModel,
            "deepseek-chat",
            "https://api.deepseek.com",
        ),
        (
            "qwen:qwen-plus",
            {"DASHSCOPE_API_KEY": "sk"},
            OpenAIChatModel,
            "qwen-plus",
            "https://dashscope.aliyuncs.com/compatible-mode/v1/",
        ),
        ("ollama:qwen2.5:7b", {}, OpenAIChatModel, "qwen2.5:7b", "http://localhost:11434/v1/"),
        ("Ollama:qwen2.5", {}, OpenAIChatModel, "qwen2.5", "http://localhost:11434/v1/"),
        (
            "openai-compatible:Qwen/Qwen2.5-7B@http://gpu:8000/v1",
            {},
            OpenAIChatModel,
            "Qwen/Qwen2.5-7B",
            "http://gpu:8000/v1/",
        ),
        (
            "openai-compatible:llama",
            {"OPENAI_BASE_URL": "http://cpp:8080/v1"},
            OpenAIChatModel,
            "llama",
            "http://cpp:8080/v1/",
        ),
        (
            None,
            {"TOOLUSE_MODEL": "deepseek:deepseek-reasoner", "DEEPSEEK_API_KEY": "sk"},
            OpenAIChatModel,
            "deepseek-reasoner",
            "https://api.deepseek.com",
        ),
    ],
)
def test_specs_build_the_right_model(
    made: list[ChatModel],
    spec: str | None,
    env: dict[str, str],
    kind: type,
    model_name: str,
    base_url: str,
) -> None:
    model = build(made, spec, env=env)
    assert isinstance(model, kind)
    assert isinstance(model, SdkChatModel)
    assert model.model == model_name
    assert model.base_url.rstrip("/") == base_url.rstrip("/")


def test_openai_uses_max_completion_tokens_and_compatible_servers_max_tokens(
    made: list[ChatModel],
) -> None:
    openai_model = build(made, "openai:gpt-5-mini", env={"OPENAI_API_KEY": "sk"})
    ollama_model = build(made, "ollama:qwen2.5", env={})
    assert isinstance(openai_model, OpenAIChatModel) and isinstance(ollama_model, OpenAIChatModel)
    assert openai_model.max_tokens_field == "max_completion_tokens"
    assert ollama_model.max_tokens_field == "max_tokens"


def test_keys_come_from_the_provider_variable_or_the_argument(
    server: ProviderServer, made: list[ChatModel]
) -> None:
    url = f"{server.url}/v1"
    env = {"DEEPSEEK_API_KEY": "sk-deep", "OPENAI_API_KEY": "sk-openai"}
    assert (
        sent_key(server, build(made, "deepseek:deepseek-chat", base_url=url, env=env)) == "sk-deep"
    )
    assert sent_key(server, build(made, f"openai-compatible:m@{url}", env=env)) == "sk-openai"
    assert sent_key(server, build(made, f"openai-compatible:m@{url}", env={})) == "EMPTY"
    assert sent_key(server, build(made, "ollama:qwen2.5", base_url=url, env=env)) == "ollama"
    assert (
        sent_key(server, build(made, "qwen:qwen-max", base_url=url, api_key="sk-arg", env={}))
        == "sk-arg"
    )


def test_explicit_settings_reach_the_model(made: list[ChatModel]) -> None:
    model = build(made, "ollama:qwen2.5", base_url="http://box:11434/v1", timeout=5.0, env={})
    assert isinstance(model, OpenAIChatModel) and model.base_url == "http://box:11434/v1/"


@pytest.mark.parametrize(
    ("spec", "env", "message"),
    [
        (
            None,
            {},
            "No model configured: pass a spec such as 'openai:gpt-4o-mini' or set TOOLUSE_MODEL",
        ),
        ("  ", {}, "No model configured"),
        (
            "gpt-4o-mini",
            {},
            r"needs a provider prefix, '<provider>:<model>', with provider one of "
            "anthropic, deepseek, local, ollama, openai, openai-compatible, openai-responses, qwen",
        ),
        (
            "gemini:flash",
            {},
            r"Unknown model provider 'gemini' in 'gemini:flash'; known providers: anthropic,",
        ),
        ("openai:", {"OPENAI_API_KEY": "sk"}, "names no model"),
        (
            "openai:gpt-4o-mini",
            {},
            r"'openai:gpt-4o-mini' needs an API key: set OPENAI_API_KEY or pass api_key=",
        ),
        (
            "openai-responses:gpt-5-mini",
            {},
            r"'openai-responses:gpt-5-mini' needs an API key: set OPENAI_API_KEY or pass api_key=",
        ),
        ("anthropic:claude-x", {}, "set ANTHROPIC_API_KEY"),
        ("deepseek:deepseek-chat", {"OPENAI_API_KEY": "sk"}, "set DEEPSEEK_API_KEY"),
        ("qwen:qwen-plus", {}, "set DASHSCOPE_API_KEY"),
        (
            "openai-compatible:llama",
            {},
            r"needs a base URL: write 'openai-compatible:<model>@<base_url>' "
            "or set OPENAI_BASE_URL",
        ),
    ],
)
def test_bad_configuration_gets_a_specific_error(
    spec: str | None, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        from_config(spec, env=env)


@pytest.mark.parametrize(
    ("spec", "key_env", "url_env", "official"),
    [
        ("openai:gpt-4o-mini", "OPENAI_API_KEY", "OPENAI_BASE_URL", "https://api.openai.com/v1/"),
        (
            "openai-responses:gpt-5-mini",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "https://api.openai.com/v1/",
        ),
        (
            "anthropic:claude-haiku-4-5",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "https://api.anthropic.com",
        ),
    ],
)
def test_a_given_environment_replaces_the_process_one_for_the_base_url_too(
    monkeypatch: pytest.MonkeyPatch,
    made: list[ChatModel],
    spec: str,
    key_env: str,
    url_env: str,
    official: str,
) -> None:
    # The SDKs read their *_BASE_URL from os.environ when given no URL.
    monkeypatch.setenv(url_env, "http://process-environment.invalid/v1")
    model = build(made, spec, env={key_env: "sk"})
    assert isinstance(model, SdkChatModel)
    assert model.base_url == official
    model = build(made, spec, env={key_env: "sk", url_env: "https://gateway.example/v1"})
    assert isinstance(model, SdkChatModel)
    assert model.base_url.rstrip("/") == "https://gateway.example/v1"


def test_the_process_environment_is_the_default(
    monkeypatch: pytest.MonkeyPatch, made: list[ChatModel]
) -> None:
    monkeypatch.setenv("TOOLUSE_MODEL", "anthropic:claude-haiku-4-5")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    model = build(made, None)
    assert isinstance(model, AnthropicChatModel) and model.model == "claude-haiku-4-5"
