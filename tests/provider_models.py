"""What the model adapter tests share: a one-message prompt, a stream collected, and adapters
built against :mod:`provider_server` and closed when the test ends."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from tooluse import ChatOptions, ChatResponse, Prompt, UserMessage
from tooluse.models import (
    AnthropicChatModel,
    ChatModel,
    OpenAIChatModel,
    OpenAIResponsesChatModel,
)

ProviderModel = TypeVar(
    "ProviderModel", OpenAIChatModel, OpenAIResponsesChatModel, AnthropicChatModel
)


def ask(text: str = "Weather in Paris?", **options: Any) -> Prompt:
    return Prompt([UserMessage(text=text)], ChatOptions(**options))


async def collect(model: ChatModel, prompt: Prompt) -> list[ChatResponse]:
    return [chunk async for chunk in model.stream(prompt)]


@contextlib.asynccontextmanager
async def model_maker(
    model_class: type[ProviderModel], model: str, **settings: Any
) -> AsyncIterator[Callable[..., ProviderModel]]:
    """A factory of ``model_class`` models (``model`` and ``settings`` unless a call names
    its own); every model it made is closed on exit."""
    made: list[ProviderModel] = []

    def make(**overrides: Any) -> ProviderModel:
        arguments = {**settings, **overrides}
        instance = model_class(arguments.pop("model", model), **arguments)
        made.append(instance)
        return instance

    try:
        yield make
    finally:
        for instance in made:
            await instance.aclose()


@contextlib.asynccontextmanager
async def all_providers(url: str) -> AsyncIterator[dict[str, Callable[..., Any]]]:
    """Model factories for every wire format against the server at ``url``: ``openai``
    (Chat Completions), ``openai-responses`` and ``anthropic``."""
    async with (
        model_maker(OpenAIChatModel, "gpt-test", base_url=f"{url}/v1", api_key="k") as openai,
        model_maker(
            OpenAIResponsesChatModel, "gpt-test", base_url=f"{url}/v1", api_key="k"
        ) as responses,
        model_maker(AnthropicChatModel, "claude-test", base_url=url, api_key="k") as anthropic,
    ):
        yield {"openai": openai, "openai-responses": responses, "anthropic": anthropic}
