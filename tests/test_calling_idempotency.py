"""Idempotency keys: a repeated call with the same key returns the stored result instead of
running again, from the model, a resume, another process, or after a crash."""

from __future__ import annotations

import asyncio
import collections
import functools
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from _calling_tools import FakeTool, prompt_with, tool_calls_response
from tooluse import (
    Approve,
    Prompt,
    ToolCall,
    ToolCallingManager,
    ToolContext,
    ToolMetadata,
    tool,
    tool_callbacks,
)
from tooluse.calling import PostgresToolCallJournal, SqliteToolCallJournal, ToolCallJournal
from tooluse.calling._journal import idempotency_key_of
from tooluse.messages import ToolResponseMessage

OpenJournal = Callable[..., SqliteToolCallJournal | PostgresToolCallJournal]


@pytest.fixture
def open_journal(open_store: Callable[..., Any]) -> OpenJournal:
    """Journals on one SQLite file or one PostgreSQL database (``store_location``): each one
    opened is another process's, or another worker's."""
    return functools.partial(open_store, SqliteToolCallJournal, PostgresToolCallJournal)


def order_tool(ran: list[str], **metadata: Any) -> FakeTool:
    def cancel(order_id: str) -> str:
        ran.append(order_id)
        return f'{{"cancelled": "{order_id}"}}'

    return FakeTool("cancel", cancel, **metadata)


async def call_once(
    manager: ToolCallingManager, tool_: FakeTool, arguments: str, call_id: str = "c0"
) -> tuple[str, bool]:
    result = await manager.aexecute_tool_calls(
        prompt_with([tool_]),
        tool_calls_response(ToolCall(id=call_id, name="cancel", arguments=arguments)),
    )
    response = result.conversation_history[-1].responses[0]  # type: ignore[union-attr]
    return response.data, response.is_error


async def test_a_repeat_returns_the_stored_result_and_says_so(open_journal: OpenJournal) -> None:
    ran: list[str] = []
    cancel = order_tool(ran, idempotency_key=True)
    journal = open_journal()
    assert isinstance(journal, ToolCallJournal)
    manager = ToolCallingManager(journal=journal)
    first = await call_once(manager, cancel, '{"order_id": "A1"}')
    # Another manager and journal on the same file: a restarted process, another worker.
    again = ToolCallingManager(journal=open_journal())
    repeat = await call_once(again, cancel, '{ "order_id" : "A1" }', call_id="c7")
    other = await call_once(again, cancel, '{"order_id": "B2"}')
    assert first == ('{"cancelled": "A1"}', False)
    note, _, stored = repeat[0].partition("\n")
    assert note.startswith("[Not run again: a call of 'cancel' with the same idempotency key ran")
    assert (stored, repeat[1]) == ('{"cancelled": "A1"}', False)
    assert other == ('{"cancelled": "B2"}', False)
    assert ran == ["A1", "B2"]


async def test_without_a_key_or_a_journal_every_call_runs(open_journal: OpenJournal) -> None:
    ran: list[str] = []
    keyed, plain = order_tool(ran, idempotency_key=True), order_tool(ran)
    journaled = ToolCallingManager(journal=open_journal())
    for manager, tool_ in ((journaled, plain), (ToolCallingManager(), keyed)):
        await call_once(manager, tool_, '{"order_id": "A1"}')
        await call_once(manager, tool_, '{"order_id": "A1"}')
    assert ran == ["A1"] * 4


async def test_a_key_function_sees_the_arguments_and_the_context(open_journal: OpenJournal) -> None:
    """The key is what the tool says makes two calls the same: here the order and the user
    (from the tool context, which the application sets), not the free-text reason."""

    def key(arguments: Any, context: ToolContext) -> str:
        return f"{context['user']}:{arguments['order_id']}"

    cancel = FakeTool("cancel", lambda order_id, reason: "cancelled", idempotency_key=key)
    manager = ToolCallingManager(journal=open_journal())
    for user, reason in (("ann", "late"), ("ann", "changed my mind"), ("bob", "late")):
        response = tool_calls_response(("cancel", f'{{"order_id": "A1", "reason": "{reason}"}}'))
        await manager.aexecute_tool_calls(prompt_with([cancel], context={"user": user}), response)
    assert len(cancel.calls) == 2  # ann's second call was a repeat; bob's is his own


