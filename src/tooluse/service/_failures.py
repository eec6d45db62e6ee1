"""How the service reports a run that failed: the log line, and the status for HTTP clients."""

from __future__ import annotations

import logging
from typing import Any

from tooluse.errors import ToolSourceError
from tooluse.models import ProviderConnectionError, ProviderError, ProviderTimeoutError

__all__ = ["described_failure", "failure_status", "log_failure", "reported_failure"]

logger = logging.getLogger("tooluse.service")


def described_failure(exc: Exception) -> bool:
    """Whether the exception's message says all there is (a provider that cannot be reached or
    refused the request, a tool source that broke): no traceback, no class name needed."""
    return isinstance(exc, ProviderError | ToolSourceError)


def log_failure(what: str, exc: Exception) -> None:
    """One line for a :func:`described_failure` (a provider that is down would otherwise fill
    the log with tracebacks), the traceback for anything else: a bug to find."""
    if described_failure(exc):
        logger.error("%s failed: %s", what, exc)
    else:
        logger.exception("%s failed", what)


def failure_status(exc: Exception) -> int:
    """503 for a provider that cannot be reached (try again later), 504 for one that did not
    answer in time, 502 for one that refused or failed the request; 500 for the rest."""
    if isinstance(exc, ProviderConnectionError):
        return 503
    if isinstance(exc, ProviderTimeoutError):
        return 504
    if isinstance(exc, ProviderError):
        return 502
    return 500


def reported_failure(exc: Exception) -> dict[str, Any]:
    """What an OpenAI client is told of a failed run (JSON, so that a durable run keeps it):
    ``message``, the exception (its class too, ``ConnectionError``, ``TimeoutError``, ...,
    unless its message says it all: a provider or a tool source that failed); ``type``,
    OpenAI's for a failure on the server's side; ``status``, :func:`failure_status`."""
    text = str(exc)
    name = type(exc).__name__
    message = text if described_failure(exc) else f"{name}: {text}" if text else name
    return {"message": message, "type": "server_error", "status": failure_status(exc)}
