"""The Redis clients of the stores and the service on Redis (rate-limit buckets, the turns
of a conversation, its events), from one import of the optional ``redis`` extra."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis
    import redis.asyncio

__all__ = ["async_redis_client", "redis_client"]


def _import_redis(needed_by: str) -> None:
    try:
        import redis.asyncio  # noqa: F401
    except ImportError as exc:  # the redis extra is optional
        raise ImportError(
            f"{needed_by} needs the redis client: pip install 'tooluse[redis]'"
        ) from exc


def redis_client(url: str, needed_by: str) -> redis.Redis:
    """A client of the Redis server ``url``; without the redis extra, an ``ImportError``
    saying that ``needed_by`` needs it."""
    _import_redis(needed_by)
    import redis

    return redis.Redis.from_url(url)


def async_redis_client(
    url: str,
    needed_by: str,
    *,
    max_connections: int | None = None,
    timeout: float | None = None,
) -> redis.asyncio.Redis:
    """:func:`redis_client` for asyncio; with ``max_connections``, on a pool of that many
    where a command waits up to ``timeout`` seconds for a free connection (redis-py's
    default pool raises past its 100 instead)."""
    _import_redis(needed_by)
    import redis.asyncio

    if max_connections is None:
        return redis.asyncio.Redis.from_url(url)
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=timeout
    )
    return redis.asyncio.Redis.from_pool(pool)
