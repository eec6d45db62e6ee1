"""``ConversationEvents``: a conversation's events reach its watchers, on the worker that
publishes them without Redis, and on every worker of one Redis with it."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio
import redis.exceptions

from _service_helpers import written
from tooluse.service._conversation_events import ConversationEvents


@pytest.fixture(params=["in-process", "redis"])
def two_workers(request: pytest.FixtureRequest) -> tuple[ConversationEvents, ConversationEvents]:
    """The publisher's and the watcher's buses: one bus without Redis, two on one Redis."""
    if request.param == "in-process":
        bus = ConversationEvents()
        return bus, bus
    url: str = request.getfixturevalue("redis_url")
    return ConversationEvents(url), ConversationEvents(url)


async def test_a_watcher_gets_its_conversations_events_in_order_and_no_others(
    two_workers: tuple[ConversationEvents, ConversationEvents],
) -> None:
    publisher, watcher_bus = two_workers
    try:
        async with watcher_bus.watch("c1") as events:
            await publisher.publish("c2", "done", {"answer": "not c1"})
            await publisher.publish("c1", "tool_result", {"result": "42"})
            await publisher.publish("c1", "done", {"answer": "It is 42."})
            received = [await asyncio.wait_for(anext(events), 10) for _ in range(2)]
        assert received == [("tool_result", {"result": "42"}), ("done", {"answer": "It is 42."})]
        await publisher.publish("c1", "done", {"answer": "nobody watches"})  # no error
    finally:
        await publisher.aclose()
        await watcher_bus.aclose()


async def test_a_watcher_that_stops_reading_is_dropped_not_the_run() -> None:
    bus = ConversationEvents()
    async with bus.watch("c1") as events:
        for number in range(300):  # more than a watcher may be behind by
            await bus.publish("c1", "tool_result", {"n": number})
        received = [item async for item in events]
    numbers = [data["n"] for _, data in received]
    assert 0 < len(numbers) < 300
    assert numbers == sorted(numbers) and numbers[-1] < 299  # its stream ended where it fell behind


async def test_events_published_just_before_a_worker_closes_still_reach_watchers(
    redis_url: str,
) -> None:
    publisher, watcher_bus = ConversationEvents(redis_url), ConversationEvents(redis_url)
    try:
        async with watcher_bus.watch("c1") as events:
            for number in range(50):  # sent in the background, in order
                await publisher.publish("c1", "tool_result", {"n": number})
            await publisher.aclose()
            received = [await asyncio.wait_for(anext(events), 10) for _ in range(50)]
        assert [data["n"] for _, data in received] == list(range(50))
    finally:
        await watcher_bus.aclose()


async def test_a_redis_that_cannot_be_reached_loses_the_events_not_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = ConversationEvents("redis://127.0.0.1:9/0")  # nothing listens on the discard port
    await bus.publish("c1", "done", {"answer": "42"})  # does not raise
    await bus.aclose()
    assert "Could not publish 1 event(s) of chat c1 to Redis" in caplog.text


async def test_a_command_after_the_events_goes_in_their_write_after_them(
    redis_url: str,
) -> None:
    publisher, watcher_bus = ConversationEvents(redis_url), ConversationEvents(redis_url)
    try:
        async with watcher_bus.watch("c1") as events:
            with written(publisher) as writes:
                await publisher.publish("c1", "done", {"answer": "42"})
                # The watcher is subscribed: the PUBLISH before it reached one client.
                assert await publisher.after_published("PUBSUB", "NUMSUB", "tooluse:events:c1") == [
                    b"tooluse:events:c1",
                    1,
                ]
            # one round trip for the event and the command
            assert [[command[0] for command in write] for write in writes] == [
                ["PUBLISH", "PUBSUB"]
            ]
            assert await asyncio.wait_for(anext(events), 10) == ("done", {"answer": "42"})
        with pytest.raises(redis.exceptions.ResponseError, match="unknown command"):
            await publisher.after_published("NO-SUCH-COMMAND")
        assert await publisher.after_published("PING") == b"PONG"  # the connection goes on
    finally:
        await publisher.aclose()
        await watcher_bus.aclose()


async def test_a_command_after_the_events_raises_when_redis_cannot_be_reached(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = ConversationEvents("redis://127.0.0.1:9/0")
    await bus.publish("c1", "done", {"answer": "42"})
    with pytest.raises(redis.exceptions.ConnectionError):
        await bus.after_published("PING")
    await bus.aclose()
    assert "Could not publish 1 event(s) of chat c1 to Redis" in caplog.text


async def test_a_bus_without_redis_sends_no_redis_command() -> None:
    with pytest.raises(RuntimeError, match="without Redis sends no Redis command"):
        await ConversationEvents().after_published("PING")


async def test_a_connection_redis_dropped_is_opened_again_by_the_next_write(
    redis_url: str,
) -> None:
    publisher, watcher_bus = ConversationEvents(redis_url), ConversationEvents(redis_url)
    admin = redis.asyncio.Redis.from_url(redis_url)
    try:
        async with watcher_bus.watch("c1") as events:
            dropped = await publisher.after_published("CLIENT", "ID")
            assert await admin.client_kill_filter(_id=dropped) == 1
            with pytest.raises(redis.exceptions.ConnectionError):
                await publisher.after_published("PING")  # written, but no reply will come
            await publisher.publish("c1", "done", {"answer": "42"})
            assert await asyncio.wait_for(anext(events), 10) == ("done", {"answer": "42"})
            assert await publisher.after_published("CLIENT", "ID") != dropped  # a new one
    finally:
        await publisher.aclose()
        await watcher_bus.aclose()
        await admin.aclose()


async def test_a_redis_that_stops_answering_fails_the_commands_waiting_after_the_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads the commands, never answers

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    bus = ConversationEvents(f"redis://127.0.0.1:{port}/0?socket_timeout=0.2")
    try:
        await bus.publish("c1", "done", {"answer": "42"})
        async with asyncio.timeout(10):  # not for ever
            with pytest.raises(redis.exceptions.TimeoutError):
                await bus.after_published("PING")
    finally:
        await bus.aclose()
        server.close()
    assert "Could not publish 1 event(s) of chat c1 to Redis" in caplog.text


async def test_a_sender_cancelled_while_it_waits_leaves_no_reply_to_the_next_command(
    redis_url: str,
) -> None:
    # redis-py drops a connection whose command was cut short by a cancellation; this holds
    # the held connection to that.
    bus = ConversationEvents(redis_url)
    try:
        blocked = asyncio.ensure_future(bus.after_published("BLPOP", "tooluse:test:empty", 1))
        await asyncio.sleep(0.2)  # written; Redis answers in a second
        assert bus._sender is not None
        bus._sender.cancel()
        with pytest.raises(RuntimeError, match="was not sent"):
            await blocked
        async with asyncio.timeout(5):  # PING's own reply, not the BLPOP's nil
            assert await bus.after_published("PING") in (True, b"PONG", "PONG")
    finally:
        await bus.aclose()


async def test_whether_a_conversation_is_watched_is_asked_of_redis(redis_url: str) -> None:
    publisher, watcher_bus = ConversationEvents(redis_url), ConversationEvents(redis_url)
    try:
        assert not await publisher.watched("c1")
        async with watcher_bus.watch("c1"):
            assert await publisher.watched("c1")  # watched on another worker
            assert not await publisher.watched("c2")
        assert not await publisher.watched("c1")
        assert await ConversationEvents().watched("c1")  # without Redis: delivered here
    finally:
        await publisher.aclose()
        await watcher_bus.aclose()


async def test_a_redis_that_cannot_tell_whether_a_conversation_is_watched_publishes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = ConversationEvents("redis://127.0.0.1:9/0")
    assert await bus.watched("c1")
    await bus.aclose()
    assert "Could not ask Redis whether chat c1 is watched" in caplog.text
