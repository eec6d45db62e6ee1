"""The Redis clients of the stores and the service on Redis (rate-limit buckets, the turns
of a conversation, its events), from one import of the optional ``redis`` extra."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis
    import redis.asyncio
    import redis.asyncio.connection

__all__ = ["async_redis_client", "async_redis_connection", "redis_client"]


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


def async_redis_connection(
    url: str, needed_by: str, *, timeout: float
) -> redis.asyncio.connection.AbstractConnection:
    """One connection to the Redis server ``url``, for asyncio, opened by its first command
    (and again by the first after a failure closed it), that waits up to ``timeout`` seconds
    to connect, to write and for a reply, unless the URL sets ``socket_timeout`` and
    ``socket_connect_timeout``."""
    _import_redis(needed_by)
    import redis.asyncio

    # The pool reads the URL (the connection's class, TCP, TLS or a Unix socket, and its
    # options) and makes the connection as it would its own; it holds nothing.
    pool = redis.asyncio.ConnectionPool.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=timeout
    )
    return pool.connection_class(**pool.connection_kwargs)
