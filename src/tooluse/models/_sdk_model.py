"""What the chat models over an official SDK share: settings and the injected-client check,
the async clients (one per event loop; ``call`` runs the async path too), which of them the
model closes, and the first step of every request (options over the defaults, the offered
tools, their provider-safe names).

It imports no SDK: each provider passes its client classes, so the SDK loads only with it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

from tooluse._loop_clients import AsyncClient, AsyncClients, ClientKind
from tooluse.messages import ChatOptions, Prompt
from tooluse.models._base import BaseChatModel
from tooluse.models._names import ToolNameAliases
from tooluse.models._options import merge_options
from tooluse.tools import ToolDefinition

__all__ = ["ProviderSettings", "SdkChatModel", "encodable"]


AsyncClientT = TypeVar("AsyncClientT", bound=AsyncClient)
ResultT = TypeVar("ResultT")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSettings:
    """The settings every SDK-backed model takes, passed once from its constructor (whose
    keywords, with their defaults, are the documented API) to this base: how the SDK's client
    reaches the provider, and what every request carries."""

    api_key: str | None
    base_url: str | None
    default_options: ChatOptions | None
    extra_headers: Mapping[str, str] | None
    timeout: float | None
    max_retries: int
    strict_tools: bool

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout}")

    def sdk_client_settings(self) -> dict[str, Any]:
        """The keywords of the SDK client's constructor (its own default timeout unless one
        is set)."""
        settings: dict[str, Any] = {
            "api_key": self.api_key,
            "base_url": self.base_url,
            "max_retries": self.max_retries,
        }
        if self.timeout is not None:
            settings["timeout"] = self.timeout
        return settings


class SdkChatModel(BaseChatModel, Generic[AsyncClientT]):
    """Base of the SDK-backed chat models. An injected client is closed by its owner. The
    async clients the model builds are per event loop (:class:`~tooluse._loop_clients.PerLoop`)
    and per process (a forked child builds its own)."""

    provider: ClassVar[str]
    # How to build the SDK's async client, which class an injected one must be (the SDK's
    # base class: its Bedrock or Azure variants are not subclasses of the plain client), how
    # the error messages name it, and the SDK's blocking client (refused, with a message).
    _new_client: ClassVar[Callable[..., Any]]
    _client_type: ClassVar[type]
    _client_name: ClassVar[str]
    _blocking_client_type: ClassVar[type]

    def __init__(self, model: str, settings: ProviderSettings, client: AsyncClientT | None) -> None:
        if not model.strip():
            raise ValueError(f"{type(self).__name__} needs a model name, got an empty string")
        self.model = model
        self.default_options = settings.default_options
        self.strict_tools = settings.strict_tools
        self._extra_headers = dict(settings.extra_headers or {})
        kind = ClientKind(
            owner=type(self).__name__,
            new=type(self)._new_client,
            type=self._client_type,
            name=self._client_name,
        )
        self._clients: AsyncClients[AsyncClientT] = AsyncClients(
            kind,
            settings.sdk_client_settings(),
            client,
            build_now=True,
            blocking_type=self._blocking_client_type,
            blocking_hint=(
                "the model sends every request with the async client (its call() and "
                "ChatClient.call() run it on an event loop of their own)"
            ),
        )
        self._base_url = str(self._clients.base_url)

    @property
    def _client(self) -> AsyncClientT:
        """The async client for the running event loop: the injected one, else this loop's."""
        return self._clients.get()

    @property
    def base_url(self) -> str:
        return self._base_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # -- lifecycle --------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP connections of the clients this model created (an injected client
        is left to its owner): the running loop's now, those of other event loops on their
        own loops (when each runs next or shuts down). The model stays usable: a later
        request makes new clients."""
        await self._clients.aclose()

    def close(self) -> None:
        """:meth:`aclose` from synchronous code: the client of the loop the sync API runs on
        in this thread (``ChatClient.call()``, the model's ``call()``) is closed now, those of
        other loops on their own loops."""
        self._clients.close()

    # -- request ----------------------------------------------------------------------------

    @staticmethod
    async def _send(create: Callable[..., Awaitable[ResultT]], params: dict[str, Any]) -> ResultT:
        """``await create(**params)``; a request the SDK cannot encode is sent again with its
        lone surrogates replaced (:func:`encodable`). The SDK encodes the body before sending
        anything, and the check costs nothing when the request encodes."""
        try:
            return await create(**params)
        except UnicodeEncodeError:
            return await create(**encodable(params))

    def _options_and_tools(
        self, prompt: Prompt
    ) -> tuple[ChatOptions, list[ToolDefinition], ToolNameAliases]:
        """The request's options over the defaults, the tools it offers and their names as
        sent; a ``tool_choice`` that names a tool or requires one needs tools to choose from."""
        options = merge_options(self.default_options, prompt.options)
        definitions = [callback.definition for callback in options.tool_callbacks]
        if not definitions and options.tool_choice not in (None, "auto", "none"):
            raise ValueError(f"tool_choice={options.tool_choice!r} needs tools in the request")
        aliases = ToolNameAliases.for_request(definitions, prompt.messages)
        return options, definitions, aliases


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(value: Any) -> Any:
    """The request's parameters with each lone surrogate in their text replaced by U+FFFD.
    UTF-8 cannot carry one, and the SDKs then fail to encode the whole request
    (``UnicodeEncodeError``); they come from a client's broken ``\\ud83d`` escape decoded by
    a JSON parser, or a file name or file read with ``surrogateescape``. Text without one is
    returned as it is (an ASCII check first, then a search)."""
    if isinstance(value, str):
        if value.isascii() or not _LONE_SURROGATE.search(value):
            return value
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {encodable(key): encodable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [encodable(item) for item in value]
    if isinstance(value, tuple):
        return tuple(encodable(item) for item in value)
    return value
