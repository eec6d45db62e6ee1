"""Running the async core from synchronous code.

Each thread keeps one ``asyncio.Runner``: one event loop per thread that lives as long as the
thread, so objects bound to a loop (SDK HTTP clients, the default thread pool) survive from
one sync call to the next, and no loop is created per call. A forked child makes its own: its
copy of the parent's loop shares the parent's epoll set, and the loop's default thread pool
has no threads there (``asyncio.to_thread`` would wait forever).
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import threading
import weakref
from collections.abc import Awaitable
from typing import TypeVar

from tooluse._fork import current_process

__all__ = ["run_sync"]

T = TypeVar("T")

_local = threading.local()
_runners: weakref.WeakKeyDictionary[asyncio.Runner, int] = weakref.WeakKeyDictionary()
# A forked child's copies of its parent's runners: kept, never used or closed (closing would
# shut the parent's default executor down in this process and warn).
_inherited: list[asyncio.Runner] = []


@atexit.register
def _close_runners() -> None:
    process = current_process()
    for runner, owner in list(_runners.items()):
        if owner == process:
            runner.close()


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
    if runner is None or _runners.get(runner) != process:
        if runner is not None:
            _inherited.append(runner)
        runner = asyncio.Runner()
        _local.runner = runner
        _runners[runner] = process
    return runner.run(_await(awaitable))


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable
