"""The service on PostgreSQL (``--database-url``) and Redis (``--redis-url``): every worker
keeps its memory, knowledge base, paused runs and turn displays in one database and runs a
conversation's turns one at a time through Redis, so a conversation goes on and an approval
is given on any worker."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _service_helpers import config, fake_llm, names, parse_sse, running
from tooluse.service import ServiceConfig, create_app


@contextlib.asynccontextmanager
async def worker(
    url: str, tmp_path: Path, redis_url: str | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """One worker of the service: its own app and process state, the shared database (its
    ``db`` file, unused, is its own)."""
    unused = tmp_path / f"unused-{id(object())}.db"
    shared = config(unused, database_url=url, redis_url=redis_url, model=fake_llm())
    async with running(create_app(shared)) as client:
        yield client


async def ask(client: httpx.AsyncClient, message: str, conversation_id: str) -> list[Any]:
    response = await client.post(
        "/api/chat", json={"message": message, "conversation_id": conversation_id}
    )
    assert response.status_code == 200
    return parse_sse(response.text)


async def ready(client: httpx.AsyncClient) -> None:
    """Until the knowledge base (ingested into PostgreSQL in the background) is loaded."""
    for _ in range(600):
        health = (await client.get("/healthz")).json()
        if health["knowledge"] != "loading":
            assert health["knowledge"] == "ready", health["knowledge_error"]
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the knowledge base did not load within 30 s")


def said(conversation: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["text"]) for m in conversation["messages"]]


async def test_two_workers_share_one_conversation_and_one_approval(
    postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    async with (
        worker(postgres_url, tmp_path, redis_url) as first,
        worker(postgres_url, tmp_path, redis_url) as second,
    ):
        await ready(first)
        await ready(second)
        await ask(first, "Any refund rules?", "c1")
        paused = (await ask(second, "Cancel order A1001", "c1"))[-1]
        assert paused[0] == "approval_required"
        approval_id = paused[1]["approval_id"]
        # The first worker sees the run the second paused, and its turns.
        listed = (await first.get("/api/approvals", params={"conversation_id": "c1"})).json()
        assert [a["approval_id"] for a in listed] == [approval_id]
        decided = await first.post(
            f"/api/approvals/{approval_id}", json={"decisions": {"cancel-1": {"approve": True}}}
        )
        assert names(parse_sse(decided.text))[-1] == "done"
        again = await second.post(
            f"/api/approvals/{approval_id}", json={"decisions": {"cancel-1": {"approve": True}}}
        )
        assert again.status_code == 409  # resumed once, whichever worker is asked
        seen_by_first = (await first.get("/api/conversations/c1")).json()
        seen_by_second = (await second.get("/api/conversations/c1")).json()
    assert seen_by_first == seen_by_second
    assert said(seen_by_second) == [
        ("user", "Any refund rules?"),
        ("assistant", "From the knowledge base."),
        ("user", "Cancel order A1001"),
        ("assistant", "From live data."),
    ]
    assert seen_by_second["pending_approvals"] == []
    # What the page showed of the first turn (its route and sources) came back too.
    shown = [e["event"] for e in seen_by_second["messages"][0]["events"]]
    assert shown == ["route", "sources"]


def test_the_database_url_must_be_a_postgresql_url() -> None:
    with pytest.raises(ValueError, match="database_url must be a PostgreSQL URL"):
        ServiceConfig(database_url="sqlite:///x.db")


def test_a_database_that_cannot_be_reached_is_reported_without_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooluse.cli import main

    monkeypatch.setenv("TOOLUSE_DATABASE_URL", "postgresql://someone:secret@127.0.0.1:1/none")
    assert main(["chat", "--model", "test", "--no-sample-knowledge", "hi"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tooluse chat: --database-url postgresql://someone:***@127.0.0.1:1/none")
    assert "Connection refused" in err  # why, not only that a pool timed out
    assert "secret" not in err and "Traceback" not in err
