"""Async SDK clients per event loop, and the checks of injected SDK clients.

The chat models talk to their provider through the async client only: the sync API
(``ChatClient.call()``, ``BaseChatModel.call()``) runs the async path on a loop of its own
(``OpenAIEmbeddingModel``, whose embed methods are blocking, adds a blocking client of its own).

An async HTTP client belongs to the event loop it first did I/O on: its pooled connections
are that loop's transports, its locks and events that loop's futures. One used from another
loop fails (``Event loop is closed``, ``... is bound to a different event loop``), and a
program may run several loops over its life: ``asyncio.run`` twice, the private loop the
sync API runs the async core on in each thread (``tooluse._sync``), a test suite with a loop
per test. :class:`PerLoop` keeps one client per running loop (and per process: a forked child
makes its own, as with :class:`~tooluse._fork.PerProcess`).

Each client is closed on its own loop, and by the loop itself when it shuts down: beside the
client sits a suspended async generator, which the loop registers (weakly) on its first step;
``loop.shutdown_asyncgens()`` (run by ``asyncio.run``, ``asyncio.Runner``, pytest-asyncio,
and the sync API's loops) closes it, and its ``finally`` closes the client before the loop
closes, so no connection outlives its loop. Closing the model (or the model being collected)
also schedules each client's close on its loop, to run when the loop runs next; whichever
close comes first does the work and the other waits for it. A client of a loop closed without
that shutdown (``loop.close()`` alone) is dropped when the next client is made: its
connections cannot be closed on a closed loop and are left to the garbage collector.

The generators, and through them the clients, are always held from this module (the
``weakref.finalize`` of the model's :class:`PerLoop`, or :data:`_detached`), never only from
the model: a model that dies in a reference cycle would take its clients' connections into
the garbage collector's cycle, which runs every finalizer in it (the sockets' too, each with a
``ResourceWarning``) before any close could run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sys
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from tooluse._fork import PerProcess, ProcessLock, current_process
from tooluse._sync import run_sync, thread_loop

__all__ = ["AsyncClient", "AsyncClients", "ClientKind", "PerLoop", "check_client"]

logger = logging.getLogger(__name__)


class AsyncClient(Protocol):
    @property
    def base_url(self) -> Any: ...

    async def close(self) -> None: ...


_C = TypeVar("_C", bound=AsyncClient)
_Loop = asyncio.AbstractEventLoop


class _Closing:
    """Whether a client's close has started on its loop (a future done when it ended)."""

    __slots__ = ("ended",)

    def __init__(self) -> None:
        self.ended: asyncio.Future[None] | None = None


class _Slot(Generic[_C]):
    """One loop's client, its closer (the generator the loop closes at its shutdown; ``None``
    on a loop that does not track async generators) and its close's progress."""

    __slots__ = ("client", "closer", "closing", "loop")

    def __init__(self, client: _C, loop: _Loop) -> None:
        self.client = client
        self.loop = weakref.ref(loop)
        self.closing = _Closing()
        self.closer: AsyncGenerator[None, None] | None = None


_Slots = weakref.WeakKeyDictionary[_Loop, _Slot[_C]]

# Slots let go by their model (closed, or collected) whose close has not run yet, by id of
# their client: held until their loop closes them. And the tasks closing them (a loop holds
# its tasks weakly).
_detached: PerProcess[dict[int, _Slot[Any]]] = PerProcess(dict)
_detached_lock = ProcessLock()
_closing_tasks: set[asyncio.Task[None]] = set()


