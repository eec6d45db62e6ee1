"""Rate limits per tool and per caller: token buckets.

``RateLimit(calls=5, per_seconds=60, scope="user")`` lets each user make 5 calls of the tool a
minute (a burst of 5, then one more every 12 seconds). The caller is the tool context's
``user_id``, ``tenant_id`` or ``conversation_id`` (set by the application, never by the
model); a call without one shares the bucket of the callers that have none. A call over the
limit is not run: the model reads an error saying when the tool can be called again.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Final, Literal, Protocol, runtime_checkable

from tooluse.calling._audit import caller_of
from tooluse.tools import ToolContext

__all__ = [
    "InMemoryRateLimitStore",
    "RateLimit",
    "RateLimitStore",
]

RateScope = Literal["user", "tenant", "conversation", "global"]
_SCOPES: Final = ("user", "tenant", "conversation", "global")


@dataclasses.dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``calls`` calls per ``per_seconds`` for each ``scope`` (``"global"``: all
    callers together), as a token bucket of ``calls`` tokens refilled evenly."""

    calls: int
    per_seconds: float
    scope: RateScope = "user"

    def __post_init__(self) -> None:
        if isinstance(self.calls, bool) or not isinstance(self.calls, int) or self.calls <= 0:
            raise ValueError(f"calls must be a positive integer, got {self.calls!r}")
        if not self.per_seconds > 0:
            raise ValueError(f"per_seconds must be > 0, got {self.per_seconds!r}")
        if self.scope not in _SCOPES:
            raise ValueError(f"scope must be one of {', '.join(_SCOPES)}, got {self.scope!r}")

    def bucket(self, tool: str, context: ToolContext) -> str:
        """The bucket a call of ``tool`` takes its token from."""
        if self.scope == "global":
            return f"{tool}\x00*"
        user, tenant, conversation = caller_of(context)
        value = {"user": user, "tenant": tenant, "conversation": conversation}[self.scope]
        return f"{tool}\x00{self.scope}\x00{value or ''}"

    def message(self, tool: str, wait: float) -> str:
        per = "all callers" if self.scope == "global" else f"each {self.scope}"
        return (
            f"Tool '{tool}' is rate-limited ({self.calls} calls per {self.per_seconds:g} "
            f"seconds for {per}) and was not run; it can be called again in {wait:.0f} "
            "seconds."
        )


@runtime_checkable
class RateLimitStore(Protocol):
    """Where the buckets live: in this process (:class:`InMemoryRateLimitStore`), in a SQLite
    file shared by the processes of one machine (:class:`SqliteRateLimitStore`), or shared
    by several machines in PostgreSQL (:class:`PostgresRateLimitStore`) or Redis
    (:class:`RedisRateLimitStore`). ``take`` is atomic per bucket."""

    async def take(self, bucket: str, *, capacity: int, per_seconds: float) -> float | None:
        """Take a token: ``None`` when one was left, else the seconds until one is."""
        ...


def refilled(tokens: float, updated: float, now: float, capacity: int, per_seconds: float) -> float:
    return min(float(capacity), tokens + max(0.0, now - updated) * capacity / per_seconds)


def token_wait(tokens: float, capacity: int, per_seconds: float) -> float:
    return (1 - tokens) * per_seconds / capacity


class InMemoryRateLimitStore:
    """Buckets in this process's memory (a worker of its own)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()
        self._clock = clock

    async def take(self, bucket: str, *, capacity: int, per_seconds: float) -> float | None:
        now = self._clock()
        with self._lock:
            tokens, updated = self._buckets.get(bucket, (float(capacity), now))
            tokens = refilled(tokens, updated, now, capacity, per_seconds)
            if tokens < 1:
                self._buckets[bucket] = (tokens, now)
                return token_wait(tokens, capacity, per_seconds)
            self._buckets[bucket] = (tokens - 1, now)
            return None
