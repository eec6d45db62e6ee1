"""Rate-limit buckets shared between processes: SQLite, PostgreSQL, Redis (imported when first
used: the loop's default is :class:`InMemoryRateLimitStore`)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

from tooluse._postgres import PostgresDatabase
from tooluse._redis import redis_client
from tooluse._sqlite import Synchronous
from tooluse._tables import OwnsTables, PostgresTables, Schema, SqliteTables, Tables, storable_text
from tooluse.calling._rate_limits import refilled, token_wait

__all__ = ["PostgresRateLimitStore", "RedisRateLimitStore", "SqliteRateLimitStore"]

_SCHEMA = Schema(
    component="tool_rate_limits",
    sqlite=(
        "CREATE TABLE tool_rate_bucket (bucket TEXT PRIMARY KEY, tokens REAL NOT NULL, "
        "updated REAL NOT NULL)",
    ),
    sqlite_version=1,
    postgres=(
        (
            "CREATE TABLE tool_rate_bucket (bucket TEXT PRIMARY KEY, "
            "tokens DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL)",
        ),
    ),
)


class _TableRateLimitStore:
    """Buckets in a table of ``_tables`` (a SQLite file or a PostgreSQL database). A take
    is one transaction holding the bucket's row (SQLite: the file) from reading it to
    writing it back, so no two takes spend one token."""

    _tables: Tables
    _clock: Callable[[], float]

    async def take(self, bucket: str, *, capacity: int, per_seconds: float) -> float | None:
        return await asyncio.to_thread(self._take, storable_text(bucket), capacity, per_seconds)

    def _take(self, bucket: str, capacity: int, per_seconds: float) -> float | None:
        now = self._clock()
        with self._tables.write() as connection:
            # The row exists first, so that the SELECT below can lock it.
            connection.execute(
                "INSERT INTO tool_rate_bucket (bucket, tokens, updated) VALUES (?, ?, ?) "
                "ON CONFLICT (bucket) DO NOTHING",
                (bucket, float(capacity), now),
            )
            tokens, updated = connection.execute(
                "SELECT tokens, updated FROM tool_rate_bucket WHERE bucket = ?"
                + self._tables.row_lock,
                (bucket,),
            ).fetchone()
            tokens = refilled(tokens, updated, now, capacity, per_seconds)
            wait = token_wait(tokens, capacity, per_seconds) if tokens < 1 else None
            connection.execute(
                "UPDATE tool_rate_bucket SET tokens = ?, updated = ? WHERE bucket = ?",
                # another host's clock may be ahead: its refill is not counted twice
                (tokens if wait is not None else tokens - 1, max(now, updated), bucket),
            )
        return wait


class SqliteRateLimitStore(SqliteTables, _TableRateLimitStore):
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
        super().__init__(path, _SCHEMA, busy_timeout=busy_timeout, synchronous=synchronous)
        self._tables = self
        self._clock = clock


class PostgresRateLimitStore(OwnsTables, _TableRateLimitStore):
    """Buckets in a PostgreSQL database, shared by every worker on every host (each take
    locks its bucket's row). ``database`` is a URL (``postgresql://...``; the store opens
    its own connection pool, closed with it) or a :class:`~tooluse.memory.PostgresDatabase`
    shared with other stores. ``clock`` is each host's wall time: keep the hosts' clocks in
    step (NTP). Needs ``pip install 'tooluse[postgres]'``."""

    def __init__(
        self, database: str | PostgresDatabase, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._tables = PostgresTables(database, _SCHEMA)
        self._clock = clock


# KEYS[1]: the bucket; ARGV: capacity, per_seconds, the time (empty: the server's). The
# refill and the wait are those of refilled and token_wait. The key expires once the bucket is full
# again (a full bucket and no bucket take the same token).
_TAKE_SCRIPT = """
local capacity = tonumber(ARGV[1])
local per_seconds = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if not now then
  local time = redis.call('TIME')
  now = tonumber(time[1]) + tonumber(time[2]) / 1000000
end
local state = redis.call('HMGET', KEYS[1], 'tokens', 'updated')
local tokens = capacity
local updated = now
if state[1] then
  updated = tonumber(state[2])
  local refill = math.max(0, now - updated) * capacity / per_seconds
  tokens = math.min(capacity, tonumber(state[1]) + refill)
end
local wait = -1
if tokens < 1 then
  wait = (1 - tokens) * per_seconds / capacity
else
  tokens = tokens - 1
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
  'updated', string.format('%.17g', math.max(now, updated)))
local until_full = (capacity - tokens) * per_seconds / capacity
redis.call('PEXPIRE', KEYS[1], math.ceil(until_full * 1000) + 1000)
return string.format('%.17g', wait)
"""


class RedisRateLimitStore:
    """Buckets in Redis, shared by every worker on every host: a take is one Lua script,
    which Redis runs atomically. The time is the Redis server's, one clock for every host
    (``clock``: the caller's instead, for tests). Keys are ``prefix`` + the bucket and
    expire once their bucket is full again. Needs ``pip install 'tooluse[redis]'``."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "tooluse:rate:",
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._client = redis_client(url, "RedisRateLimitStore")
        self._script = self._client.register_script(_TAKE_SCRIPT)
        self._prefix = prefix
        self._clock = clock

    async def take(self, bucket: str, *, capacity: int, per_seconds: float) -> float | None:
        return await asyncio.to_thread(self._take, bucket, capacity, per_seconds)

    def _take(self, bucket: str, capacity: int, per_seconds: float) -> float | None:
        now = "" if self._clock is None else repr(self._clock())
        answer = self._script(keys=[self._prefix + bucket], args=[capacity, per_seconds, now])
        wait = float(answer)
        return None if wait < 0 else wait

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RedisRateLimitStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