class PerLoop(Generic[_C]):
    """A client made by ``factory`` once for each event loop that asks for one (:meth:`get`),
    closed (its async ``close()``) on that loop when the loop shuts down, or when
    :meth:`aclose` / :meth:`close` is called, or this object is collected. ``first``: a client
    already made and not yet used, given to the first loop that asks."""

    def __init__(self, factory: Callable[[], _C], *, first: _C | None = None) -> None:
        self._factory = factory
        self._slots: PerProcess[_Slots[_C]] = PerProcess(weakref.WeakKeyDictionary)
        self._lock = ProcessLock()
        self._spare = first
        self._spare_process = current_process()
        let_go = weakref.finalize(self, _let_go, self._slots, self._lock)
        let_go.atexit = False  # at exit the loops' own shutdown closes the clients, awaited

    def get(self) -> _C:
        """The running loop's client, made on the first request in that loop. Outside a
        running loop: ``RuntimeError``."""
        loop = asyncio.get_running_loop()
        slot = self._slots.get().get(loop)
        if slot is not None:
            return slot.client
        return self._add(loop)

    def made_for(self, loop: _Loop) -> _C | None:
        """The client of ``loop`` in this process, if it was made."""
        slots = self._slots.made()
        slot = slots.get(loop) if slots is not None else None
        return slot.client if slot is not None else None

    def _add(self, loop: _Loop) -> _C:
        with self._lock:
            slots = self._slots.get()
            slot = slots.get(loop)
            if slot is not None:
                return slot.client
            for closed in [other for other in slots if other.is_closed()]:
                del slots[closed]  # closed without shutting down: nothing can close it now
            _prune_detached()
            client = self._take_spare()
            slot = _Slot(client if client is not None else self._factory(), loop)
            slot.closer = _closer(slot, slots, self._lock)
            slots[loop] = slot
            return slot.client

    def _take_spare(self) -> _C | None:
        """The first client, unless a loop took it (call with the lock held)."""
        spare, self._spare = self._spare, None
        if spare is not None and self._spare_process != current_process():
            return None  # the parent's; it has no connections, and is left unused
        return spare

    def _take_all(self) -> list[_Slot[_C]]:
        with self._lock:
            slots = self._slots.made()
            if not slots:
                return []
            taken = list(slots.values())
            slots.clear()
            return taken

    async def aclose(self) -> None:
        """Close the running loop's client now, and schedule the others' on their loops. A
        later :meth:`get` makes a new client."""
        loop = asyncio.get_running_loop()
        with self._lock:
            spare = self._take_spare()
        mine = None
        for slot in self._take_all():
            if slot.loop() is loop:
                mine = slot
            else:
                _detach(slot)
        if mine is not None:
            if mine.closer is not None:
                with contextlib.suppress(RuntimeError):  # its loop's shutdown is closing it
                    await mine.closer.aclose()
            else:
                await _close_slot(mine.client, mine.closing)
        if spare is not None:
            await _close(spare)

    def close(self) -> None:
        """From synchronous code: close the client of this thread's sync-API loop now (the
        loop ``ChatClient.call()`` runs on), and schedule the others' on their loops."""
        own = thread_loop()
        if own is not None and self.made_for(own) is not None and not _in_running_loop():
            run_sync(self.aclose(), sync_name="close()", async_name="aclose()")
            return
        with self._lock:
            self._spare = None  # never used: it holds no connection
        for slot in self._take_all():
            _detach(slot)


def _let_go(slots: PerProcess[_Slots[_C]], lock: ProcessLock) -> None:
    """A collected :class:`PerLoop`'s clients (of this process), each closed on its loop."""
    with lock:
        held = slots.made()
        taken = list(held.values()) if held else []
        if held:
            held.clear()
    for slot in taken:
        _detach(slot)


def _detach(slot: _Slot[_C]) -> None:
    """Keep ``slot`` until its loop has closed it, and ask the loop to do so soon."""
    loop = slot.loop()
    if loop is None or loop.is_closed():
        return  # nothing can close it any more
    with _detached_lock:
        _detached.get()[id(slot.client)] = slot
    try:
        loop.call_soon_threadsafe(_start_close, slot)
    except RuntimeError:  # closed meanwhile
        _forget(slot.client)


def _start_close(slot: _Slot[_C]) -> None:
    """On the slot's loop: close its client (not through its closer, which the loop's shutdown
    may be closing at the same time)."""
    task = asyncio.get_running_loop().create_task(_close_detached(slot))
    _closing_tasks.add(task)
    task.add_done_callback(_closing_tasks.discard)


async def _close_detached(slot: _Slot[_C]) -> None:
    await _close_slot(slot.client, slot.closing)
    _forget(slot.client)


def _prune_detached() -> None:
    """Drop the detached slots of closed loops: nothing can close them any more."""
    with _detached_lock:
        detached = _detached.made()
        if detached:
            for key, slot in list(detached.items()):
                loop = slot.loop()
                if loop is None or loop.is_closed():
                    del detached[key]


def _closer(
    slot: _Slot[_C], slots: _Slots[_C], lock: ProcessLock
) -> AsyncGenerator[None, None] | None:
    """The running loop's cue to close the slot's client at its shutdown: an async generator
    suspended at its ``yield`` (started here, synchronously: the loop registers it on this
    first step). It holds the client and its close's progress, not the slot or the model."""
    if sys.get_asyncgen_hooks().finalizer is None:
        return None  # a loop that does not track async generators: aclose() closes it
    closer = _closing(slot.client, slot.closing, weakref.ref(slots), lock)
    with contextlib.suppress(StopIteration):
        closer.__anext__().send(None)
    return closer


