"""Rate limits: a token bucket per tool and caller; a call over the limit is an error for the
model and does not run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _calling_tools import FakeTool, prompt_with, tool_calls_response
from _service_helpers import parse_sse, service
from tooluse import ToolCallingManager
from tooluse.calling import (
    InMemoryRateLimitStore,
    PostgresRateLimitStore,
    RateLimit,
    RateLimitStore,
    RedisRateLimitStore,
    SqliteAuditLog,
    SqliteRateLimitStore,
)

SHARED = ["sqlite", "postgres", "redis"]
"""The engines whose buckets several workers share."""

OpenBuckets = Callable[..., RateLimitStore]


@pytest.fixture
def open_buckets(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenBuckets]:
    """``open_buckets(clock=...)``: a store of the engine the test is parametrised with
    (``indirect``); each call opens another on the same buckets (another worker's), but
    ``"memory"``, which is one process's own."""
    engine: str = request.param
    opened: list[Any] = []

    def open_(**options: Any) -> RateLimitStore:
        store: Any
        if engine == "memory":
            store = InMemoryRateLimitStore(**options)
        elif engine == "sqlite":
            store = SqliteRateLimitStore(tmp_path / "r.db", **options)
        elif engine == "postgres":
            store = PostgresRateLimitStore(request.getfixturevalue("postgres_url"), **options)
        else:
            store = RedisRateLimitStore(request.getfixturevalue("redis_url"), **options)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        getattr(store, "close", lambda: None)()


async def errors(manager: ToolCallingManager, tool: FakeTool, user: str, count: int) -> list[str]:
    response = tool_calls_response(*[("pay", f'{{"n": {n}}}') for n in range(count)])
    result = await manager.aexecute_tool_calls(
        prompt_with([tool], context={"user_id": user}), response
    )
    return [r.data for r in result.conversation_history[-1].responses if r.is_error]  # type: ignore[union-attr]


@pytest.mark.parametrize("open_buckets", ["memory", *SHARED], indirect=True)
async def test_each_user_has_a_bucket_that_refills(open_buckets: OpenBuckets) -> None:
    now = [1000.0]
    store = open_buckets(clock=lambda: now[0])
    assert isinstance(store, RateLimitStore)
    pay = FakeTool("pay")
    manager = ToolCallingManager(
        rate_limits={"pay": RateLimit(calls=2, per_seconds=60)}, rate_limit_store=store
    )
    refused = await errors(manager, pay, "ann", 3)
    assert refused == [
        "Tool 'pay' is rate-limited (2 calls per 60 seconds for each user) and was not run; it "
        "can be called again in 30 seconds."
    ]
    assert await errors(manager, pay, "bob", 2) == []  # bob's own bucket
    now[0] += 30  # one token back for ann
    assert len(await errors(manager, pay, "ann", 2)) == 1
    assert len(pay.calls) == 5


@pytest.mark.parametrize("open_buckets", SHARED, indirect=True)
async def test_a_shared_store_limits_every_worker_together(open_buckets: OpenBuckets) -> None:
    """Two managers (two workers) on one store share the buckets."""
    pay = FakeTool("pay")
    limits = {"pay": RateLimit(calls=3, per_seconds=3600, scope="tenant")}
    workers = [
        ToolCallingManager(rate_limits=limits, rate_limit_store=open_buckets()) for _ in "ab"
    ]
    assert await errors(workers[0], pay, "ann", 2) == []
    assert len(await errors(workers[1], pay, "bob", 2)) == 1  # same (unset) tenant
    assert len(pay.calls) == 3


@pytest.mark.parametrize("open_buckets", SHARED, indirect=True)
async def test_takes_racing_on_two_workers_spend_each_token_once(
    open_buckets: OpenBuckets,
) -> None:
    """40 takes at once from two stores (each take on a thread of its own) on a bucket of
    5 tokens: exactly 5 get one, and a lost update would let more through."""
    stores = [open_buckets(), open_buckets()]
    waits = await asyncio.gather(
        *(stores[n % 2].take("pay\x00global\x00", capacity=5, per_seconds=3600) for n in range(40))
    )
    assert waits.count(None) == 5
    refused = [wait for wait in waits if wait is not None]
    assert all(0 < wait <= 720 for wait in refused)  # a token comes back every 720 s


@pytest.mark.parametrize("open_buckets", ["redis"], indirect=True)
async def test_redis_buckets_run_on_the_servers_clock(open_buckets: OpenBuckets) -> None:
    """Without a clock of its own the Redis store reads the server's: the time between
    takes on different hosts is measured on one clock."""
    store = open_buckets()
    assert await store.take("b", capacity=2, per_seconds=10) is None
    assert await store.take("b", capacity=2, per_seconds=10) is None
    wait = await store.take("b", capacity=2, per_seconds=10)
    assert wait is not None and 4 < wait <= 5  # a token every 5 s; some time went by


async def test_a_refused_call_is_audited_and_limits_are_checked(tmp_path: Path) -> None:
    audit = SqliteAuditLog(tmp_path / "a.db")
    manager = ToolCallingManager(
        rate_limits={"pay": RateLimit(calls=1, per_seconds=60, scope="global")}, audit=audit
    )
    await errors(manager, FakeTool("pay"), "ann", 2)
    assert [r.outcome for r in audit.query()] == ["ran", "refused"]
    with pytest.raises(ValueError, match="scope must be one of user, tenant"):
        RateLimit(calls=1, per_seconds=1, scope="ip")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rate_limits maps tool names to RateLimit"):
        ToolCallingManager(rate_limits={"pay": 5})  # type: ignore[dict-item]


async def test_the_service_limits_a_tool_per_conversation(tmp_path: Path) -> None:
    limits = {"get_weather": RateLimit(calls=1, per_seconds=3600, scope="conversation")}
    async with service(tmp_path / "s.db", rate_limits=limits) as client:
        results = []
        for conversation in ("c1", "c1", "c2"):
            events = parse_sse(
                (
                    await client.post(
                        "/api/chat",
                        json={"message": "Weather in Paris?", "conversation_id": conversation},
                    )
                ).text
            )
            results += [data for name, data in events if name == "tool_result"]
    assert [r["is_error"] for r in results] == [False, True, False]
    assert (
        "is rate-limited (1 calls per 3600 seconds for each conversation)" in results[1]["result"]
    )
