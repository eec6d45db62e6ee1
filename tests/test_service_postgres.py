"""The service on PostgreSQL (``--database-url``) and Redis (``--redis-url``): every worker
keeps its memory, knowledge base, paused runs and turn displays in one database and runs a
conversation's turns one at a time through Redis, so a conversation goes on and an approval
is given on any worker."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from _rag_helpers import HashingEmbeddingModel
from _servers import run_sql
from _service_helpers import config, fake_llm, names, parse_sse, running
from tooluse.calling import PostgresAuditLog, RateLimit
from tooluse.embedding import CachedEmbeddingModel
from tooluse.memory import PostgresChatMemoryRepository
from tooluse.messages import Prompt, UserMessage
from tooluse.service import QaService, ServiceConfig, create_app
from tooluse.service._startup import startup_lines
from tooluse.testing import FunctionModel, ResponseLike
from tooluse.tools import tool_callbacks


@contextlib.asynccontextmanager
async def worker(
    url: str, tmp_path: Path, redis_url: str | None = None, **changes: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """One worker of the service: its own app and process state, the shared database (its
    ``db`` file, unused, is its own)."""
    unused = tmp_path / f"unused-{id(object())}.db"
    changes.setdefault("model", fake_llm())
    shared = config(unused, database_url=url, redis_url=redis_url, **changes)
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


async def test_a_turn_continuing_its_workers_last_reads_nothing_and_any_other_reads_it(
    postgres_url: str, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A turn reads its conversation's memory (and the approvals waiting) when it starts,
    # unless the conversation's last turn ran on this worker and ended answered, nobody
    # having held the conversation since (the Redis lock tells): then the memory is as this
    # worker's write left it. After another worker's turn, or a pause, it reads again.
    reads: list[str] = []
    original = PostgresChatMemoryRepository.afind_by_conversation_id_with_exists

    async def counted(self: Any, conversation_id: str, *rest: Any) -> Any:
        reads.append(conversation_id)
        return await original(self, conversation_id, *rest)

    monkeypatch.setattr(
        PostgresChatMemoryRepository, "afind_by_conversation_id_with_exists", counted
    )
    model_of_a = fake_llm()
    async with (
        worker(postgres_url, tmp_path, redis_url, model=model_of_a) as a,
        worker(postgres_url, tmp_path, redis_url) as b,
    ):
        await ready(a)
        await ready(b)
        await ask(a, "Any refund rules?", "c1")
        assert reads == ["c1"]  # its first turn: nothing known
        await ask(a, "And the shipping rules?", "c1")
        assert reads == ["c1"]  # a's own last turn: no read
        await ask(b, "What are points worth?", "c1")
        assert reads == ["c1", "c1"]
        await ask(a, "How do returns work?", "c1")
        assert reads == ["c1", "c1", "c1"]  # b held it since
        # ... and a's turn saw b's: its prompts hold b's question.
        asked = [m.text for m in model_of_a.requests[-1].messages if isinstance(m, UserMessage)]
        assert any("What are points worth?" in text for text in asked)
        paused = (await ask(a, "Cancel order A1001", "c1"))[-1]
        assert paused[0] == "approval_required"
        assert len(reads) == 3  # it continued a's answered turn
        await ask(a, "Never mind, any refund rules?", "c1")  # a pause ends a turn unanswered
        assert len(reads) == 4
        assert (await a.get("/api/approvals", params={"conversation_id": "c1"})).json() == []
        seen = (await b.get("/api/conversations/c1")).json()
    assert [text for role, text in said(seen) if role == "user"] == [
        "Any refund rules?",
        "And the shipping rules?",
        "What are points worth?",
        "How do returns work?",
        "Cancel order A1001",
        "Never mind, any refund rules?",
    ]


async def test_a_turn_reads_and_writes_its_memory_and_display_on_the_event_loop(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A turn that went on in a thread waited, under load, for the GIL of the busy loop after
    # each of its socket's reads: its memory's read at the start and its write (with the
    # display record) at the end run on the loop's own connections.
    # The display record goes in the memory write's statement (its transaction).
    from tooluse._tables import PostgresTables
    from tooluse.memory import PostgresChatMemoryRepository
    from tooluse.service._turn_displays import TurnDisplayStore

    def in_a_thread(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a turn's memory or display went through a thread")

    async def on_its_own(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a turn's display record went in a statement of its own")

    async with worker(postgres_url, tmp_path) as client:
        await ready(client)
        await ask(client, "Any refund rules?", "c1")  # its first write: read under the lock
        for name in ("find_by_conversation_id", "find_by_conversation_id_with_exists", "update"):
            monkeypatch.setattr(PostgresChatMemoryRepository, name, in_a_thread)
        monkeypatch.setattr(TurnDisplayStore, "save", in_a_thread)
        monkeypatch.setattr(PostgresTables, "aexecute_one", on_its_own)
        for question in ("What's the weather in Paris?", "Any refund rules?"):
            assert names(await ask(client, question, "c1"))[-1] == "done"
        monkeypatch.undo()
        conversation = (await client.get("/api/conversations/c1")).json()
    assert said(conversation)[2:] == [
        ("user", "What's the weather in Paris?"),
        ("assistant", "From live data."),
        ("user", "Any refund rules?"),
        ("assistant", "From the knowledge base."),
    ]
    # The display records, stored with the writes: what the page shows of each turn.
    assert [e["event"] for e in conversation["messages"][2]["events"]][:2] == [
        "tool_call",
        "tool_result",
    ]
    assert [e["event"] for e in conversation["messages"][4]["events"]] == ["route", "sources"]


async def test_a_display_record_that_cannot_be_made_costs_the_turn_only_its_trace(
    postgres_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tooluse.service._turn_displays import TurnDisplayStore

    def cannot(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("the record could not be made")

    async def cannot_either(*args: Any, **kwargs: Any) -> Any:
        cannot()

    monkeypatch.setattr(TurnDisplayStore, "insertion", cannot)
    monkeypatch.setattr(TurnDisplayStore, "asave", cannot_either)
    async with worker(postgres_url, tmp_path) as client:
        await ready(client)
        await ask(client, "Any refund rules?", "c1")
        assert names(await ask(client, "What's the weather in Paris?", "c1"))[-1] == "done"
        monkeypatch.undo()
        conversation = (await client.get("/api/conversations/c1")).json()
    assert said(conversation)[-2:] == [
        ("user", "What's the weather in Paris?"),
        ("assistant", "From live data."),
    ]
    assert "Could not store the tool trace of a turn of chat c1" in caplog.text


async def test_a_message_on_another_worker_withdraws_the_run_waiting_for_a_decision(
    postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    # A turn's start reads the conversation's window and its runs waiting in one round
    # trip: a run waiting is found there and withdrawn, and the turn reads the paused turn.
    async with (
        worker(postgres_url, tmp_path, redis_url) as first,
        worker(postgres_url, tmp_path, redis_url) as second,
    ):
        await ready(second)
        paused = (await ask(first, "Cancel order A1001", "c1"))[-1]
        assert paused[0] == "approval_required"
        approval_id = paused[1]["approval_id"]
        assert names(await ask(second, "Any refund rules?", "c1"))[-1] == "done"
        shown = (await second.get(f"/api/approvals/{approval_id}")).json()
        listed = (await first.get("/api/approvals", params={"conversation_id": "c1"})).json()
        conversation = (await first.get("/api/conversations/c1")).json()
    assert shown["status"] == "superseded" and listed == []
    assert [role for role, _ in said(conversation)] == ["user", "assistant"] * 2
    assert said(conversation)[0] == ("user", "Cancel order A1001")


def tool_results(events: list[Any]) -> list[str]:
    return [data["result"] for name, data in events if name == "tool_result"]


async def approve(client: httpx.AsyncClient, paused: tuple[str, Any]) -> list[Any]:
    assert paused[0] == "approval_required", paused
    (held,) = paused[1]["pending_tool_calls"]
    decided = await client.post(
        f"/api/approvals/{paused[1]['approval_id']}",
        json={"decisions": {held["id"]: {"approve": True}}},
    )
    return parse_sse(decided.text)


@pytest.mark.parametrize("buckets", ["postgres", "redis"])
async def test_the_workers_share_the_guards_journal_audit_log_and_rate_limits(
    postgres_url: str, redis_url: str, tmp_path: Path, buckets: str
) -> None:
    """The idempotency journal and the audit log are in the database, the rate-limit
    buckets there or in Redis: a write one worker ran is not run again by another, a limit
    counts the calls on every worker, and the audit log holds them all."""
    limits = {"get_weather": RateLimit(calls=1, per_seconds=3600, scope="conversation")}
    shared_redis = redis_url if buckets == "redis" else None
    async with (
        worker(postgres_url, tmp_path, shared_redis, rate_limits=limits) as first,
        worker(postgres_url, tmp_path, shared_redis, rate_limits=limits) as second,
    ):
        ran = await approve(first, (await ask(first, "Cancel order A1001", "c1"))[-1])
        repeated = await approve(second, (await ask(second, "Cancel order A1001", "c2"))[-1])
        weather = [
            tool_results(await ask(client, "Weather in Paris?", "c3")) for client in (first, second)
        ]
    assert "Not run again" not in tool_results(ran)[0]
    (repeat,) = tool_results(repeated)
    assert repeat.startswith("[Not run again: a call of 'cancel_order' with the same")
    assert "is rate-limited" not in weather[0][0]
    assert "is rate-limited (1 calls per 3600 seconds for each conversation)" in weather[1][0]
    with PostgresAuditLog(postgres_url) as audit:
        outcomes = [(r.tool, r.outcome, r.conversation) for r in audit.query()]
    assert outcomes == [
        ("cancel_order", "held", "c1"),
        ("cancel_order", "ran", "c1"),
        ("cancel_order", "held", "c2"),
        ("cancel_order", "repeat", "c2"),
        ("get_weather", "ran", "c3"),
        ("get_weather", "refused", "c3"),
    ]
    if buckets == "postgres":
        assert run_sql(postgres_url, "SELECT count(*) FROM tool_rate_bucket") == [(1,)]
    else:
        with redis.Redis.from_url(redis_url) as client:
            assert len(client.keys("tooluse:rate:*")) == 1


def test_the_workers_share_the_bundled_models_embedding_cache(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a database and no embedding model of its own, a worker caches the bundled
    model's vectors in the database: what one worker embedded (here its tool catalogue, for
    tool search) the next one does not embed again."""
    monkeypatch.setattr("tooluse.service._service.E5EmbeddingModel", HashingEmbeddingModel)
    settings = ServiceConfig(
        db=tmp_path / "unused.db",
        database_url=postgres_url,
        tool_search=True,
        sample_knowledge=False,
        query_compression=False,
    )
    services = [QaService(settings), QaService(settings)]
    try:
        for service in services:
            service.start()
            assert service.tool_search is not None
            service.tool_search.warm_up(tool_callbacks(*service.tools))
        # The documents each worker's model embedded (its knowledge base also embeds a
        # warm-up query as it loads, cached per process, whenever that load gets to it).
        first, second = (service.embedding_model for service in services)
        assert isinstance(first, CachedEmbeddingModel)
        assert isinstance(second, CachedEmbeddingModel)
        assert isinstance(first.model, HashingEmbeddingModel)
        assert isinstance(second.model, HashingEmbeddingModel)
        assert first.model.embedded and second.model.embedded == []
        (data,) = [line for line in startup_lines(services[0], "http://x") if "  data " in line]
        assert data.split()[1] == postgres_url and data.endswith("embedding cache in the database")
    finally:
        for service in services:
            service.close()
    assert run_sql(postgres_url, "SELECT count(*) FROM embedding_cache")[0][0] > 0
    assert not (tmp_path / "unused.db").exists()  # every store is in the database