async def _closing(
    client: _C, closing: _Closing, slots: weakref.ref[_Slots[_C]], lock: ProcessLock
) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        live = slots()
        if live is not None:  # on the client's loop: take its slot out of the model's
            loop = asyncio.get_running_loop()
            with lock:
                slot = live.get(loop)
                if slot is not None and slot.client is client:
                    del live[loop]
        _forget(client)
        await _close_slot(client, closing)


def _forget(client: AsyncClient) -> None:
    """Remove ``client``'s slot from the detached ones."""
    with _detached_lock:
        detached = _detached.made()
        if detached is not None:
            detached.pop(id(client), None)


async def _close_slot(client: AsyncClient, closing: _Closing) -> None:
    """Close ``client`` on the running loop (its own), or wait for the close under way."""
    if closing.ended is not None:
        await asyncio.shield(closing.ended)
        return
    closing.ended = asyncio.get_running_loop().create_future()
    try:
        await _close(client)
    finally:
        if not closing.ended.done():
            closing.ended.set_result(None)


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _close(client: AsyncClient) -> None:
    try:
        await client.close()
    except Exception:  # a client that fails to close must not break the loop's shutdown
        logger.debug("closing an async client failed", exc_info=True)


def check_client(
    owner: str,
    parameter: str,
    client: object,
    expected: type | tuple[type, ...],
    expected_name: str,
    *,
    other: type | tuple[type, ...] = (),
    other_hint: str = "",
) -> None:
    """``TypeError`` unless ``client`` (given as ``owner(parameter=...)``) is an ``expected``
    instance. A client of the ``other`` kind (blocking for async, or the reverse) gets
    ``other_hint`` added to the message (where it belongs, or what to pass instead)."""
    if client is None or isinstance(client, expected):
        return
    kind = type(client)
    got = f"{kind.__module__.split('.')[0]}.{kind.__qualname__}"
    message = f"{owner}({parameter}=...) takes an {expected_name}, got {got}"
    if other_hint and isinstance(client, other):
        message += f"; {other_hint}"
    raise TypeError(message)


@dataclasses.dataclass(frozen=True, slots=True)
class ClientKind:
    """How a model builds its SDK's async client and checks an injected one: the factory,
    the class an injected client must be (the SDK's base class: its Bedrock or Azure variants
    do not subclass the plain client) and how messages name it and the model."""

    owner: str
    new: Callable[..., Any]
    type: type
    name: str


class AsyncClients(Generic[_C]):
    """The async SDK clients of one model: the injected one (checked, used as it is, closed
    by its owner), else one per event loop made from ``settings`` (:class:`PerLoop`).
    ``build_now`` makes the first one at once, so a bad setting fails in the constructor.
    ``blocking_type`` / ``blocking_hint``: the SDK's blocking client class, which a caller
    may pass by mistake, and what the message then says."""

    def __init__(
        self,
        kind: ClientKind,
        settings: Mapping[str, Any],
        client: _C | None,
        *,
        build_now: bool = False,
        blocking_type: type | tuple[type, ...] = (),
        blocking_hint: str = "",
    ) -> None:
        check_client(
            kind.owner,
            "client",
            client,
            kind.type,
            kind.name,
            other=blocking_type,
            other_hint=blocking_hint,
        )
        self._kind = kind
        self._settings = dict(settings)
        self.given = client
        """The injected client, if any."""
        first: _C | None = None
        if build_now and client is None:
            first = self._new()  # a bad setting fails now, not on first use
        known = client or first
        # Not the client itself: a first client must go when its loop is gone.
        self.base_url: str | None = str(known.base_url) if known is not None else None
        self._clients: PerLoop[_C] = PerLoop(self._new, first=first)

    def _new(self) -> _C:
        client: _C = self._kind.new(**self._settings)
        return client

    def get(self) -> _C:
        """The injected client, else the running event loop's own."""
        if self.given is not None:
            return self.given
        return self._clients.get()

    def made_for(self, loop: _Loop) -> _C | None:
        return self._clients.made_for(loop)

    async def aclose(self) -> None:
        """Close the clients made here (an injected one is its owner's): the running loop's
        now, those of other event loops on their own loops (when each runs next or shuts
        down). Later requests make new ones."""
        await self._clients.aclose()

    def close(self) -> None:
        """:meth:`aclose` from synchronous code: the client of the loop the sync API runs on
        in this thread (``ChatClient.call()``) is closed now, those of other loops on their
        own loops."""
        self._clients.close()
