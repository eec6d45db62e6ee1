"""Server-Sent Events on the wire, and the QA pipeline's events as SSE."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
    Sequence,
)
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.responses import JSONResponse, StreamingResponse
from starlette.types import Receive, Scope, Send

from tooluse.qa import ApprovalRequiredEvent, DeltaEvent, DoneEvent, QaEvent
from tooluse.service._failures import log_failure, reported_failure
from tooluse.service._turn_displays import TurnDisplay

if TYPE_CHECKING:  # the service runs its durable turns through this module
    from tooluse.service._service import QaService

__all__ = [
    "KEEPALIVE_COMMENT",
    "JsonTextResponse",
    "completion_events",
    "json_text",
    "named_sse_response",
    "qa_events",
    "sse",
    "sse_response",
]

logger = logging.getLogger("tooluse.service")


KEEPALIVE_COMMENT = b": keep-alive\n\n"  # a comment line: clients ignore it

_END = object()
_Event = TypeVar("_Event")
# The events that end a turn: published to the conversation's watchers even when it had
# none as it started (one may have subscribed since).
_TURN_ENDS = (DoneEvent, ApprovalRequiredEvent)


def sse_response(
    events: AsyncGenerator[bytes, None],
    keepalive_seconds: float,
    headers: Mapping[str, str] | None = None,
) -> StreamingResponse:
    """``events`` as a ``text/event-stream`` response that sends :data:`KEEPALIVE_COMMENT`
    whenever ``keepalive_seconds`` pass without an event."""
    return _EventStreamResponse(
        _with_keepalive(events, keepalive_seconds, bytes),
        media_type="text/event-stream",
        headers=headers,
    )


def named_sse_response(
    named: AsyncGenerator[tuple[str, dict[str, Any]], None],
    keepalive_seconds: float,
    headers: Mapping[str, str] | None = None,
) -> StreamingResponse:
    """:func:`sse_response` of events by name (:func:`qa_events`), each as :func:`sse`
    writes it (as the stream reads it: no generator between the two)."""
    return _EventStreamResponse(
        _with_keepalive(named, keepalive_seconds, _named_sse),
        media_type="text/event-stream",
        headers=headers,
    )


def _named_sse(event: tuple[str, dict[str, Any]]) -> bytes:
    return sse(*event)


class _EventStreamResponse(StreamingResponse):
    """``StreamingResponse`` that watches for the client leaving with one task of its own:
    Starlette's runs the stream and the watch in an anyio task group, whose cancel scopes
    cost more per request than the rest of the stream's plumbing. The client leaving
    cancels the stream (so the run is closed) and ends the response normally, as there."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = asyncio.current_task()
        if scope["type"] != "http" or response is None:
            await super().__call__(scope, receive, send)
            return
        gone = False

        def client_left(watch: asyncio.Task[None]) -> None:
            nonlocal gone
            if not watch.cancelled() and watch.exception() is None:
                gone = True
                response.cancel()

        watcher = asyncio.ensure_future(_until_disconnect(receive))
        watcher.add_done_callback(client_left)
        try:
            await self.stream_response(send)
        except asyncio.CancelledError:
            if not gone:
                raise
            response.uncancel()  # ours, for the client that left: the response is over
        finally:
            watcher.remove_done_callback(client_left)
            watcher.cancel()
            # Cancelled in a write, the stream was left at its yield: closed now (its run
            # with it), not whenever the garbage collector finds it.
            if isinstance(self.body_iterator, AsyncGenerator):
                await self.body_iterator.aclose()
        if self.background is not None and not gone:
            await self.background()

    async def stream_response(self, send: Send) -> None:
        # As Starlette's, but the stream's last chunk (one that went out after its run had
        # ended) ends the body in the same message: one send less per response, and with
        # httptools one socket write less (the chunk and the body's end are written at once).
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        async for chunk in self.body_iterator:
            last = type(chunk) is _LastChunk
            await send({"type": "http.response.body", "body": chunk, "more_body": not last})
            if last:
                return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class _LastChunk(bytes):
    """A stream's last chunk: its run had ended when it was sent (nothing more will come)."""

    __slots__ = ()


class _Outbox:
    """What the run made and the client was not sent yet, between the run's task and the
    response's; one future at a time wakes the side that waits."""

    __slots__ = ("chunks", "end", "ready", "room")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.end: object = None  # _END, or the exception the run raised
        self.ready: asyncio.Future[None] | None = None  # the response side waits for chunks
        self.room: asyncio.Future[None] | None = None  # the run waits for the client

    def put(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.wake()

    def wake(self) -> None:
        if self.ready is not None and not self.ready.done():
            self.ready.set_result(None)


class _KeepaliveTimer:
    """Due ``interval`` after the last write (:meth:`sent`): it then marks a keep-alive
    ``due`` and wakes the response side of the outbox; it moves itself on when it finds a
    later write, so nothing is scheduled per write (a timeout per wait was a task and a
    timer each)."""

    __slots__ = ("_handle", "_interval", "_loop", "_outbox", "_sent_at", "due")

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float, outbox: _Outbox) -> None:
        self._loop = loop
        self._interval = interval
        self._outbox = outbox
        self._sent_at = loop.time()
        self.due = False
        self._handle = loop.call_at(self._sent_at + interval, self._tick)

    def sent(self) -> None:
        self._sent_at, self.due = self._loop.time(), False

    def _tick(self) -> None:
        due = self._sent_at + self._interval
        if self._loop.time() >= due:
            self.due = True
            self._outbox.wake()
            due = self._loop.time() + self._interval
        self._handle = self._loop.call_at(due, self._tick)

    def cancel(self) -> None:
        # A cancelled handle lets go of its callback, so nothing is left for the collector
        # (a timer closure that named itself was a reference cycle per stream, and the
        # collector's pauses to free them, at 200 streams, held up every stream in flight).
        self._handle.cancel()


async def _with_keepalive(
    events: AsyncGenerator[_Event, None], interval: float, render: Callable[[_Event], bytes]
) -> AsyncIterator[bytes]:
    # The events are read in one task of their own (a generator must not hop between tasks:
    # its cancel scopes would break), into an outbox of at most _QUEUED_EVENTS; this side
    # sends everything waiting there as one chunk (one socket write instead of one per
    # delta: the writes were the service's largest cost per request). One timer
    # (_KeepaliveTimer) wakes it for a keep-alive. Leaving early (the client went away)
    # cancels the reader, which closes the run, even one held while the outbox is full: it
    # lets go of its turn now.
    loop = asyncio.get_running_loop()
    outbox = _Outbox()

    async def read() -> None:
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    outbox.put(render(event))
                    if len(outbox.chunks) >= _QUEUED_EVENTS:
                        outbox.room = loop.create_future()
                        await outbox.room
        except asyncio.CancelledError:  # the response side left and cancelled this reader
            raise
        except BaseException as exc:  # handed over and raised on the response's side
            outbox.end = exc
        else:
            outbox.end = _END
        outbox.wake()

    reader = asyncio.create_task(read())
    timer = _KeepaliveTimer(loop, interval, outbox)
    try:
        while True:
            if not outbox.chunks and outbox.end is None:
                outbox.ready = loop.create_future()
                await outbox.ready
                outbox.ready = None
            if outbox.chunks:
                chunk = b"".join(outbox.chunks)
                outbox.chunks.clear()
                if outbox.room is not None and not outbox.room.done():
                    outbox.room.set_result(None)
                timer.sent()
                if outbox.end is _END:
                    yield _LastChunk(chunk)
                    return
                yield chunk  # what came before the end or the failure goes out first
                continue
            if isinstance(outbox.end, BaseException):
                raise outbox.end
            if outbox.end is _END:
                return
            if timer.due:
                timer.sent()
                yield KEEPALIVE_COMMENT
    finally:
        timer.cancel()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


# Events the reader may be ahead of the client: a whole answer's deltas, usually.
_QUEUED_EVENTS = 64


def sse(event: str | None, data: Any) -> bytes:
    """One event: ``event: <name>`` and ``data: <JSON>`` (no name: a plain message). Written
    out here rather than by ``fastapi.sse.format_sse_event``, which splits the data into
    lines: JSON text as ``json.dumps`` writes it holds no line break (it escapes them), and
    the names are the service's own."""
    if event is None:
        return f"data: {json_text(data)}\n\n".encode()
    return f"event: {event}\ndata: {json_text(data)}\n\n".encode()


def json_text(data: Any) -> str:
    """``data`` as JSON text that encodes to UTF-8: non-ASCII characters as they are, unless
    the data holds a lone surrogate (a model's broken ``"\\ud83d"`` escape, decoded; a tool
    reading undecodable bytes), which only a ``\\u`` escape can carry."""
    # A string (a delta's text) as json.dumps writes one, without its encoder's set-up.
    text = encode_basestring(data) if type(data) is str else json.dumps(data, ensure_ascii=False)
    if not text.isascii() and _has_surrogate(text):
        return json.dumps(data)
    return text


