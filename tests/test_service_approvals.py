"""``tooluse serve``: a run paused for approval when the conversation goes on, and when no
decision comes (superseded, expired), over the HTTP API and in the approval store."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from _servers import run_sql
from _service_helpers import config, names, parse_sse, respond, running, service
from tooluse.calling import PendingToolCall
from tooluse.client import RunState
from tooluse.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
from tooluse.messages import (
    AssistantMessage,
    Message,
    Prompt,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.qa import PAUSED_TURN_NOTE, QaPause
from tooluse.service import QaService, ServiceConfig, create_app
from tooluse.service._approvals import ApprovalConflict, ApprovalGone, ApprovalStore
from tooluse.service._samples import get_weather
from tooluse.testing import FunctionModel, ResponseLike, tool_call
from tooluse.tools import tool


class RecordingLlm:
    """The helpers' fake LLM, except that a cancel question first looks the order up in the
    same round as the cancellation (a call that runs next to the held one)."""

    def __init__(self) -> None:
        self.prompts: list[Prompt] = []

    def __call__(self, prompt: Prompt) -> ResponseLike:
        self.prompts.append(prompt)
        last = prompt.messages[-1]
        if (
            prompt.options.tool_callbacks
            and isinstance(last, UserMessage)
            and "cancel" in last.text.lower()
        ):
            return [
                tool_call("get_order_status", {"order_id": "A1001"}, id="status-1"),
                tool_call("cancel_order", {"order_id": "A1001"}, id="cancel-1"),
            ]
        return respond(prompt)

    def stage_prompts(self, since: int) -> tuple[list[Message], list[Message]]:
        """The first router prompt and the answer prompt after ``since`` prompts, without
        their system message."""
        later = self.prompts[since:]
        router = next(p for p in later if p.options.tool_callbacks)
        answer = next(p for p in later if not p.options.tool_callbacks)
        return (
            [m for m in router.messages if not isinstance(m, SystemMessage)],
            [m for m in answer.messages if not isinstance(m, SystemMessage)],
        )


def remembered(db: Path, conversation_id: str) -> list[Message]:
    with SqliteChatMemoryRepository(db) as repository:
        return MessageWindowChatMemory(repository=repository).get(conversation_id)


async def pause_a_cancellation(client: Any, conversation_id: str) -> dict[str, Any]:
    response = await client.post(
        "/api/chat", json={"message": "Cancel order A1001", "conversation_id": conversation_id}
    )
    events = parse_sse(response.text)
    assert names(events) == ["tool_call", "tool_call", "tool_result", "approval_required"]
    paused: dict[str, Any] = events[-1][1]
    return paused


async def test_a_new_message_remembers_the_paused_turn_and_withdraws_its_approval(
    tmp_path: Path,
) -> None:
    db, llm = tmp_path / "s.db", RecordingLlm()
    async with service(db, model=FunctionModel(llm)) as client:
        paused = await pause_a_cancellation(client, "c1")
        approval_id = paused["approval_id"]
        before = len(llm.prompts)
        second = await client.post(
            "/api/chat", json={"message": "Any refund rules?", "conversation_id": "c1"}
        )
        assert names(parse_sse(second.text))[-1] == "done"
        shown = (await client.get(f"/api/approvals/{approval_id}")).json()
        listed = (await client.get("/api/approvals", params={"conversation_id": "c1"})).json()
        decided = await client.post(
            f"/api/approvals/{approval_id}", json={"decisions": {"cancel-1": {"approve": True}}}
        )
        wrong = await client.post(f"/api/approvals/{approval_id}", json={"decisions": {}})
        calls_after_the_turn = len(llm.prompts)

    # The second turn's router and answer model both read the paused turn, as text.
    router, answer = llm.stage_prompts(before)
    for history in (router[:-1], answer[:-1]):
        assert [type(m) for m in history] == [UserMessage, AssistantMessage]
        assert history[0].text == "Cancel order A1001"
        account = history[1].text
        assert account.startswith(PAUSED_TURN_NOTE)
        assert '"status"' in account and '"carrier"' in account  # get_order_status's result
        assert 'Not run: cancel_order {"order_id": "A1001"}' in account
        assert not any(isinstance(m, ToolResponseMessage) for m in history)
        assert not any(isinstance(m, AssistantMessage) and m.tool_calls for m in history)
    assert [m.text for m in remembered(db, "c1")] == [
        "Cancel order A1001",
        account,
        "Any refund rules?",
        "From the knowledge base.",
    ]
    # The approval was withdrawn by the new message: a late decision is refused, clearly.
    assert (shown["status"], listed) == ("superseded", [])
    assert "a later message in the conversation withdrew the approval" in shown["error"]
    assert decided.status_code == 410 and wrong.status_code == 410
    assert decided.json()["detail"] == (
        f"The run {approval_id!r} can no longer be decided: superseded: a later message in the "
        "conversation withdrew the approval; ask again"
    )
    assert calls_after_the_turn == before + 2  # nothing ran for the late decision


async def test_an_approved_run_replaces_its_paused_turn_in_memory(tmp_path: Path) -> None:
    db, llm = tmp_path / "s.db", RecordingLlm()
    async with service(db, model=FunctionModel(llm)) as client:
        paused = await pause_a_cancellation(client, "c1")
        assert [m.role for m in remembered(db, "c1")] == ["user", "assistant"]
        resumed = await client.post(
            f"/api/approvals/{paused['approval_id']}",
            json={"decisions": {"cancel-1": {"approve": True}}},
        )
        # The conversation goes on: nothing waits any more, nothing is superseded.
        await client.post("/api/chat", json={"message": "Thanks", "conversation_id": "c1"})
        shown = (await client.get(f"/api/approvals/{paused['approval_id']}")).json()
    assert names(parse_sse(resumed.text))[-1] == "done"
    assert shown["status"] == "done"
    assert [m.text for m in remembered(db, "c1")] == [
        "Cancel order A1001",
        "From live data.",
        "Thanks",
        "From the knowledge base.",
    ]


class Held:
    """A tool call that runs until the test releases it."""

    def __init__(self) -> None:
        self.started, self.release = asyncio.Event(), asyncio.Event()

    async def __call__(self) -> None:
        self.started.set()
        await self.release.wait()


def tools_holding(held: Held, name: str) -> list[object]:
    """The order tools and get_weather; the call of the tool ``name`` is ``held``."""

    @tool(requires_approval=True)
    async def cancel_order(order_id: str) -> dict[str, object]:
        """Cancel an order."""
        if name == "cancel_order":
            await held()
        return {"order_id": order_id, "cancelled": True}

    @tool(read_only=True)
    async def get_order_status(order_id: str) -> dict[str, object]:
        """Live status of an order."""
        if name == "get_order_status":
            await held()
        return {"order_id": order_id, "status": "shipped"}

    return [get_order_status, get_weather, cancel_order]


async def test_a_new_message_waits_for_the_approved_run_of_its_conversation(
    tmp_path: Path,
) -> None:
    """A message sent while an approved call is running must not read the paused turn's
    "Not run" account: it waits for the resumed turn to be stored. Other conversations are
    not held up by the slow call."""
    db, llm, held = tmp_path / "s.db", RecordingLlm(), Held()
    app = create_app(
        config(db, model=FunctionModel(llm), tools=tools_holding(held, "cancel_order"))
    )
    async with running(app) as client:
        paused = await pause_a_cancellation(client, "c1")
        resuming = asyncio.create_task(
            client.post(
                f"/api/approvals/{paused['approval_id']}",
                json={"decisions": {"cancel-1": {"approve": True}}},
            )
        )
        await asyncio.wait_for(held.started.wait(), 5)
        elsewhere = await asyncio.wait_for(
            client.post(
                "/api/chat", json={"message": "Weather in Paris?", "conversation_id": "c2"}
            ),
            5,
        )
        before = len(llm.prompts)
        asking = asyncio.create_task(
            client.post("/api/chat", json={"message": "Is it done?", "conversation_id": "c1"})
        )
        await asyncio.sleep(0.3)  # time enough for the new turn to run, were it not held
        held_while_the_call_ran = not asking.done() and len(llm.prompts) == before
        held.release.set()
        resumed, asked = await resuming, await asking
        shown = (await client.get(f"/api/approvals/{paused['approval_id']}")).json()
        turns_left = len(app.state.service.turns)

    assert names(parse_sse(elsewhere.text))[-1] == "done"
    assert held_while_the_call_ran
    assert names(parse_sse(resumed.text))[-1] == "done" and shown["status"] == "done"
    assert names(parse_sse(asked.text))[-1] == "done"
    # The new turn's router read the resumed turn's answer, not "Not run: cancel_order".
    (router,) = [
        prompt.messages[1:]
        for prompt in llm.prompts[before:]
        if prompt.options.tool_callbacks and prompt.messages[-1] == UserMessage(text="Is it done?")
    ]
    assert [m.text for m in router] == ["Cancel order A1001", "From live data.", "Is it done?"]
    assert [m.text for m in remembered(db, "c1")] == [
        "Cancel order A1001",
        "From live data.",
        "Is it done?",
        "From the knowledge base.",
    ]
    assert turns_left == 0  # no lock kept for a conversation without a turn running


async def test_a_message_sent_while_a_turn_runs_withdraws_the_approval_that_turn_asks(
    tmp_path: Path,
) -> None:
    """The new message waits for the running turn, which pauses; then it goes on from the
    paused turn's account, and withdraws its approval, as it would have had it come later."""
    db, held = tmp_path / "s.db", Held()
    tools = tools_holding(held, "get_order_status")
    async with service(db, model=FunctionModel(RecordingLlm()), tools=tools) as client:
        pausing = asyncio.create_task(
            client.post(
                "/api/chat", json={"message": "Cancel order A1001", "conversation_id": "c1"}
            )
        )
        await asyncio.wait_for(held.started.wait(), 5)
        going_on = asyncio.create_task(
            client.post("/api/chat", json={"message": "Is it done?", "conversation_id": "c1"})
        )
        await asyncio.sleep(0.3)  # time enough for the new turn to run, were it not held
        held.release.set()
        paused, went_on = parse_sse((await pausing).text), parse_sse((await going_on).text)
        approval_id = paused[-1][1]["approval_id"]
        shown = (await client.get(f"/api/approvals/{approval_id}")).json()

    assert names(paused)[-1] == "approval_required" and names(went_on)[-1] == "done"
    assert shown["status"] == "superseded"
    question, account, *later = remembered(db, "c1")
    assert question.text == "Cancel order A1001" and account.text.startswith(PAUSED_TURN_NOTE)
    assert [m.text for m in later] == ["Is it done?", "From the knowledge base."]


