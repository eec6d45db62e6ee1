"""The turns of a conversation run one at a time across workers that share a Redis server
(``--redis-url``), as they do within one worker."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest.mock import patch

import httpx
import pytest
import redis.asyncio
import redis.exceptions

from _service_helpers import config, fake_llm, names, parse_sse, respond, running, written
from tooluse.calling import RedisRateLimitStore
from tooluse.messages import Prompt
from tooluse.service import ServiceConfig, create_app
from tooluse.service._conversation_events import ConversationEvents
from tooluse.service._turns import _RELEASE, ConversationTurns, RedisTurnLocks
from tooluse.testing import FunctionModel, ResponseLike


async def test_a_conversation_s_turn_on_one_worker_waits_for_its_turn_on_another(
    redis_url: str,
) -> None:
    first = ConversationTurns(RedisTurnLocks(redis_url))
    second = ConversationTurns(RedisTurnLocks(redis_url))
    order: list[str] = []
    started, release = asyncio.Event(), asyncio.Event()

    async def long_turn() -> None:
        async with first.turn("c1"):
            order.append("first begins")
            started.set()
            await release.wait()
            order.append("first ends")

    async def next_turn() -> None:
        async with second.turn("c1"):
            order.append("second begins")

    running = asyncio.create_task(long_turn())
    await started.wait()
    waiting = asyncio.create_task(next_turn())
    async with second.turn("c2"):  # another conversation is not held up
        order.append("other conversation")
    await asyncio.sleep(0.3)
    assert order == ["first begins", "other conversation"]
    release.set()
    await asyncio.wait_for(asyncio.gather(running, waiting), 10)
    assert order[2:] == ["first ends", "second begins"]
    await first.aclose()
    await second.aclose()


async def test_more_turns_at_once_than_connections_to_redis_all_run(redis_url: str) -> None:
    # 300 conversations' turns on one worker at once (200 streams over two workers was
    # enough): each waits for a connection of the worker's pool rather than failing.
    turns = ConversationTurns(RedisTurnLocks(redis_url))
    ran: list[int] = []

    async def turn(number: int) -> None:
        async with turns.turn(f"many-{number}"):
            await asyncio.sleep(0.01)
            ran.append(number)

    try:
        await asyncio.wait_for(asyncio.gather(*(turn(n) for n in range(300))), 30)
    finally:
        await turns.aclose()
    assert sorted(ran) == list(range(300))


async def test_a_turn_longer_than_the_lease_keeps_its_conversation(redis_url: str) -> None:
    first = ConversationTurns(RedisTurnLocks(redis_url, lease=0.3))
    second = ConversationTurns(RedisTurnLocks(redis_url, lease=0.3))
    order: list[str] = []

    async def long_turn() -> None:
        async with first.turn("c1"):
            await asyncio.sleep(1.2)  # four leases: renewed while it runs
            order.append("first ends")

    async def next_turn() -> None:
        await asyncio.sleep(0.1)
        async with second.turn("c1"):
            order.append("second begins")

    await asyncio.wait_for(asyncio.gather(long_turn(), next_turn()), 10)
    assert order == ["first ends", "second begins"]
    await first.aclose()
    await second.aclose()


async def test_the_conversation_of_a_worker_that_died_is_free_after_the_lease(
    redis_url: str,
) -> None:
    client = redis.asyncio.Redis.from_url(redis_url)
    # A worker that took the lock and died: nobody renews or releases it.
    assert await client.set("tooluse:turn:c1", "dead worker", px=500, nx=True)
    turns = ConversationTurns(RedisTurnLocks(redis_url, lease=0.5))
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with asyncio.timeout(10), turns.turn("c1"):
        waited = loop.time() - began
    assert waited > 0.2  # it waited for the lease to run out, not for ever
    await turns.aclose()
    await client.aclose()


async def test_the_locks_of_a_worker_known_dead_are_freed_at_once(redis_url: str) -> None:
    dead = RedisTurnLocks(redis_url, owner="host-1-a")
    alike = RedisTurnLocks(redis_url, owner="host-1-ab")  # a name that begins the same
    live = RedisTurnLocks(redis_url, owner="host-2-b")
    held = contextlib.AsyncExitStack()
    for locks, conversation in ((dead, "c1"), (dead, "c2"), (alike, "c3"), (live, "c4")):
        await held.enter_async_context(locks.hold(conversation))
    assert sorted(await live.release_held_by("host-1-a")) == ["c1", "c2"]
    turns = ConversationTurns(live)
    async with asyncio.timeout(5), turns.turn("c1"):  # not the 30 s lease
        pass
    client = redis.asyncio.Redis.from_url(redis_url)
    assert sorted(await client.keys("tooluse:turn:*")) == [b"tooluse:turn:c3", b"tooluse:turn:c4"]
    await held.aclose()  # the "dead" worker's releases find their locks gone: logged only
    assert await client.keys("tooluse:turn:*") == []
    await client.aclose()
    for locks in (dead, alike, live):
        await locks.aclose()


async def test_a_lease_continues_only_its_workers_last_answered_turn(redis_url: str) -> None:
    a = ConversationTurns(RedisTurnLocks(redis_url, owner="worker-a"))
    b = ConversationTurns(RedisTurnLocks(redis_url, owner="worker-b"))

    async def turn(turns: ConversationTurns, *, answered: bool) -> bool:
        async with turns.turn("c1") as lease:
            lease.answered = answered
            return lease.continues_here

    assert not await turn(a, answered=True)  # nothing known of the conversation yet
    assert await turn(a, answered=False)  # a's last turn ended answered
    assert not await turn(a, answered=True)  # ... but not that one (a pause, a failure)
    assert await turn(a, answered=True)
    assert not await turn(b, answered=True)  # a held it last
    assert not await turn(a, answered=True)  # b held it since
    async with a.turn(None) as without_conversation:
        assert not without_conversation.continues_here
    async with ConversationTurns().turn("c1") as without_redis:  # cannot tell
        assert not without_redis.continues_here
    client = redis.asyncio.Redis.from_url(redis_url)
    assert await client.get("tooluse:turn-last:c1") == b"worker-a"
    assert 0 < await client.pttl("tooluse:turn-last:c1") <= 24 * 3600 * 1000
    assert await client.keys("tooluse:turn:*") == []  # the locks' scan does not see it
    await client.aclose()
    await a.aclose()
    await b.aclose()


async def test_taking_a_lock_counts_the_watchers_of_the_channel_it_is_told(
    redis_url: str,
) -> None:
    counting = RedisTurnLocks(redis_url, channel_of=lambda conversation: f"chan:{conversation}")
    plain = RedisTurnLocks(redis_url)
    client = redis.asyncio.Redis.from_url(redis_url)
    watcher = client.pubsub()
    try:
        async with counting.hold("c1") as lease:
            assert lease.watchers == 0
        await watcher.subscribe("chan:c1")
        async with counting.hold("c1") as lease:
            assert lease.watchers == 1
        async with plain.hold("c1") as lease:
            assert lease.watchers is None  # not asked
    finally:
        await watcher.aclose()
        await client.aclose()
        await counting.aclose()
        await plain.aclose()


def test_a_lock_owner_is_a_name_without_the_separator(redis_url: str) -> None:
    with pytest.raises(ValueError, match="owner must be a name without '/'"):
        RedisTurnLocks(redis_url, owner="a/b")


@pytest.mark.parametrize(
    "make",
    [
        lambda: RedisRateLimitStore("redis://127.0.0.1:1/0"),
        lambda: RedisTurnLocks("redis://127.0.0.1:1/0"),
        lambda: ConversationEvents("redis://127.0.0.1:1/0"),
    ],
    ids=["rate-limits", "turns", "events"],
)
def test_without_the_redis_extra_each_redis_part_says_what_to_install(
    make: Callable[[], object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # import redis fails
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    with pytest.raises(
        ImportError, match=r"needs the redis client: pip install 'tooluse\[redis\]'"
    ):
        make()


def test_the_redis_url_must_be_a_redis_url() -> None:
    with pytest.raises(ValueError, match="redis_url must be a Redis URL"):
        ServiceConfig(redis_url="127.0.0.1:6379")


def test_an_unreachable_redis_is_reported_when_the_service_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tooluse.cli import main

    monkeypatch.setenv("TOOLUSE_REDIS_URL", "redis://:secret@127.0.0.1:1/0")
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--model", "test", "--no-sample-knowledge"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tooluse serve: --redis-url redis://:***@127.0.0.1:1/0: "), err
    assert "secret" not in err and "Traceback" not in err


async def test_a_turns_done_and_its_release_go_to_redis_in_one_round_trip(
    redis_url: str, tmp_path: Path
) -> None:
    app = create_app(config(tmp_path / "s.db", redis_url=redis_url, model=fake_llm()))
    async with running(app) as client:
        with written(app.state.service.events) as writes:
            response = await client.post(
                "/api/chat", json={"message": "Weather in Paris?", "conversation_id": "c1"}
            )
        assert names(parse_sse(response.text))[-1] == "done"
        done, release = writes[-1][-2:]
        assert (done[0], release[0]) == ("PUBLISH", "EVAL")
        assert '"event": "done"' in done[2] and release[3] == "tooluse:turn:c1"
        # The lock was taken on the same connection (a script: the lock, who ended the
        # conversation's last turn, and its watchers); nobody watched, so no tool call,
        # result or route was published, only the turn's end.
        sent = [command[0] for write in writes for command in write]
        assert sent == ["EVAL", "PUBLISH", "EVAL"], writes
        assert await redis.asyncio.Redis.from_url(redis_url).keys("tooluse:turn:*") == []


async def test_a_release_that_fails_ends_the_turn_with_an_error_after_done(
    redis_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(config(tmp_path / "s.db", redis_url=redis_url, model=fake_llm()))

    locks = app.state.service.turns._shared
    sends = locks._sends

    async def unreachable_at_the_release(*command: Any) -> Any:
        if command[0] == "EVAL" and command[1] == _RELEASE:
            raise redis.exceptions.ConnectionError("Redis went away")
        return await sends(*command)

    async with running(app) as client:
        with patch.object(locks, "_sends", unreachable_at_the_release):
            response = await client.post(
                "/api/chat", json={"message": "Weather in Paris?", "conversation_id": "c1"}
            )
    events = parse_sse(response.text)
    assert names(events)[-2:] == ["done", "error"]
    assert events[-1][1] == {"message": "Redis went away", "type": "ConnectionError"}
    assert "Redis went away" in caplog.text


async def test_a_watched_turn_publishes_its_progress_and_one_watched_since_its_end(
    redis_url: str, tmp_path: Path
) -> None:
    subscribed = asyncio.Event()  # the answer stage waits for the second watcher

    async def answer_when_watched(prompt: Prompt) -> ResponseLike:
        if not prompt.options.tool_callbacks and "late" in str(prompt.messages[-1].text):
            await subscribed.wait()
        return respond(prompt)

    app = create_app(
        config(tmp_path / "s.db", redis_url=redis_url, model=FunctionModel(answer_when_watched))
    )
    other_worker = ConversationEvents(redis_url)
    try:
        async with running(app) as client:
            async with other_worker.watch("c1") as events:  # watching before the turn
                response = await client.post(
                    "/api/chat", json={"message": "Weather in Paris?", "conversation_id": "c1"}
                )
                streamed = [n for n in names(parse_sse(response.text)) if n != "delta"]
                assert streamed == ["tool_call", "tool_result", "route", "done"]
                seen = [(await asyncio.wait_for(anext(events), 10))[0] for _ in streamed]
                assert seen == streamed

            async def late_turn() -> httpx.Response:
                return await client.post(
                    "/api/chat",
                    json={"message": "Weather in Paris, late?", "conversation_id": "c1"},
                )

            turn = asyncio.create_task(late_turn())
            while not app.state.service.turns:  # the turn started, unwatched
                await asyncio.sleep(0.01)
            async with other_worker.watch("c1") as events:
                subscribed.set()
                kind, data = await asyncio.wait_for(anext(events), 10)
                assert (kind, data["answer"]) == ("done", "From live data.")  # its end only
            assert names(parse_sse((await turn).text))[-1] == "done"
    finally:
        await other_worker.aclose()