class JsonTextResponse(JSONResponse):
    """``JSONResponse`` that sends a lone surrogate as a ``\\u`` escape (``JSONResponse``
    fails to encode it, and so does FastAPI's own serializer)."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, allow_nan=False, separators=(",", ":")).encode()


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


async def qa_events(
    service: QaService,
    events: AsyncGenerator[QaEvent, None],
    conversation_id: str | None,
    question: str,
    *,
    paused_turn: str | None = None,
    goes_on: bool = False,
    on_end: Callable[[str | None], Awaitable[None]] | None = None,
) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
    """The pipeline's events by name, with their data: ``tool_call``, ``tool_result``,
    ``route``, ``delta``, ``done`` (with the conversation id: ``None`` for a run given its
    history), or ``approval_required`` (the paused run is stored and its ``approval_id``
    sent); a failure ends them with an ``error`` event.

    A run in a conversation is a turn of it (:class:`ConversationTurns`): it waits for the
    turn running in the conversation to end, then, for a new question in a conversation that
    ``goes_on``, starts the turn (:meth:`QaService.start_turn`: its memory read, the
    approvals it withdraws), and runs; the next turn starts once this one's pause, if any,
    is stored. ``on_end(error)`` is told how the
    run ended (``None``: completely), also when it ended waiting for its turn. The run is
    closed before its turn ends, wherever it stopped (its client gone while it was held at
    an event): its router task and its record of a stopped turn are done by then.

    A turn that memory keeps (it reached ``done``, or it paused: ``paused_turn``, the id of
    the paused turn a resumed run continues, or its pause's) leaves its display events in
    ``service.turn_displays`` for a reloaded page (:class:`TurnDisplay`). In a durable run,
    each of these writes is a step of the run (:meth:`QaService.recorded`). Otherwise a new
    question's turn holds its memory write (:class:`~tooluse.service._turn_memory.TurnMemory`)
    until its ``done``, and stores it with its display record in one hop to a thread before
    it sends ``done``: a write that fails ends the turn with an ``error`` event instead, as
    when it was made, and no display record is stored. The events of a run in a
    conversation, but the deltas, go to its watchers on every worker too
    (:class:`~tooluse.service._conversation_events.ConversationEvents`): its end always,
    its tool calls, results and route if it had watchers when it started.

    The turn's last event, ``done`` or ``approval_required``, is given once the turn has
    ended (its lock released, ``on_end`` told): a client that asks again on its ``done``
    does not wait for the turn, and the stream's last event and its end go out in one
    write."""
    error: str | None = "interrupted: the client went away before the run ended"
    ending: tuple[str, dict[str, Any]] | None = None  # the turn's last event, given after it
    display = TurnDisplay()
    # The conversation of a new question's turn, which holds its memory write for its done
    # (a resumed run writes as it goes: a stopped one records what ran; a durable run's
    # writes are its steps).
    holding = conversation_id if paused_turn is None and service.runs is None else None
    display_stored = False  # with the turn's memory write, at its done
    try:
        async with (
            service.turns.turn(conversation_id) as lease,
            service.turn_memory.turn(conversation_id, holds_writes=holding is not None),
            contextlib.aclosing(events),
        ):
            # A turn's progress goes to the conversation's watchers if it has any now; its
            # end (done, a pause, an error) always does. With Redis they were counted as
            # the turn's lock was taken, or are asked while the turn's start reads its
            # memory (a round trip that waited for the read was a queue of the worker's
            # loop more per turn).
            asking = (
                asyncio.ensure_future(service.events.watched(conversation_id))
                if conversation_id is not None
                and service.events.through_redis
                and lease.watchers is None  # counted as the lock was taken
                else None
            )
            try:
                if goes_on and conversation_id is not None:
                    start = functools.partial(service.start_turn, conversation_id, lease)
                    await service.recorded("turn.start", start)
                # Without Redis, a watcher here gets every event at no cost.
                if asking is not None:
                    watched = await asking
                elif lease.watchers is not None:
                    watched = lease.watchers > 0
                else:
                    watched = conversation_id is not None
            finally:
                if asking is not None and not asking.done():  # the start failed
                    asking.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await asking
            try:
                async for event in events:
                    display.add(event)
                    data = event.to_dict()
                    if isinstance(event, ApprovalRequiredEvent):
                        if holding is not None:  # the pause's record, then the pause
                            await service.turn_memory.store_held(holding)
                        paused_turn = event.pause.turn_id
                        approval_id, expires_at = await service.recorded(
                            "approval.save", functools.partial(_save_pause, service, event)
                        )
                        data["approval_id"] = approval_id
                        data["expires_at"] = expires_at
                        data["conversation_id"] = conversation_id
                    elif isinstance(event, DoneEvent):
                        data["conversation_id"] = conversation_id
                        if holding is not None:
                            display_stored = True  # also if the memory write fails
                            await service.turn_memory.store_held(
                                holding, then=_DisplayRecord(service, holding, question, display)
                            )
                        lease.answered = True  # its memory written
                    if conversation_id is not None and (
                        isinstance(event, _TURN_ENDS)
                        or (watched and not isinstance(event, DeltaEvent))
                    ):
                        await service.events.publish(conversation_id, event.kind, data)
                    if isinstance(event, _TURN_ENDS):
                        ending = event.kind, data
                    else:
                        yield event.kind, data
            finally:  # within the turn: the records keep the order of the turns
                if (
                    conversation_id is not None
                    and not display_stored
                    and (paused_turn is not None or display.answered)
                ):
                    record = _DisplayRecord(
                        service, conversation_id, question, display, paused_turn
                    )
                    await service.recorded("display.save", record.astore)
        error = None
    except Exception as exc:
        log_failure(f"chat {conversation_id}", exc)
        error = f"{type(exc).__name__}: {exc}"
        failure = {"message": str(exc) or type(exc).__name__, "type": type(exc).__name__}
        if conversation_id is not None:
            await service.events.publish(conversation_id, "error", failure)
        if ending is not None:  # it happened: what failed came after it
            yield ending
            ending = None
        yield "error", failure
    finally:
        if on_end is not None:
            await service.recorded("turn.end", functools.partial(on_end, error))
    if ending is not None:
        yield ending


async def completion_events(
    service: QaService, events: AsyncGenerator[QaEvent, None], what: str
) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
    """The events of a run given its history (``/v1/chat/completions``: no conversation, so
    no turn to wait for, no watchers, no display record) by name, as :func:`qa_events` names
    them: a pause is stored (a step of a durable run) and its ``approval_id`` and
    ``expires_at`` sent; a failure, logged as ``what``'s, ends them with an ``error`` event
    whose data is :func:`~tooluse.service._failures.reported_failure`'s. Plain data
    throughout, so that a durable run keeps them as its outcome."""
    try:
        async with contextlib.aclosing(events):
            async for event in events:
                data = event.to_dict()
                if isinstance(event, ApprovalRequiredEvent):
                    data["approval_id"], data["expires_at"] = await service.recorded(
                        "approval.save", functools.partial(_save_pause, service, event)
                    )
                yield event.kind, data
    except Exception as exc:
        log_failure(what, exc)
        yield "error", reported_failure(exc)


async def _save_pause(service: QaService, event: ApprovalRequiredEvent) -> tuple[str, float]:
    stored = await asyncio.to_thread(service.approvals.save, event.pause)
    return stored.id, stored.expires_at


class _DisplayRecord:
    """A turn's display record (:class:`~tooluse.service._turn_memory.HeldRecord`); a
    failure to store it is logged: the turn ran and its answer is in memory, only its trace
    is lost."""

    __slots__ = ("_conversation_id", "_display", "_paused_turn", "_question", "_service")

    def __init__(
        self,
        service: QaService,
        conversation_id: str,
        question: str,
        display: TurnDisplay,
        paused_turn: str | None = None,
    ) -> None:
        self._service = service
        self._conversation_id = conversation_id
        self._question = question
        self._display = display
        self._paused_turn = paused_turn

    def store(self) -> None:
        if self._display.empty:
            return
        try:
            self._service.turn_displays.save(*self._saved())
        except Exception:
            self._lost()

    async def astore(self) -> None:
        if self._display.empty:
            return
        try:
            await self._service.turn_displays.asave(*self._saved())
        except Exception:
            self._lost()

    def write(self) -> tuple[str, Sequence[Any]] | None:
        if self._display.empty or self._paused_turn is not None:
            return None
        try:
            return self._service.turn_displays.insertion(
                self._conversation_id, self._question, self._display
            )
        except Exception:  # not with the memory's write: astore() tries it, logs a failure
            return None

    def _saved(self) -> tuple[str, str, str | None, TurnDisplay]:
        return self._conversation_id, self._question, self._paused_turn, self._display

    def _lost(self) -> None:
        logger.exception(
            "Could not store the tool trace of a turn of chat %s", self._conversation_id
        )
