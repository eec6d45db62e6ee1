"""Server-Sent Events on the wire, and the QA pipeline's events as SSE."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi.sse import format_sse_event

from tooluse.qa import ApprovalRequiredEvent, DoneEvent, QaEvent
from tooluse.service._service import QaService

__all__ = ["qa_event_stream", "sse"]

logger = logging.getLogger("tooluse.service")


def sse(event: str | None, data: Any) -> bytes:
    """One event: ``event: <name>`` and ``data: <JSON>`` (no name: a plain message)."""
    return format_sse_event(event=event, data_str=json.dumps(data, ensure_ascii=False))


async def qa_event_stream(
    service: QaService,
    events: AsyncIterator[QaEvent],
    conversation_id: str,
    on_end: Callable[[str | None], None] | None = None,
) -> AsyncIterator[bytes]:
    """The pipeline's events as SSE: ``tool_call``, ``tool_result``, ``route``, ``delta``,
    ``done`` (with the conversation id), or ``approval_required`` (the paused run is stored
    and its ``approval_id`` sent); a failure ends the stream with an ``error`` event.
    ``on_end(error)`` is told how the run ended (``None``: completely)."""
    error: str | None = "interrupted: the client went away before the run ended"
    try:
        async for event in events:
            data = event.to_dict()
            if isinstance(event, ApprovalRequiredEvent):
                data["approval_id"] = await asyncio.to_thread(service.approvals.save, event.pause)
                data["conversation_id"] = conversation_id
            elif isinstance(event, DoneEvent):
                data["conversation_id"] = conversation_id
            yield sse(event.kind, data)
        error = None
    except Exception as exc:
        logger.exception("chat %s failed", conversation_id)
        error = f"{type(exc).__name__}: {exc}"
        yield sse("error", {"message": str(exc) or type(exc).__name__, "type": type(exc).__name__})
    finally:
        if on_end is not None:
            on_end(error)