async def test_decisions_on_runs_without_a_conversation_do_not_wait_for_each_other(
    tmp_path: Path,
) -> None:
    # Runs paused from /v1/chat/completions (the history sent with the question) have no
    # conversation, hence no turns to order.
    held = Held()
    tools = tools_holding(held, "cancel_order")
    async with service(
        tmp_path / "s.db", model=FunctionModel(RecordingLlm()), tools=tools
    ) as client:
        approval_ids = []
        for _ in range(2):
            completion = await client.post(
                "/v1/chat/completions",
                json={
                    "model": "tooluse-qa",
                    "messages": [{"role": "user", "content": "Cancel A1"}],
                },
            )
            answer = completion.json()["choices"][0]["message"]["content"]
            approval_ids.append(re.search(r"/api/approvals/(\w+)", answer)[1])
        approving = asyncio.create_task(
            client.post(
                f"/api/approvals/{approval_ids[0]}",
                json={"decisions": {"cancel-1": {"approve": True}}},
            )
        )
        await asyncio.wait_for(held.started.wait(), 5)
        denied = await asyncio.wait_for(
            client.post(
                f"/api/approvals/{approval_ids[1]}",
                json={"decisions": {"cancel-1": {"approve": False}}},
            ),
            5,
        )
        held.release.set()
        approved = await approving
    assert [names(parse_sse(r.text))[-1] for r in (denied, approved)] == ["done", "done"]
    assert parse_sse(approved.text)[-1][1]["conversation_id"] is None


