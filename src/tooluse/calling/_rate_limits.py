"""Rate limits per tool and per caller: token buckets.

``RateLimit(calls=5, per_seconds=60, scope="user")`` lets each user make 5 calls of the tool a
minute (a burst of 5, then one more every 12 seconds). The caller is the tool context's
``user_id``, ``tenant_id`` or ``conversation_id`` (set by the application, never by the
model); a call without one shares the bucket of the callers that have none. A call over the
limit is not run: the model reads an error saying when the tool can be called again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import time
from collections.abc import Callable
from typing import Final, Literal, Protocol, runtime_checkable

from tooluse._sqlite import SqliteStore, Synchronous, write_transaction
from tooluse.calling._audit import caller_of
from tooluse.tools import ToolContext

__all__ = [
    "InMemoryRateLimitStore",
    "RateLimit",
    "RateLimitStore",
    "SqliteRateLimitStore",
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
    file shared by the processes of one machine (:class:`SqliteRateLimitStore`), or in a
    shared store (Redis) for several machines. ``take`` is atomic per bucket."""

    async def take(self, bucket: str, *, capacity: int, per_seconds: float) -> float | None:
        """Take a token: ``None`` when one was left, else the seconds until one is."""
        ...


def _refill(tokens: float, updated: float, now: float, capacity: int, per_seconds: float) -> float:
    return min(float(capacity), tokens + max(0.0, now - updated) * capacity / per_seconds)


def _wait(tokens: float, capacity: int, per_seconds: float) -> float:
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
            tokens = _refill(tokens, updated, now, capacity, per_seconds)
            if tokens < 1:
                self._buckets[bucket] = (tokens, now)
                return _wait(tokens, capacity, per_seconds)
            self._buckets[bucket] = (tokens - 1, now)
            return None


class SqliteRateLimitStore(SqliteStore):
    """Buckets in a SQLite file: shared by the processes that open it (the workers of one
    machine). ``clock`` is wall time, the same in every process."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 10.0,
        synchronous: Synchronous = "NORMAL",
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(
            path,
            component="tool_rate_limits",
            version=1,
            statements=(
                "CREATE TABLE tool_rate_bucket (bucket TEXT PRIMARY KEY, tokens REAL NOT NULL, "
                "updated REAL NOT NULL)",
            ),
            busy_timeout=busy_timeout,
            synchronous=synchronous,
        )
        self._clock = clock

    async def take(self, bucket: str, *, capacity: int, per_seconds: float) -> float | None:
        return await asyncio.to_thread(self._take, bucket, capacity, per_seconds)

    def _take(self, bucket: str, capacity: int, per_seconds: float) -> float | None:
        now = self._clock()
        with self._lock, write_transaction(self._connection) as connection:
            row = connection.execute(
                "SELECT tokens, updated FROM tool_rate_bucket WHERE bucket = ?", (bucket,)
            ).fetchone()
            tokens = float(capacity)
            if row is not None:
                tokens = _refill(row[0], row[1], now, capacity, per_seconds)
            wait = _wait(tokens, capacity, per_seconds) if tokens < 1 else None
            connection.execute(
                "INSERT OR REPLACE INTO tool_rate_bucket (bucket, tokens, updated) "
                "VALUES (?, ?, ?)",
                (bucket, tokens if wait is not None else tokens - 1, now),
            )
        return wait
