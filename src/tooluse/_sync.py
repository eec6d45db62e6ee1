"""Running the async core from synchronous code.

Each thread keeps one ``asyncio.Runner``: one event loop per thread that lives as long as the
thread, so objects bound to a loop (SDK HTTP clients, the default thread pool) survive from
one sync call to the next, and no loop is created per call. A forked child makes its own: its
copy of the parent's loop shares the parent's epoll set, and the loop's default thread pool
has no threads there (``asyncio.to_thread`` would wait forever).

The loops are closed properly (``asyncio.Runner.close()``: pending async generators closed,
which closes the SDK clients made for the loop, see ``tooluse._loop_clients``) at exit, and
the loop of a thread that has ended when another thread starts using the sync API: threads
that come and go (a thread per request) do not leave their loops and connections behind.
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import logging
import threading
import weakref
from collections.abc import Awaitable
from typing import TypeVar

from tooluse._fork import ProcessLock, current_process

__all__ = ["run_sync", "thread_loop"]

T = TypeVar("T")

logger = logging.getLogger(__name__)

_local = threading.local()
# Every thread's runner, with its process and its thread. A forked child keeps its copies of
# its parent's: never used or closed (closing would shut the parent's default executor down
# in this process and warn).
_runners: dict[asyncio.Runner, tuple[int, weakref.ref[threading.Thread]]] = {}
_runners_lock = ProcessLock()


@atexit.register
def _close_runners() -> None:
    process = current_process()
    with _runners_lock:
        mine = [runner for runner, (owner, _) in _runners.items() if owner == process]
    for runner in mine:
        runner.close()


def _close_ended_threads_runners() -> None:
    """Close the runners of this process's threads that have ended, on a helper thread
    (``Runner.close()`` resets the calling thread's event loop)."""
    process = current_process()
    with _runners_lock:
        ended = [
            runner
            for runner, (owner, thread) in _runners.items()
            if owner == process and not _alive(thread)
        ]
        for runner in ended:
            del _runners[runner]
    if ended:
        closer = threading.Thread(
            target=_close_quietly, args=(ended,), name="tooluse-close-loops", daemon=True
        )
        closer.start()
        closer.join()


def _alive(thread: weakref.ref[threading.Thread]) -> bool:
    alive = thread()
    return alive is not None and alive.is_alive()


def _close_quietly(runners: list[asyncio.Runner]) -> None:
    for runner in runners:
        try:
            runner.close()
        except Exception:
            logger.warning("closing the event loop of an ended thread failed", exc_info=True)


def run_sync(awaitable: Awaitable[T], *, sync_name: str, async_name: str) -> T:
    """Run ``awaitable`` to completion on this thread's loop.

    Inside a running event loop this would block the loop, so it raises ``RuntimeError``
    naming the async form to use instead (``sync_name`` / ``async_name`` are for that message).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        if inspect.iscoroutine(awaitable):
            awaitable.close()  # never awaited: close it so Python does not warn about it
        raise RuntimeError(
            f"{sync_name} cannot run inside a running event loop (it would block the loop); "
            f"use `await {async_name}` instead"
        )
    runner: asyncio.Runner | None = getattr(_local, "runner", None)
    process = current_process()
    if runner is None or _owner(runner) != process:
        _close_ended_threads_runners()
        runner = asyncio.Runner()
        _local.runner = runner
        with _runners_lock:
            _runners[runner] = (process, weakref.ref(threading.current_thread()))
    return runner.run(_await(awaitable))


def _owner(runner: asyncio.Runner) -> int | None:
    """The process whose runner it is."""
    owner = _runners.get(runner)
    return owner[0] if owner is not None else None


def thread_loop() -> asyncio.AbstractEventLoop | None:
    """This thread's loop of :func:`run_sync`, if it made one in this process and it is open."""
    runner: asyncio.Runner | None = getattr(_local, "runner", None)
    if runner is None or _owner(runner) != current_process():
        return None
    try:
        loop = runner.get_loop()
    except RuntimeError:  # the runner was closed (at exit)
        return None
    return None if loop.is_closed() else loop


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable
