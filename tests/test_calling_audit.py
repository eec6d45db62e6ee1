"""The audit log: a record of every tool call, who asked (from the tool context, never from
the model's arguments), what became of it, its approval and who gave it."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from _calling_tools import FakeTool, prompt_with, tool_calls_response
from _service_helpers import service
from tooluse import Approve, Deny, Prompt, ToolCallingManager
from tooluse.calling import AuditRecord, AuditSink, PostgresAuditLog, SqliteAuditLog
from tooluse.cli import main

CALLER = {
    "user_id": "ann",
    "tenant_id": "acme",
    "roles": ["support", "admin"],
    "conversation_id": "c1",
}

OpenLog = Callable[..., SqliteAuditLog | PostgresAuditLog]


@pytest.fixture
def open_log(open_store: Callable[..., Any]) -> OpenLog:
    """Audit logs on one SQLite file or one PostgreSQL database (``store_location``)."""
    return functools.partial(open_store, SqliteAuditLog, PostgresAuditLog)


def failing(**_: object) -> str:
    raise RuntimeError("the mail server is down")


def a_record(tool: str, result: str = "ok", at: float | None = None, **changes: Any) -> AuditRecord:
    """A call of ``tool`` that ran (now, unless ``at``), for nobody in particular."""
    fields: dict[str, Any] = {
        "at": time.time() if at is None else at, "tool": tool, "call_id": "c",
        "arguments": "{}", "outcome": "ran", "result": result, "is_error": False,
        "latency_ms": 1.0, "approval": "not needed",
        "approved_by": None, "user": None, "tenant": None, "conversation": None,
    }  # fmt: skip
    return AuditRecord(**(fields | changes))


async def test_every_call_of_a_round_and_its_resume_is_recorded(open_log: OpenLog) -> None:
    log = open_log()
    assert isinstance(log, AuditSink)
    manager = ToolCallingManager(audit=log, write_approval="writes")
    tools = [
        FakeTool("look", read_only=True),
        FakeTool("mail", failing, read_only=True),
        FakeTool("pay"),
        FakeTool("wipe"),
    ]
    prompt = prompt_with(tools, context=CALLER)
    paused = await manager.aexecute_tool_calls(
        prompt,
        tool_calls_response(
            # the model names a user: the record keeps the caller from the context
            ("look", '{"user_id": "mallory"}'),
            ("mail", "{}"),
            ("nope", "{}"),
            ("pay", '{"amount": 5}'),
            ("wipe", "{}"),
        ),
    )
    await manager.aresume_tool_calls(
        Prompt(paused.conversation_history, prompt.options),
        {"c3": Approve(by="boss"), "c4": Deny("No.", by="auditor")},
    )
    records = log.query()
    summary = [(r.tool, r.outcome, r.is_error, r.approval, r.approved_by) for r in records]
    assert summary == [
        ("look", "ran", False, "not needed", None),
        ("mail", "failed", True, "not needed", None),
        ("nope", "refused", True, "not needed", None),
        ("pay", "held", False, "pending", None),
        ("wipe", "held", False, "pending", None),
        ("pay", "ran", False, "approved", "boss"),
        ("wipe", "refused", True, "denied", "auditor"),
    ]
    assert {(r.user, r.tenant, r.roles, r.conversation) for r in records} == {
        ("ann", "acme", ("admin", "support"), "c1")
    }
    look, mail, nope = records[:3]
    assert look.arguments == '{"user_id": "mallory"}' and look.result == "look ok"
    assert look.latency_ms is not None and look.latency_ms >= 0
    assert "the mail server is down" in mail.result
    assert nope.latency_ms is None and nope.result.startswith("Unknown tool 'nope'")
    assert [r.tool for r in log.query(tool="pay")] == ["pay", "pay"]
    assert log.query(user="mallory") == []
    assert [r.tool for r in log.query(conversation="c1", limit=2)] == ["pay", "wipe"]


async def test_a_log_from_before_the_roles_opens_with_its_records_and_keeps_roles_on(
    open_log: OpenLog,
) -> None:
    log = open_log()
    manager = ToolCallingManager(audit=log)
    look = FakeTool("look", read_only=True)
    await manager.aexecute_tool_calls(
        prompt_with([look], context=CALLER), tool_calls_response(("look", "{}"))
    )
    with log._tables.write() as connection:  # the table as version 1 made it
        connection.execute("ALTER TABLE tool_audit DROP COLUMN roles")
        connection.execute("DROP INDEX tool_audit_tenant")
        connection.execute(
            "UPDATE tooluse_schema_version SET version = 1 WHERE component = 'tool_audit'"
        )
    reopened = open_log()
    assert [r.roles for r in reopened.query()] == [()]  # not recorded then
    manager = ToolCallingManager(audit=reopened)
    await manager.aexecute_tool_calls(
        prompt_with([look], context=CALLER), tool_calls_response(("look", "{}"))
    )
    assert [r.roles for r in reopened.query()] == [(), ("admin", "support")]


async def test_recent_calls_are_a_tenant_s_calls_that_gave_a_result(open_log: OpenLog) -> None:
    log = open_log()
    now = time.time() - 100  # the records within the retention
    await log.record(
        [
            a_record("old", at=now + 10, tenant="acme"),
            a_record("look", at=now + 20, tenant="acme", conversation="c1", result="x" * 50),
            a_record("toolSearchTool", at=now + 21, tenant="acme"),
            a_record("broke", at=now + 22, tenant="acme", outcome="failed", is_error=True),
            a_record("denied", at=now + 23, tenant="acme", outcome="refused", is_error=True),
            a_record("held", at=now + 24, tenant="acme", outcome="held"),
            a_record("again", at=now + 25, tenant="acme", outcome="repeat"),
            a_record("theirs", at=now + 26, tenant="globex"),
            a_record("nobody", at=now + 27),
            a_record("mail", at=now + 30, tenant="acme", user="ann"),
        ]
    )

    def tools(tenant: str | None, limit: int = 10) -> list[str]:
        calls = log.recent_calls(
            tenant=tenant, since=now + 15, limit=limit, ignore={"toolSearchTool"}
        )
        return [tool for _, tool, _ in calls]

    assert tools("acme") == ["look", "again", "mail"]  # oldest first
    assert tools("acme", limit=2) == ["again", "mail"]  # the newest
    assert tools(None) == ["nobody"]  # of no tenant, not of any
    assert tools("globex") == ["theirs"]
    assert log.recent_calls(tenant="acme", since=now + 20, limit=2) == [
        (now + 25, "again", None),
        (now + 30, "mail", None),
    ]
    assert log.recent_calls(tenant="acme", since=now + 20, limit=9)[0] == (now + 20, "look", "c1")
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        log.recent_calls(tenant=None, since=0.0, limit=0)


async def test_the_log_is_bounded(open_log: OpenLog, tmp_path: Path) -> None:
    now = [1000.0]
    log = open_log(retention=100, max_records=3, max_text=10, clock=lambda: now[0])

    def record(tool: str, result: str = "ok") -> AuditRecord:
        return a_record(tool, result, at=now[0])

    await log.record([record("old", "x" * 25)])
    assert log.query()[0].result == "xxxxxxxxxx... [25 characters in all]"
    now[0] += 101  # past the retention; the tidy runs at most once a minute
    await log.record([record(f"t{n}") for n in range(5)])
    assert [r.tool for r in log.query()] == ["t2", "t3", "t4"]
    with pytest.raises(ValueError, match="max_records must be a positive integer"):
        SqliteAuditLog(tmp_path / "b.db", max_records=0)


async def test_a_round_of_more_records_than_one_statement_takes_is_recorded_whole(
    open_log: OpenLog,
) -> None:
    # 120 records: three statements of at most 50 (SQLite before 3.32 takes 999 values).
    now = time.time()
    records = [
        AuditRecord(
            at=now + n, tool=f"t{n}", call_id=f"c{n}", arguments="{}", outcome="ran",
            result=str(n), is_error=n % 2 == 1, latency_ms=float(n), approval="not needed",
            approved_by=None, user="ann", tenant=None, conversation="c1", roles=("support",),
        )
        for n in range(120)
    ]  # fmt: skip
    log = open_log()
    await log.record(records)
    assert log.query() == records


def counting_writes(
    log: SqliteAuditLog | PostgresAuditLog, monkeypatch: pytest.MonkeyPatch
) -> list[int]:
    """The number of records of each write (an insert statement) the log makes from now
    on, from a thread or from the event loop."""
    writes: list[int] = []
    insertion = log._insertion

    def counted(records: Sequence[AuditRecord]) -> tuple[str, list[Any]]:
        writes.append(len(records))
        return insertion(records)

    monkeypatch.setattr(log, "_insertion", counted)
    return writes


async def test_rounds_from_concurrent_calls_are_written_together_and_all_stored(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first round's write runs while the nine others come: they go in one write when it
    # ends, and each call returns once its own records are stored.
    log = open_log()
    writes = counting_writes(log, monkeypatch)
    rounds = [[a_record(f"t{n}.{k}") for k in range(n % 3 + 1)] for n in range(10)]

    async def record(records: list[AuditRecord]) -> set[str]:
        await log.record(records)
        return {record.tool for record in log.query()}

    stored = await asyncio.gather(*(record(records) for records in rounds))
    for records, after in zip(rounds, stored, strict=True):
        assert {record.tool for record in records} <= after
    assert sorted(log.query(), key=lambda r: r.tool) == sorted(
        (record for records in rounds for record in records), key=lambda r: r.tool
    )
    assert writes == [1, sum(len(records) for records in rounds[1:])]
    await log.record([a_record("alone")])  # nothing running: written at once, alone
    assert writes[-1] == 1 and log.query()[-1].tool == "alone"


async def test_a_round_that_cannot_be_stored_costs_the_others_nothing_and_gets_its_error(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log()
    writes = counting_writes(log, monkeypatch)
    bad = a_record("bad", outcome=None)  # NOT NULL: neither engine stores it
    rounds = [
        [a_record("first")],
        [a_record("second")],
        [a_record("third"), bad],
        [a_record("fourth")],
    ]
    with caplog.at_level(logging.WARNING, logger="tooluse.calling"):
        outcomes = await asyncio.gather(
            *(log.record(records) for records in rounds), return_exceptions=True
        )
    assert outcomes[:2] == [None, None] and outcomes[3] is None
    assert isinstance(outcomes[2], Exception) and "null" in str(outcomes[2]).lower()
    assert [record.tool for record in log.query()] == ["first", "second", "fourth"]
    assert writes == [1, 4, 1, 2, 1]  # the group of three, then each of its rounds alone
    assert "A grouped write of 3 rounds of audit records failed" in caplog.text
    with pytest.raises(Exception, match=r"(?i)null"):  # alone, its error is raised as it is
        await log.record([bad])


async def test_a_caller_cancelled_while_its_records_are_written_does_not_lose_them(
    open_log: OpenLog,
) -> None:
    # A tool call's client gone (its turn cancelled) while the audit write runs: the write
    # is its own task, so what ran is still on record.
    log = open_log()
    first = asyncio.create_task(log.record([a_record("first")]))
    waiting = asyncio.create_task(log.record([a_record("second")]))  # grouped after first
    await asyncio.sleep(0)
    first.cancel()
    waiting.cancel()
    for call in (first, waiting):
        with pytest.raises(asyncio.CancelledError):
            await call
    for _ in range(200):
        if len(log.query()) == 2:
            break
        await asyncio.sleep(0.01)
    assert sorted(record.tool for record in log.query()) == ["first", "second"]


async def test_the_usual_write_goes_on_the_event_loop_on_postgresql(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A round of a few records, no tidying due: one statement on the loop's own connections
    # (a thread's round trip waited for the GIL of a busy loop).
    log = PostgresAuditLog(postgres_url)
    try:
        await log.record([a_record("tidies")])  # the first write tidies too: in a thread
        threads: list[int] = []
        insert = log._insert

        def in_a_thread(records: Any) -> None:
            threads.append(threading.get_ident())
            insert(records)

        monkeypatch.setattr(log, "_insert", in_a_thread)
        await asyncio.gather(*(log.record([a_record(f"t{n}")]) for n in range(5)))
        assert threads == []
        assert len(log.query()) == 6
    finally:
        log.close()


async def test_text_neither_engine_stores_is_kept_as_escapes(open_log: OpenLog) -> None:
    """A model's arguments may hold a NUL (PostgreSQL's text has none) or a lone surrogate
    (not UTF-8): recorded as escapes, the call is still audited."""
    await open_log().record(
        [
            AuditRecord(
                at=time.time(), tool="t", call_id="c\x00", arguments='{"a": "\x00\ud800"}',
                outcome="ran", result="ok", is_error=False, latency_ms=None,
                approval="not needed", approved_by=None, user="ann", tenant=None,
                conversation=None,
            )
        ]
    )  # fmt: skip
    (stored,) = open_log().query(user="ann")
    assert (stored.call_id, stored.arguments) == ("c\\x00", '{"a": "\\x00\\ud800"}')


async def test_the_tool_span_names_the_caller_and_the_approval(
    exporter: InMemorySpanExporter,
) -> None:
    manager = ToolCallingManager()
    pay = FakeTool("pay", requires_approval=True)
    prompt = prompt_with([pay], context=CALLER)
    paused = await manager.aexecute_tool_calls(prompt, tool_calls_response(("pay", "{}")))
    await manager.aresume_tool_calls(
        Prompt(paused.conversation_history, prompt.options), {"c0": Approve(by="boss")}
    )
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool pay"]
    attributes = dict(span.attributes or {})
    assert attributes["enduser.id"] == "ann"
    assert attributes["tooluse.tenant.id"] == "acme"
    assert attributes["gen_ai.conversation.id"] == "c1"
    assert (attributes["tooluse.tool.approval"], attributes["tooluse.tool.approved_by"]) == (
        "approved",
        "boss",
    )


async def test_the_service_audits_its_tool_calls_and_tooluse_audit_prints_them(
    tmp_path: Path, store_location: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    if store_location.startswith("postgresql://"):
        shared, where = {"database_url": store_location}, ["--database-url", store_location]
    else:
        shared, where = {}, ["--db", str(db)]
    async with service(db, **shared) as client:  # the offline model calls get_weather
        await client.post(
            "/api/chat", json={"message": "What's the weather in Paris?", "conversation_id": "c9"}
        )
    assert main(["audit", *where, "--conversation", "c9"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["tool"], r["outcome"], r["conversation"]) for r in lines] == [
        ("get_weather", "ran", "c9")
    ]
    assert "city" in json.loads(lines[0]["arguments"])  # as the offline model filled them in
    assert lines[0]["at"].endswith("+00:00")
    assert main(["audit", *where, "--tool", "cancel_order"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["audit", "--db", str(tmp_path / "none.db")]) == 2
    assert "does not exist" in capsys.readouterr().err