async def test_an_approval_expires_when_no_decision_comes(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with service(
        db, model=FunctionModel(RecordingLlm()), approval_expiry_seconds=0.05
    ) as client:
        paused = await pause_a_cancellation(client, "c1")
        assert paused["expires_at"] == pytest.approx(paused["expires_at"])
        await asyncio.sleep(0.1)
        approval_id = paused["approval_id"]
        shown = (await client.get(f"/api/approvals/{approval_id}")).json()
        listed = (await client.get("/api/approvals", params={"conversation_id": "c1"})).json()
        decided = await client.post(
            f"/api/approvals/{approval_id}", json={"decisions": {"cancel-1": {"approve": True}}}
        )
    assert (shown["status"], listed) == ("expired", [])
    assert shown["expires_at"] == pytest.approx(shown["created_at"] + 0.05)
    assert decided.status_code == 410
    assert "expired: no decision came within 0.05 seconds" in decided.json()["detail"]
    # The memory says the cancellation did not run.
    assert remembered(db, "c1")[1].text.startswith(PAUSED_TURN_NOTE)


def test_expiry_and_retention_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="approval_expiry_seconds must be > 0"):
        ServiceConfig(db=tmp_path / "s.db", approval_expiry_seconds=0)
    with pytest.raises(ValueError, match="expire_after must be > 0"):
        ApprovalStore(tmp_path / "a.db", expire_after=-1)
    with pytest.raises(ValueError, match="approval_retention_seconds must be > 0, got 0"):
        ServiceConfig(db=tmp_path / "s.db", approval_retention_seconds=0)
    with pytest.raises(ValueError, match="retention must be > 0 seconds, got -1"):
        ApprovalStore(tmp_path / "a.db", retention=-1)


