"""The audit writes of a run's tool rounds, awaited once before the run ends instead of at
each round: a write starts when its round ends, as always (the records are as durable as
before), and the run goes on meanwhile (its model call) instead of waiting for the
database's answer."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable

__all__ = ["AUDIT_WRITES", "AuditWrites"]

logger = logging.getLogger("tooluse.calling")


class AuditWrites:
    """The audit writes of one run that its rounds started (:meth:`add`), awaited by
    :meth:`wait` before the run reports its end; :meth:`abandon` for a run that stops
    before: the writes go on, their failures logged."""

    __slots__ = ("_writes",)

    def __init__(self) -> None:
        self._writes: list[asyncio.Future[None]] = []

    def add(self, write: Awaitable[None]) -> None:
        self._writes.append(asyncio.ensure_future(write))

    async def wait(self) -> None:
        """Wait for the writes started so far; raise the first that failed (an audit that
        silently stops is no audit)."""
        writes, self._writes = self._writes, []
        failures = [
            outcome
            for outcome in await asyncio.gather(*writes, return_exceptions=True)
            if isinstance(outcome, BaseException)
        ]
        if failures:
            raise failures[0]

    def abandon(self) -> None:
        writes, self._writes = self._writes, []
        for write in writes:
            write.add_done_callback(_log_failure)


def _log_failure(write: asyncio.Future[None]) -> None:
    if not write.cancelled() and write.exception() is not None:
        logger.error("Audit records of a stopped run were not stored", exc_info=write.exception())


AUDIT_WRITES: contextvars.ContextVar[AuditWrites | None] = contextvars.ContextVar(
    "tooluse_audit_writes", default=None
)
"""Set (in the context a run's rounds execute in): a :class:`ToolCallingManager`'s rounds
add their audit writes there instead of waiting for each."""
