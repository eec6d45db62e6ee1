"""The service's turns as durable runs (``ServiceConfig(durable_runs=True)``): what a run's
request holds, the body each worker runs for it, and the events its client reads.

The request of a run is plain data: a question (``"ask"``: its text, conversation and turn id, so
that a replay of the body asks the pipeline the same), a resumed pause (``"resume"``: the
approval id, claimed before the run began, and the decisions), or a question of
``/v1/chat/completions`` (``"complete"``: its text, the history it came with, and the turn
id). The body runs the turn as ``/api/chat``, ``/api/approvals/{id}`` or ``/v1`` would
(:func:`~tooluse.service._sse.qa_events`, :func:`~tooluse.service._sse.completion_events`),
hands each event to the client reading it from this worker, if one is, and returns the events
but the answer's deltas (the ``done`` event holds the answer): the outcome ``GET
/api/runs/{id}`` shows on any worker, also when the run was finished by another worker than
the one its client read from."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tooluse.calling import Approve, Decision, Deny
from tooluse.messages import Message, messages_from_json, messages_to_json
from tooluse.service._sse import completion_events, qa_events

if TYPE_CHECKING:
    from tooluse.service._service import QaService

__all__ = [
    "LiveRun",
    "ask_request",
    "complete_request",
    "live_events",
    "resume_request",
    "run_turn",
]

LiveRun = asyncio.Queue[tuple[str, dict[str, Any]] | None]
"""The events of a run for its client on this worker, by name, then ``None`` at its end."""

logger = logging.getLogger("tooluse.service")


def ask_request(
    question: str,
    conversation_id: str,
    *,
    goes_on: bool,
    tool_context: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """A run asking ``question`` in ``conversation_id`` for the caller whose entries are
    ``tool_context``; ``goes_on``: the conversation existed, and its runs waiting for
    approval are withdrawn when this one starts."""
    return {
        "kind": "ask",
        "run_id": uuid.uuid4().hex,
        "question": question,
        "conversation_id": conversation_id,
        "turn_id": uuid.uuid4().hex,
        "goes_on": goes_on,
        "tool_context": None if tool_context is None else dict(tool_context),
    }


def resume_request(
    approval_id: str,
    decisions: Mapping[str, Decision],
    *,
    conversation_id: str | None,
    tool_context: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """A run resuming the claimed pause ``approval_id`` (in ``conversation_id``) with
    ``decisions``, for the caller whose entries are ``tool_context``."""
    return {
        "kind": "resume",
        "run_id": uuid.uuid4().hex,
        "approval_id": approval_id,
        "conversation_id": conversation_id,
        "decisions": {call_id: _decision_data(d) for call_id, d in decisions.items()},
        "tool_context": None if tool_context is None else dict(tool_context),
    }


def complete_request(
    question: str, history: Sequence[Message], *, tool_context: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A run of ``/v1/chat/completions`` asking ``question`` after ``history`` (the
    request's earlier messages), for the caller whose entries are ``tool_context``."""
    return {
        "kind": "complete",
        "run_id": uuid.uuid4().hex,
        "question": question,
        "history": messages_to_json(history),
        "conversation_id": None,
        "turn_id": uuid.uuid4().hex,
        "tool_context": None if tool_context is None else dict(tool_context),
    }


def _decision_data(decision: Decision) -> dict[str, Any]:
    if isinstance(decision, Approve):
        arguments = None if decision.arguments is None else dict(decision.arguments)
        return {"approve": True, "arguments": arguments, "by": decision.by}
    return {"approve": False, "message": decision.message, "by": decision.by}


def _decision(data: Mapping[str, Any]) -> Decision:
    if data["approve"]:
        return Approve(arguments=data["arguments"], by=data["by"])
    return Deny(data["message"], by=data["by"])


async def run_turn(service: QaService, request: dict[str, Any]) -> list[dict[str, Any]]:
    """The body of a run: the turn ``request`` asks for, its events sent to this worker's
    client of the run (:func:`live_events`); the events it ended with, but the deltas."""
    run_id: str = request["run_id"]
    named: AsyncGenerator[tuple[str, dict[str, Any]], None]
    if request["kind"] == "complete":
        events = service.stream(
            request["question"],
            history=messages_from_json(request["history"]),
            tool_context=request["tool_context"],
            turn_id=request["turn_id"],
        )
        named = completion_events(service, events, f"chat completion run {run_id}")
    elif request["kind"] == "ask":
        conversation_id: str = request["conversation_id"]
        question: str = request["question"]
        events = service.stream(
            question,
            conversation_id=conversation_id,
            tool_context=request["tool_context"],
            turn_id=request["turn_id"],
        )

        named = qa_events(service, events, conversation_id, question, goes_on=request["goes_on"])
    else:
        approval_id: str = request["approval_id"]
        stored = await asyncio.to_thread(service.approvals.get, approval_id)
        decisions = {call_id: _decision(d) for call_id, d in request["decisions"].items()}

        async def finished(error: str | None) -> None:
            await asyncio.to_thread(service.approvals.finish, approval_id, error)

        named = qa_events(
            service,
            service.resume_stream(stored.pause, decisions, tool_context=request["tool_context"]),
            stored.pause.conversation_id,
            stored.pause.question,
            paused_turn=stored.pause.turn_id,
            on_end=finished,
        )
    kept: list[dict[str, Any]] = []
    try:
        async for kind, data in named:
            client = service.live_runs.get(run_id)
            if client is not None:
                client.put_nowait((kind, data))
            if kind != "delta":
                kept.append({"event": kind, "data": data})
    finally:
        client = service.live_runs.get(run_id)
        if client is not None:
            client.put_nowait(None)
    return kept


async def live_events(
    service: QaService, request: dict[str, Any]
) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
    """Begin the run of ``request`` and give its events by name while this worker runs it.
    A client that goes away leaves the run running; should this worker die, another takes
    it over, and ``GET /api/runs/{id}`` shows how it ended."""
    run_id: str = request["run_id"]
    queue: LiveRun = asyncio.Queue()
    service.live_runs[run_id] = queue
    try:
        assert service.runs is not None
        await service.runs.begin(run_id, request)
    except BaseException:
        del service.live_runs[run_id]
        raise

    async def stream() -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        try:
            while (chunk := await queue.get()) is not None:
                yield chunk
        finally:
            service.live_runs.pop(run_id, None)

    return stream()