# -- the store ---------------------------------------------------------------------------------


def _pause(conversation_id: str | None = "c1") -> QaPause:
    call = PendingToolCall(id="x", name="cancel_order", arguments='{"order_id": "A1"}', reason="r")
    state = RunState(
        messages=(UserMessage(text="cancel A1"),), history=(), pending_tool_calls=(call,)
    )
    return QaPause("cancel A1", conversation_id, (), state, (), turn_id="t1")


def _statuses(db: Path | str) -> dict[str, str]:
    return dict(run_sql(str(db), "SELECT id, status FROM qa_approval"))


def _backdate(db: Path | str, approval_id: str, seconds: float) -> None:
    """As if the run had paused ``seconds`` earlier."""
    run_sql(
        str(db),
        "UPDATE qa_approval SET created_at = created_at - ? WHERE id = ?",
        (seconds, approval_id),
    )


def _ended(store: ApprovalStore, status: str) -> str:
    """A run that ended with ``status``; its id."""
    approval_id = store.save(_pause(f"conversation-{status}")).id
    if status == "superseded":
        store.supersede(f"conversation-{status}")
    else:
        store.claim(approval_id)
        store.finish(approval_id, error="ValueError: boom" if status == "failed" else None)
    return approval_id


def test_a_conversation_going_on_supersedes_only_its_own_waiting_runs(
    store_location: str,
) -> None:
    with ApprovalStore(store_location) as store:
        waiting = store.save(_pause()).id
        claimed = store.save(_pause()).id
        elsewhere = store.save(_pause("c2")).id
        stateless = store.save(_pause(None)).id
        store.claim(claimed)
        assert store.supersede("c1") == [waiting]
        assert store.supersede("c1") == []
        with pytest.raises(ApprovalGone, match="superseded"):
            store.claim(waiting)
        with pytest.raises(ApprovalConflict, match="resuming"):
            store.claim(claimed)
        store.claim(elsewhere)
        store.claim(stateless)
    assert _statuses(store_location)[waiting] == "superseded"


def test_overdue_runs_are_marked_expired_when_a_store_opens(
    store_location: str, caplog: pytest.LogCaptureFixture
) -> None:
    db = store_location
    with ApprovalStore(db) as store:
        old, fresh = store.save(_pause()).id, store.save(_pause()).id
    _backdate(db, old, 7200)
    with caplog.at_level(logging.INFO, logger="tooluse.service"), ApprovalStore(db) as store:
        # The default expiry: an hour.
        assert caplog.messages == ["1 run(s) paused for approval expired without a decision"]
        assert [a.id for a in store.pending("c1")] == [fresh]
        expired = store.get(old)
        assert (expired.status, expired.error) == (
            "expired",
            "expired: no decision came within 3600 seconds",
        )
    assert _statuses(db) == {old: "expired", fresh: "pending"}


WEEK = 7 * 24 * 3600