def test_a_key_function_must_give_a_string() -> None:
    bad = FakeTool("t", idempotency_key=lambda arguments, context: 7)
    with pytest.raises(ValueError, match="idempotency_key function of tool 't' returned 7"):
        idempotency_key_of(bad, "{}", ToolContext())
    with pytest.raises(TypeError, match="idempotency_key takes True"):
        ToolMetadata(idempotency_key="order_id")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="this one is read_only"):
        ToolMetadata(idempotency_key=True, read_only=True)


async def test_a_call_that_raised_may_run_again_but_a_timed_out_one_may_not(
    open_journal: OpenJournal,
) -> None:
    attempts: list[str] = []

    def flaky(order_id: str) -> str:
        attempts.append(order_id)
        if len(attempts) == 1:
            raise RuntimeError("the order service refused: try again")
        return "cancelled"

    async def slow(order_id: str) -> str:
        attempts.append(order_id)
        await asyncio.sleep(30)
        return "cancelled"

    manager = ToolCallingManager(journal=open_journal())
    refused = await call_once(
        manager, FakeTool("cancel", flaky, idempotency_key=True), '{"order_id": "A1"}'
    )
    retried = await call_once(
        manager, FakeTool("cancel", flaky, idempotency_key=True), '{"order_id": "A1"}'
    )
    assert refused[1] is True and retried == ("cancelled", False)

    slow_tool = FakeTool("cancel", slow, idempotency_key=True, timeout=0.2)
    timed_out = await call_once(manager, slow_tool, '{"order_id": "B2"}')
    again = await call_once(manager, slow_tool, '{"order_id": "B2"}')
    assert timed_out == ("Tool 'cancel' did not finish within 0.2 seconds.", True)
    assert again[1] is True and "Whether it took effect is unknown" in again[0]
    assert attempts == ["A1", "A1", "B2"]


async def test_entries_expire_after_the_retention(open_journal: OpenJournal) -> None:
    now = [1000.0]
    ran: list[str] = []
    cancel = order_tool(ran, idempotency_key=True)
    journal = open_journal(retention=60, clock=lambda: now[0])
    manager = ToolCallingManager(journal=journal)
    await call_once(manager, cancel, '{"order_id": "A1"}')
    now[0] += 59
    await call_once(manager, cancel, '{"order_id": "A1"}')
    now[0] += 2
    await call_once(manager, cancel, '{"order_id": "A1"}')
    assert ran == ["A1", "A1"]


async def test_an_approved_call_runs_once_when_the_resume_is_repeated(
    open_journal: OpenJournal,
) -> None:
    """A resume sent twice (a client retrying, a worker resuming what another already did)
    runs the approved write once."""
    ran: list[str] = []
    cancel = order_tool(ran, idempotency_key=True, requires_approval=True)
    prompt = prompt_with([cancel])
    paused = await ToolCallingManager().aexecute_tool_calls(
        prompt, tool_calls_response(("cancel", '{"order_id": "A1"}'))
    )
    held = Prompt(paused.conversation_history, prompt.options)
    results = []
    for _ in range(2):
        manager = ToolCallingManager(journal=open_journal())
        resumed = await manager.aresume_tool_calls(held, {"c0": Approve()})
        last = resumed.conversation_history[-1]
        assert isinstance(last, ToolResponseMessage)
        results.append(last.responses[0].data)
    assert ran == ["A1"]
    assert results[1].startswith("[Not run again") and results[1].endswith(results[0])


_CRASHING_RUN = """
import asyncio, os, sys
sys.path.insert(0, {tests!r})
from _calling_tools import FakeTool, prompt_with, tool_calls_response
from tooluse import ToolCallingManager
from tooluse.calling import PostgresToolCallJournal, SqliteToolCallJournal

def cancel(order_id):
    with open({acted!r}, "a") as f:
        f.write(order_id + "\\n")
    os._exit(17)  # the process dies after the tool acted, before its result is recorded

journal = {journal}({location!r})
manager = ToolCallingManager(journal=journal)
tool = FakeTool("cancel", cancel, idempotency_key=True)
asyncio.run(manager.aexecute_tool_calls(
    prompt_with([tool]), tool_calls_response(("cancel", '{{"order_id": "A1"}}'))))
"""


async def test_a_crash_between_running_and_recording_never_runs_the_call_again(
    tmp_path: Path, store_location: str, open_journal: OpenJournal
) -> None:
    """The key is claimed (a ``started`` row, committed) before the tool runs. A process that
    dies after the tool acted and before the result was recorded leaves it ``started``: the
    restarted process does not run the call again and tells the model the outcome is
    unknown; the entry is listed for an operator, who clears it once checked."""
    acted = tmp_path / "acted.txt"
    script = _CRASHING_RUN.format(
        tests=str(Path(__file__).parent),
        acted=str(acted),
        journal=type(open_journal()).__name__,
        location=store_location,
    )
    crashed = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], timeout=120)
    assert crashed.returncode == 17
    assert acted.read_text() == "A1\n"

    journal = open_journal()
    ran: list[str] = []
    restarted = ToolCallingManager(journal=journal)
    text, is_error = await call_once(
        restarted, order_tool(ran, idempotency_key=True), '{"order_id": "A1"}'
    )
    assert is_error and "recorded no result" in text and "do not retry it" in text
    assert ran == []
    (unknown,) = journal.unfinished()
    assert (unknown.tool, unknown.state, unknown.call_id) == ("cancel", "started", "c0")
    assert await journal.forget(unknown.key) is True  # an operator checked the order
    assert await call_once(
        restarted, order_tool(ran, idempotency_key=True), '{"order_id": "A1"}'
    ) == (
        '{"cancelled": "A1"}',
        False,
    )


async def test_of_two_workers_claiming_one_key_at_once_exactly_one_runs(
    open_journal: OpenJournal,
) -> None:
    """Two journals on one database (two workers) claim the same keys at the same moment,
    each claim on a thread of its own: the database gives each key to one of them."""
    first, second = open_journal(), open_journal()
    keys = [f"k{n}" for n in range(20)]
    claims = await asyncio.gather(
        *(
            journal.begin(key, tool="cancel", call_id=f"c{index}")
            for key in keys
            for index, journal in enumerate((first, second))
        )
    )
    winners = collections.Counter(
        key
        for key, claim in zip((k for k in keys for _ in "ab"), claims, strict=True)
        if claim is None
    )
    assert winners == collections.Counter(keys)  # each key once, never twice, never lost
    assert {claim.state for claim in claims if claim is not None} == {"started"}


async def test_a_write_called_on_two_workers_at_once_runs_once(open_journal: OpenJournal) -> None:
    """The same call (a client retrying on another worker) reaches two managers at once:
    the tool runs once; the other call is told a call with its key is under way."""
    ran: list[str] = []

    def cancel(order_id: str) -> str:
        ran.append(order_id)
        time.sleep(0.3)  # still running when the other worker's claim comes
        return "cancelled"

    tool_ = FakeTool("cancel", cancel, idempotency_key=True)
    workers = [ToolCallingManager(journal=open_journal()) for _ in range(2)]
    answers = await asyncio.gather(
        *(call_once(worker, tool_, '{"order_id": "A1"}') for worker in workers)
    )
    assert ran == ["A1"]
    assert sorted(is_error for _, is_error in answers) == [False, True]
    assert any("recorded no result" in text for text, _ in answers)


def test_tool_takes_the_key() -> None:
    @tool(idempotency_key=True)
    def place_order(item: str) -> str:
        return item

    (callback,) = tool_callbacks(place_order)
    assert callback.metadata.idempotency_key is True
    assert idempotency_key_of(callback, '{"item": "x"}', ToolContext()) == idempotency_key_of(
        callback, '{ "item":"x" }', ToolContext()
    )
