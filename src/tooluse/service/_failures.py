"""How the service reports a run that failed: the log line, and the status for HTTP clients."""

from __future__ import annotations

import logging

from tooluse.errors import ToolSourceError
from tooluse.models import ProviderConnectionError, ProviderError, ProviderTimeoutError

__all__ = ["described_failure", "failure_status", "log_failure"]

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
