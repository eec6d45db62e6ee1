"""When the tool-search advisor forgets a session's index (Spring AI's eviction strategies).

``on_access(session_id)`` is called at the start of every request, on the event loop's thread
(so it must not block: the strategies here are dict updates), and returns the sessions to
evict; the advisor clears their indexes, in a worker thread, and then calls ``on_removed`` for
each.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol, runtime_checkable

from tooluse._fork import ProcessLock
from tooluse.search._types import check_count, check_instance

__all__ = [
    "AlwaysEvictStrategy",
    "CompositeEvictionStrategy",
    "EvictionStrategy",
    "LruEvictionStrategy",
    "NeverEvictStrategy",
    "TtlEvictionStrategy",
]


@runtime_checkable
class EvictionStrategy(Protocol):
    def on_access(self, session_id: str) -> list[str]:
        """Record an access; return the sessions to evict now."""
        ...

    def on_removed(self, session_id: str) -> None:
        """The advisor evicted ``session_id``: forget it."""
        ...


class NeverEvictStrategy:
    """Indexes live until the advisor's ``evict_session`` is called."""

    def on_access(self, session_id: str) -> list[str]:
        return []

    def on_removed(self, session_id: str) -> None:
        return None


class AlwaysEvictStrategy:
    """Evicts the current session on every request, so each request re-indexes (no state kept
    between requests)."""

    def on_access(self, session_id: str) -> list[str]:
        return [session_id]

    def on_removed(self, session_id: str) -> None:
        return None


class LruEvictionStrategy:
    """Keeps the ``max_sessions`` most recently used sessions (default 1000)."""

    def __init__(self, max_sessions: int = 1000) -> None:
        check_count("max_sessions", max_sessions)
        self._max_sessions = max_sessions
        self._sessions: OrderedDict[str, None] = OrderedDict()
        self._lock = ProcessLock()

    def on_access(self, session_id: str) -> list[str]:
        with self._lock:
            self._sessions[session_id] = None
            self._sessions.move_to_end(session_id)
            evicted = []
            while len(self._sessions) > self._max_sessions:
                evicted.append(self._sessions.popitem(last=False)[0])
            return evicted

    def on_removed(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)


class TtlEvictionStrategy:
    """Evicts the other sessions idle for at least ``ttl`` (checked lazily on each access; the
    current session is never evicted)."""

    def __init__(
        self, ttl: timedelta | float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if isinstance(ttl, timedelta):
            seconds = ttl.total_seconds()
        elif isinstance(ttl, int | float) and not isinstance(ttl, bool):
            seconds = float(ttl)
        else:
            raise TypeError(f"ttl must be a timedelta or a number of seconds, got {ttl!r}")
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"ttl must be positive and finite, got {ttl!r}")
        self._ttl = seconds
        self._clock = clock
        self._last_access: dict[str, float] = {}
        self._lock = ProcessLock()

    def on_access(self, session_id: str) -> list[str]:
        with self._lock:
            now = self._clock()
            self._last_access[session_id] = now
            expired = [
                other
                for other, seen in self._last_access.items()
                if other != session_id and now - seen >= self._ttl
            ]
            for other in expired:
                del self._last_access[other]
            return expired

    def on_removed(self, session_id: str) -> None:
        with self._lock:
            self._last_access.pop(session_id, None)


class CompositeEvictionStrategy:
    """The union of several strategies' evictions, e.g. LRU and TTL together."""

    def __init__(self, *strategies: EvictionStrategy) -> None:
        if not strategies:
            raise ValueError("CompositeEvictionStrategy needs at least one strategy")
        for strategy in strategies:
            check_instance("strategies", strategy, EvictionStrategy, "an EvictionStrategy")
        self._strategies = strategies

    def on_access(self, session_id: str) -> list[str]:
        evicted: dict[str, None] = {}
        for strategy in self._strategies:
            evicted.update(dict.fromkeys(strategy.on_access(session_id)))
        return list(evicted)

    def on_removed(self, session_id: str) -> None:
        for strategy in self._strategies:
            strategy.on_removed(session_id)