def test_ended_runs_are_deleted_a_week_after_their_expiry_when_a_store_opens(
    store_location: str, caplog: pytest.LogCaptureFixture
) -> None:
    db = store_location
    with ApprovalStore(db) as store:  # the defaults: expiry in an hour, kept a week past it
        old = {status: _ended(store, status) for status in ("done", "failed", "superseded")}
        old["expired"] = store.save(_pause()).id  # expires as the store opens again
        resuming = store.save(_pause()).id
        store.claim(resuming)  # cut off by a crash: its calls may have run
        recent = _ended(store, "done")
        waiting = store.save(_pause()).id
    for approval_id in (*old.values(), resuming):
        _backdate(db, approval_id, 3600 + WEEK + 1)
    _backdate(db, recent, WEEK)  # expired 6 days and 23 hours ago
    with caplog.at_level(logging.INFO, logger="tooluse.service"), ApprovalStore(db):
        assert caplog.messages == [
            "1 run(s) paused for approval expired without a decision",
            "4 ended run(s) paused for approval deleted (kept 604800 seconds past their expiry)",
        ]
    assert _statuses(db) == {resuming: "resuming", recent: "done", waiting: "pending"}


def test_a_store_that_stays_open_deletes_ended_runs_hourly_as_runs_are_saved(
    store_location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = store_location
    with ApprovalStore(db, expire_after=60, retention=60) as store:
        ended = _ended(store, "done")
        _backdate(db, ended, 121)
        store.save(_pause())
        assert ended in _statuses(db)  # the store tidied as it opened, not an hour ago
    monkeypatch.setattr("tooluse.service._approvals._TIDY_EVERY", 0.0)
    with ApprovalStore(db, expire_after=60, retention=3600) as store:
        _backdate(db, ended, 3600)
        assert ended in _statuses(db)
        store.save(_pause())
        assert ended not in _statuses(db)


def test_the_service_keeps_ended_runs_as_configured(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with ApprovalStore(db) as store:
        ended = _ended(store, "done")
    _backdate(db, ended, 3600 + 61)
    QaService(config(db, approval_retention_seconds=60)).close()
    assert _statuses(db) == {}


def test_a_pause_stored_before_turn_ids_is_still_read(store_location: str) -> None:
    """A service upgraded with runs pending (QaPause JSON version 1) lists and resumes them."""
    db = store_location
    pause = _pause()
    old = json.loads(pause.to_json())
    del old["turn_id"]
    old["version"] = 1
    with ApprovalStore(db) as store:
        approval_id = store.save(pause).id
    run_sql(db, "UPDATE qa_approval SET pause = ? WHERE id = ?", (json.dumps(old), approval_id))
    with ApprovalStore(db) as store:
        (listed,) = store.pending("c1")
        assert listed.pause.turn_id is None and listed.pause.question == "cancel A1"
        assert store.claim(approval_id).pending_tool_calls == pause.pending_tool_calls


async def test_the_page_says_until_when_an_approval_waits_and_withdraws_it_on_a_new_message(
    tmp_path: Path,
) -> None:
    async with service(tmp_path / "s.db", model=FunctionModel(RecordingLlm())) as client:
        page = (await client.get("/")).text
    assert "new Date(data.expires_at * 1000)" in page
    # Sending a message withdraws the panels still open, as the service does (410 after).
    submit = page[page.index('form.addEventListener("submit"') :]
    assert submit.index("for (const withdraw of waitingApprovals) withdraw();") < submit.index(
        'api("/api/chat"'
    )


def test_a_file_of_the_first_schema_is_upgraded_with_its_runs(tmp_path: Path) -> None:
    """A file written before runs had a conversation column: its waiting runs are still
    found by conversation, and superseded by a new message in it."""
    db = tmp_path / "a.db"
    pause = _pause()
    with sqlite3.connect(db) as connection:
        connection.execute(
            "CREATE TABLE tooluse_schema_version (component TEXT PRIMARY KEY, version INTEGER)"
        )
        connection.execute("INSERT INTO tooluse_schema_version VALUES ('qa_approval', 1)")
        connection.execute(
            "CREATE TABLE qa_approval (id TEXT PRIMARY KEY, created_at REAL NOT NULL, "
            "status TEXT NOT NULL, pause TEXT NOT NULL, error TEXT)"
        )
        connection.execute(
            "INSERT INTO qa_approval VALUES ('old', ?, 'pending', ?, NULL)",
            (time.time(), pause.to_json()),
        )
    connection.close()
    with ApprovalStore(db) as store:
        assert [approval.id for approval in store.pending("c1")] == ["old"]
        assert store.supersede("c1") == ["old"]
    assert run_sql(
        str(db), "SELECT version FROM tooluse_schema_version WHERE component = 'qa_approval'"
    ) == [(2,)]
