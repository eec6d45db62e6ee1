"""What the chat models over an official SDK share: settings and injected-client checks, the
async clients (one per event loop) and the blocking one built on demand for ``call``, which of
them the model closes, and the first step of every request (options over the defaults, the
offered tools, their provider-safe names).

It imports no SDK: each provider passes its client classes, so the SDK loads only with it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

from tooluse._loop_clients import AsyncClient, ClientKinds, SdkClients, SyncClient
from tooluse.messages import ChatOptions, Prompt
from tooluse.models._names import ToolNameAliases
from tooluse.models._options import merge_options
from tooluse.tools import ToolDefinition

__all__ = ["SdkChatModel", "encodable"]


AsyncClientT = TypeVar("AsyncClientT", bound=AsyncClient)
SyncClientT = TypeVar("SyncClientT", bound=SyncClient)
ResultT = TypeVar("ResultT")


class SdkChatModel(Generic[AsyncClientT, SyncClientT]):
    """Base of the SDK-backed chat models. Injected clients are closed by their owner; the
    blocking client is built from the same settings the first time ``call`` needs it. The
    async clients the model builds are per event loop (:class:`~tooluse._loop_clients.PerLoop`)
    and, like the blocking one, per process (a forked child builds its own)."""

    provider: ClassVar[str]
    # How to build the SDK's clients, which classes an injected one must be (the SDK's base
    # classes: its Bedrock or Azure variants are not subclasses of the plain client), and how
    # the error messages name them.
    _new_async_client: ClassVar[Callable[..., Any]]
    _new_sync_client: ClassVar[Callable[..., Any]]
    _async_client_type: ClassVar[type]
    _sync_client_type: ClassVar[type]
    _async_client_name: ClassVar[str]
    _sync_client_name: ClassVar[str]

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None,
        default_options: ChatOptions | None,
        extra_headers: Mapping[str, str] | None,
        timeout: float | None,
        max_retries: int,
        client: AsyncClientT | None,
        sync_client: SyncClientT | None,
    ) -> None:
        if not model.strip():
            raise ValueError(f"{type(self).__name__} needs a model name, got an empty string")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout}")
        self.model = model
        self.default_options = default_options
        self._extra_headers = dict(extra_headers or {})
        settings: dict[str, Any] = {
            "api_key": api_key,
            "base_url": base_url,
            "max_retries": max_retries,
        }
        if timeout is not None:
            settings["timeout"] = timeout
        kinds = ClientKinds(
            owner=type(self).__name__,
            new_async=type(self)._new_async_client,
            new_sync=type(self)._new_sync_client,
            async_type=self._async_client_type,
            sync_type=self._sync_client_type,
            async_name=self._async_client_name,
            sync_name=self._sync_client_name,
            async_methods="acall() and stream() (ChatClient runs them, for its call() too)",
            sync_methods="the model's call()",
        )
        self._clients: SdkClients[AsyncClientT, SyncClientT] = SdkClients(
            kinds, settings, client, sync_client, build_now=True
        )
        self._base_url = str(self._clients.base_url)

    @property
    def _client(self) -> AsyncClientT:
        """The async client for the running event loop: the injected one, else this loop's."""
        return self._clients.async_client()

    def _blocking_client(self) -> SyncClientT:
        return self._clients.sync_client()

    @property
    def base_url(self) -> str:
        return self._base_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # -- lifecycle --------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP connections of the clients this model created (injected clients
        are left to their owner): the running loop's async client and the blocking client
        now, the async clients of other event loops on their own loops (when each runs next
        or shuts down). The model stays usable: a later request makes new clients."""
        await self._clients.aclose()

    def close(self) -> None:
        """:meth:`aclose` from synchronous code: the blocking client and the async client of
        the loop the sync API runs on in this thread (``ChatClient.call()``) are closed now,
        the async clients of other loops on their own loops."""
        self._clients.close()

    # -- request ----------------------------------------------------------------------------

    @staticmethod
    def _send(create: Callable[..., ResultT], params: dict[str, Any]) -> ResultT:
        """``create(**params)``; a request the SDK cannot encode is sent again with its lone
        surrogates replaced (:func:`encodable`). The SDK encodes the body before sending
        anything, and the check costs nothing when the request encodes."""
        try:
            return create(**params)
        except UnicodeEncodeError:
            return create(**encodable(params))

    @staticmethod
    async def _asend(create: Callable[..., Awaitable[ResultT]], params: dict[str, Any]) -> ResultT:
        """:meth:`_send` for the async client."""
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