async def echoing(prompt: Prompt) -> ResponseLike:
    """A fake LLM: the router calls no tool; the answer, which takes a moment (so that
    turns of one conversation overlap unless they are run one at a time), names the
    message it answers."""
    if prompt.options.tool_callbacks:
        return ""
    await asyncio.sleep(0.05)
    question = next(m.text for m in reversed(prompt.messages) if isinstance(m, UserMessage))
    return "answer to " + re.findall(r"m-\d+-\d+", question)[-1]


async def test_twenty_writers_on_two_workers_lose_and_duplicate_no_message(
    postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    """20 clients at once, each posting 3 messages into one of 4 conversations, every
    message to the other worker than the one before: each conversation's history holds
    every message once, each followed by its own answer (the turns did not interleave),
    and both workers show the same history."""
    clients, messages_each, conversations = 20, 3, 4
    settings: dict[str, Any] = {"model": FunctionModel(echoing), "memory_window": 100}
    async with (
        worker(postgres_url, tmp_path, redis_url, **settings) as first,
        worker(postgres_url, tmp_path, redis_url, **settings) as second,
    ):
        workers = (first, second)

        async def write(client: int) -> None:
            for n in range(messages_each):
                events = await ask(
                    workers[(client + n) % 2], f"m-{client}-{n}", f"c{client % conversations}"
                )
                assert events[-1][0] == "done", events

        await asyncio.gather(*(write(client) for client in range(clients)))
        histories = {
            f"c{c}": [(await w.get(f"/api/conversations/c{c}")).json()["messages"] for w in workers]
            for c in range(conversations)
        }
    for conversation, (on_first, on_second) in histories.items():
        assert on_first == on_second
        asked = [(m["role"], m["text"]) for m in on_first]
        questions = [text for role, text in asked[::2]]
        expected = {
            f"m-{client}-{n}"
            for client in range(clients)
            if f"c{client % conversations}" == conversation
            for n in range(messages_each)
        }
        assert sorted(questions) == sorted(expected)  # each once: none lost, none twice
        assert asked == [
            pair
            for question in questions
            for pair in (("user", question), ("assistant", f"answer to {question}"))
        ]


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
