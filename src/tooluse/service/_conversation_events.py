"""``ConversationEvents``: what happens in a conversation's runs, to whoever watches it, on
any worker (``GET /api/events?conversation_id=...``).

A run publishes its events as it runs them (but the answer's deltas: the ``done`` event
holds the answer), so a page that watches a conversation on one worker sees a run that
another worker runs: an approval given on worker B resumes a run paused on worker A, and
the page on A sees the approved call's result and the answer. Without Redis, watchers see
the runs of their own worker; with Redis (``--redis-url``), its pub/sub carries them from
every worker, a channel per conversation (``tooluse:events:<id>``). Delivery is at most
once, as pub/sub's: a watcher that connects after an event does not get it (the
conversation's stored turns have it), and a run taken over after its worker died publishes
the events it replays again.

With Redis, a turn's tool calls, results and route are published only if a watcher of the
conversation is subscribed on some worker when the turn starts (``PUBSUB NUMSUB``: most
conversations have none); its end, ``done``, ``approval_required`` or ``error``, always is.
So a watcher sees every event of the turns that start after it subscribed, and the end of
a turn already running."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from tooluse._redis import async_redis_client, async_redis_connection

if TYPE_CHECKING:
    import redis.asyncio
    import redis.asyncio.connection

__all__ = ["ConversationEvents"]

logger = logging.getLogger("tooluse.service")

_CHANNEL = "tooluse:events:"
# Events a watcher may be behind by before it is dropped (a client that stopped reading).
_WATCHER_BACKLOG = 256
# Seconds the sender waits to connect to Redis, to write or for a reply, unless the URL
# says (``socket_timeout``): a Redis that stops answering fails the commands waiting (a
# turn's lock, its release) rather than holding every turn of the worker.
_SEND_TIMEOUT = 10.0


class ConversationEvents:
    """The events of each conversation's runs, published by the worker running them and
    delivered to the watchers of the conversation on this worker or, with ``redis_url``,
    on any worker of the Redis server."""

    def __init__(self, redis_url: str | None = None) -> None:
        self._watchers: dict[str, set[asyncio.Queue[tuple[str, dict[str, Any]] | None]]] = {}
        self._client: redis.asyncio.Redis | None = None  # the watchers' subscriptions
        # The sender's one connection, held: the commands go through it one batch at a time
        # (one sender task), without a client's or pipeline's objects, nor a pool's get and
        # release, per batch.
        self._connection: redis.asyncio.connection.AbstractConnection | None = None
        if redis_url is not None:
            self._client = async_redis_client(redis_url, "A service on Redis")
            self._connection = async_redis_connection(
                redis_url, "A service on Redis", timeout=_SEND_TIMEOUT
            )
        # The commands not sent yet (a PUBLISH, or a command whose reply someone awaits).
        self._outgoing: list[tuple[tuple[Any, ...], asyncio.Future[Any] | None]] = []
        self._sender: asyncio.Task[None] | None = None

    async def publish(self, conversation_id: str, kind: str, data: dict[str, Any]) -> None:
        """Send an event of a run in ``conversation_id`` to its watchers; with Redis, in
        the background, in order. A failure to reach Redis is logged, not raised: the run
        goes on without its watchers."""
        if self._client is None:
            self._deliver(conversation_id, kind, data)
            return
        # Sent by one task, in order, what gathered meanwhile in one write: the run does
        # not wait for a round trip to Redis per event, and the events of a burst (a tool's
        # call and result, the route) go in one.
        message = json.dumps({"event": kind, "data": data})
        self._queue(("PUBLISH", self.channel(conversation_id), message), None)

    @property
    def through_redis(self) -> bool:
        """Whether the events go through Redis (to every worker), not only to this one's
        watchers."""
        return self._client is not None

    @staticmethod
    def channel(conversation_id: str) -> str:
        """The Redis channel of ``conversation_id``'s events."""
        return _CHANNEL + conversation_id

    async def watched(self, conversation_id: str) -> bool:
        """Whether a turn of ``conversation_id`` starting now publishes its tool calls,
        results and route: with Redis, whether a watcher of it is subscribed on any worker
        (if Redis cannot tell, logged, as if one were); without, always (delivered here at
        no cost)."""
        if self._client is None:
            return True
        import redis.exceptions  # installed: there is a client

        try:
            _, subscribers = await self.after_published(
                "PUBSUB", "NUMSUB", self.channel(conversation_id)
            )
        except redis.exceptions.RedisError:
            logger.warning(
                "Could not ask Redis whether chat %s is watched: its events are published",
                conversation_id,
                exc_info=True,
            )
            return True
        return bool(subscribers)

    async def after_published(self, *command: Any) -> Any:
        """Run the Redis ``command`` once the events published so far are sent, in their
        write when they wait to be sent (a turn's ``done`` and the release of its lock:
        one round trip, not two); its reply, or its error raised."""
        if self._client is None:
            raise RuntimeError("ConversationEvents without Redis sends no Redis command")
        reply = asyncio.get_running_loop().create_future()
        self._queue(command, reply)
        return await reply

    def _queue(self, command: tuple[Any, ...], reply: asyncio.Future[Any] | None) -> None:
        self._outgoing.append((command, reply))
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        assert self._connection is not None  # only queued with Redis
        batch: list[tuple[tuple[Any, ...], asyncio.Future[Any] | None]] = []
        try:
            while self._outgoing:
                batch, self._outgoing = self._outgoing, []
                replies = await _exchange(self._connection, [command for command, _ in batch])
                _settle(batch, replies)
                batch = []
        finally:
            self._sender = None
            for _, reply in batch + self._outgoing:  # cancelled (the loop closing)
                if reply is not None and not reply.done():
                    reply.set_exception(RuntimeError("the Redis command was not sent"))

    @contextlib.asynccontextmanager
    async def watch(
        self, conversation_id: str
    ) -> AsyncIterator[AsyncIterator[tuple[str, dict[str, Any]]]]:
        """Subscribed while the block runs: the conversation's events, ``(name, data)``, as
        they are published from now on."""
        if self._client is None:
            queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue(
                _WATCHER_BACKLOG
            )
            watchers = self._watchers.setdefault(conversation_id, set())
            watchers.add(queue)
            try:
                yield _drained(queue)
            finally:
                watchers.discard(queue)
                if not watchers:
                    del self._watchers[conversation_id]
            return
        pubsub: Any = self._client.pubsub(ignore_subscribe_messages=True)  # untyped in redis-py
        try:
            await pubsub.subscribe(_CHANNEL + conversation_id)
            yield _received(pubsub)
        finally:
            await pubsub.aclose()

    def _deliver(self, conversation_id: str, kind: str, data: dict[str, Any]) -> None:
        for queue in list(self._watchers.get(conversation_id, ())):
            try:
                queue.put_nowait((kind, data))
            except asyncio.QueueFull:  # it stopped reading: its stream ends
                logger.warning("A watcher of chat %s fell behind and was dropped", conversation_id)
                self._watchers[conversation_id].discard(queue)
                queue.get_nowait()
                queue.put_nowait(None)

    async def aclose(self) -> None:
        if self._client is not None and self._connection is not None:
            if self._sender is not None:  # what was published goes out first
                await self._sender
            await self._connection.disconnect()
            await self._client.aclose()


