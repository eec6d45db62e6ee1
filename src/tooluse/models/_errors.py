"""Errors a model provider reports, in one shape for every provider.

The SDKs retry 429/5xx/timeouts themselves (bounded, exponential backoff with jitter, honouring
``Retry-After``); what reaches the caller after that is a :class:`ProviderError` carrying the
provider's own message, the HTTP status and the SDK exception as ``__cause__``.

Shared by the chat models (``tooluse.models`` exports the error classes) and
``OpenAIEmbeddingModel`` (``tooluse.embedding``, in the same layer: provider clients).
"""

from __future__ import annotations

import ipaddress
import sys
import urllib.parse
from collections.abc import Mapping
from types import ModuleType

__all__ = [
    "ProviderConnectionError",
    "ProviderContextLengthError",
    "ProviderError",
    "ProviderResponseError",
    "ProviderTimeoutError",
    "from_sdk_error",
    "sdk_failures",
]

# The SDKs' HTTP transport (httpx2 in current releases, httpx in older ones); its errors escape
# unwrapped when a stream breaks after the response started.
_TRANSPORTS = ("httpx2", "httpx")


class ProviderError(Exception):
    """A provider rejected or failed a request.

    ``status_code`` is the HTTP status (``None`` when no response arrived, e.g. the
    connection dropped); ``provider_message`` is the provider's own explanation; ``code`` is
    the error body's ``code`` when it is a string, else its ``type``
    (``context_length_exceeded``, ``insufficient_quota``, ``overloaded_error``, ...; ``None``
    when the body has neither).
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None = None,
        provider_message: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status_code = status_code
        self.provider_message = provider_message
        self.code = code

    @property
    def retryable(self) -> bool:
        """Whether trying again later may succeed (rate limits, server errors, lost
        connections; not an exhausted quota, which OpenAI also answers with 429); the SDK has
        already retried these a bounded number of times."""
        if self.code == "insufficient_quota":
            return False
        return (
            self.status_code is None
            or self.status_code in (408, 409, 429)
            or (self.status_code >= 500)
        )


class ProviderContextLengthError(ProviderError):
    """The request does not fit the model's context window (the prompt, with the tokens asked
    for): shorten the history or ask for fewer tokens; the same request fails again."""

    @property
    def retryable(self) -> bool:
        return False


class ProviderTimeoutError(ProviderError):
    """The provider did not answer within the configured timeout."""


class ProviderConnectionError(ProviderError):
    """The provider could not be reached: no connection was made (nothing listens at the
    URL, its name does not resolve, the network is down). ``url`` is the server's address
    (``scheme://host:port``); the message names it and says what to check, e.g. ``could not
    reach Ollama at http://localhost:11434: is `ollama serve` running?``."""

    def __init__(self, message: str, *, provider: str, url: str, provider_message: str) -> None:
        super().__init__(message, provider=provider, provider_message=provider_message)
        self.url = url


# Servers known by their port on this machine: their name, and how to start them.
_LOCAL_SERVERS = {11434: ("Ollama", "is `ollama serve` running?")}


def _unreachable(provider: str, url: str, reason: str) -> ProviderConnectionError:
    parts = urllib.parse.urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    name, advice = provider, "check the network, and the base URL (a proxy in between?)"
    if _is_local(parts.hostname or ""):
        name, advice = _LOCAL_SERVERS.get(
            parts.port or 0, (provider, "is its server running, on that port?")
        )
    return ProviderConnectionError(
        f"could not reach {name} at {origin} ({reason}): {advice}",
        provider=provider,
        url=origin,
        provider_message=reason,
    )


def _is_local(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name
        return False


class ProviderResponseError(ProviderError):
    """The provider took the request and then failed the response it was generating: the
    OpenAI Responses API's ``response.failed`` (its ``error``) or an error reported inside a
    stream that had started (an ``error`` event, or a Chat Completions ``data:`` line holding
    ``error``). ``code`` is the provider's error code (``server_error``,
    ``rate_limit_exceeded``, ``invalid_prompt``, ...; ``None`` when it sent none)."""

    # Failures that are the provider's state, not the request's; a failure without a code is
    # taken as one too (like a lost connection).
    _TRANSIENT_CODES = frozenset(
        {
            "server_error",
            "rate_limit_exceeded",
            "vector_store_timeout",
            # Anthropic's, in a stream's error event
            "overloaded_error",
            "api_error",
            "rate_limit_error",
        }
    )

    def __init__(
        self, message: str, *, provider: str, code: str | None, provider_message: str
    ) -> None:
        super().__init__(message, provider=provider, provider_message=provider_message, code=code)

    @property
    def retryable(self) -> bool:
        return self.code is None or self.code in self._TRANSIENT_CODES


def sdk_failures(sdk_error: type[Exception]) -> tuple[type[Exception], ...]:
    """What a request through an SDK may raise: its base error class and its transport's
    errors (call after importing the SDK, which imports its transport)."""
    transport_errors = [
        sys.modules[name].TransportError for name in _TRANSPORTS if name in sys.modules
    ]
    return (sdk_error, *transport_errors)


def from_sdk_error(
    provider: str, exc: Exception, sdk: ModuleType, *, chunks_received: int = 0
) -> ProviderError:
    """Translate an exception of the ``openai`` or ``anthropic`` SDK (``sdk`` is the module;
    both define ``APIStatusError``, ``APITimeoutError`` and ``APIConnectionError``)."""
    if isinstance(exc, sdk.APITimeoutError) or _is_transport_error(exc, "TimeoutException"):
        return ProviderTimeoutError(f"{provider}: request timed out", provider=provider)
    if isinstance(exc, sdk.APIStatusError) and exc.status_code >= 400:
        message = _provider_message(exc.body, exc.message)
        code = _error_code(exc.body)
        error_class = (
            ProviderContextLengthError if _is_context_overflow(code, message) else ProviderError
        )
        return error_class(
            f"{provider}: HTTP {exc.status_code}: {message}",
            provider=provider,
            status_code=exc.status_code,
            provider_message=message,
            code=code,
        )
    if isinstance(exc, sdk.APIError) and exc.body is not None:
        # An error inside a stream that had begun: the openai SDK raises a bare APIError for a
        # ``data:`` line holding ``error``, the anthropic SDK an APIStatusError with the
        # stream's status, 200, for an ``error`` event (connection errors have no body).
        message = _provider_message(exc.body, exc.message)
        code = _error_code(exc.body)
        return ProviderResponseError(
            f"{provider}: response failed: {code}: {message}"
            if code
            else f"{provider}: response failed: {message}",
            provider=provider,
            code=code,
            provider_message=message,
        )
    cause = exc.__cause__
    if (
        not chunks_received
        and isinstance(exc, sdk.APIConnectionError)
        and isinstance(cause, Exception)
        and _is_transport_error(cause, "ConnectError")
    ):
        return _unreachable(provider, str(exc.request.url), str(cause) or type(cause).__name__)
    if chunks_received and (
        isinstance(exc, sdk.APIConnectionError) or _is_transport_error(exc, "TransportError")
    ):
        return ProviderError(
            f"{provider}: connection lost after {chunks_received} stream chunks: {exc}",
            provider=provider,
        )
    return ProviderError(f"{provider}: {exc}", provider=provider, provider_message=str(exc))


def _is_transport_error(exc: Exception, kind: str) -> bool:
    return any(
        isinstance(exc, getattr(sys.modules[name], kind))
        for name in _TRANSPORTS
        if name in sys.modules
    )


def _error_fields(body: object) -> Mapping[str, object]:
    """The error object of a body: its ``error`` (OpenAI wraps it, the openai SDK unwraps it,
    Anthropic's SDK does not), else the body itself (vLLM's flat error)."""
    if not isinstance(body, Mapping):
        return {}
    error = body.get("error")
    return error if isinstance(error, Mapping) else body


def _error_code(body: object) -> str | None:
    fields = _error_fields(body)
    for key in ("code", "type"):
        value = fields.get(key)
        if isinstance(value, str) and value:
            return value
    return None


# How servers word a request over the context window: OpenAI, vLLM and DeepSeek ("maximum
# context length"), llama.cpp, Anthropic ("prompt is too long"), DashScope.
_CONTEXT_OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
_CONTEXT_OVERFLOW_WORDS = (
    "maximum context length",
    "exceeds the available context size",
    "prompt is too long",
    "range of input length should be",
)


def _is_context_overflow(code: str | None, message: str) -> bool:
    if code in _CONTEXT_OVERFLOW_CODES:
        return True
    lowered = message.lower()
    return any(words in lowered for words in _CONTEXT_OVERFLOW_WORDS)


def _provider_message(body: object, fallback: str) -> str:
    """The human-readable message in an error body (OpenAI ``{"message"}`` after the SDK
    unwraps ``error``, Anthropic ``{"error": {"message"}}``), else ``fallback``."""
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
        if isinstance(error, str):
            return error
    elif isinstance(body, str) and body.strip():
        return body.strip()
    return fallback