async def _exchange(
    connection: redis.asyncio.connection.AbstractConnection, commands: list[tuple[Any, ...]]
) -> list[Any]:
    """Write ``commands`` to ``connection`` at once, then read their replies in order: each
    reply, or the error Redis replied to it; if the connection fails (redis-py then closes
    it, and the next write opens it again), that failure for it and the commands after it,
    whose replies will not come."""
    import redis.exceptions  # installed: there is a connection

    try:
        await connection.send_packed_command(connection.pack_commands(commands))
    except Exception as exc:
        return [exc] * len(commands)
    replies: list[Any] = []
    for sent in range(len(commands)):
        try:
            replies.append(await connection.read_response())
        except redis.exceptions.ResponseError as exc:  # a reply: the next one follows
            replies.append(exc)
        except Exception as exc:
            replies += [exc] * (len(commands) - sent)
            break
    return replies


def _settle(
    batch: list[tuple[tuple[Any, ...], asyncio.Future[Any] | None]], replies: list[Any]
) -> None:
    """Hand each awaited command its reply (or error); log the events that failed."""
    lost: list[tuple[str, Exception]] = []
    for (command, reply), answer in zip(batch, replies, strict=True):
        if reply is None:
            if isinstance(answer, Exception):
                lost.append((command[1], answer))
        elif not reply.done():  # not given up on (its awaiting task cancelled)
            if isinstance(answer, Exception):
                reply.set_exception(answer)
            else:
                reply.set_result(answer)
    if lost:
        chats = sorted({channel.removeprefix(_CHANNEL) for channel, _ in lost})
        logger.warning(
            "Could not publish %d event(s) of chat %s to Redis: their watchers miss them",
            len(lost),
            ", ".join(chats),
            exc_info=lost[0][1],
        )


async def _drained(
    queue: asyncio.Queue[tuple[str, dict[str, Any]] | None],
) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    while (item := await queue.get()) is not None:
        yield item


async def _received(pubsub: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    async for message in pubsub.listen():
        event = json.loads(message["data"])
        yield event["event"], event["data"]
