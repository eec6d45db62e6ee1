"""The thread pool sync tools run in.

Not the event loop's default executor: that one has ``min(32, CPUs + 4)`` threads (6 on a
2-CPU machine), so a round of 8 sync tools that each wait on I/O would take two waves. Tool
calls are mostly I/O-bound, so the pool is wider; threads are started only when needed, in
each process (a forked child starts its own).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from tooluse._fork import ThreadPool

MAX_TOOL_THREADS = 64
_T = TypeVar("_T")
_TOOL_THREADS = ThreadPool(MAX_TOOL_THREADS, "tooluse-tool")


async def run_in_tool_thread(function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``function(*args, **kwargs)`` in the tool pool, with the caller's context variables
    (tracing spans, request state), like ``asyncio.to_thread``. A ``StopIteration`` it raises
    comes back as ``RuntimeError``, as from a coroutine."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, _stop_iteration_as_error, function, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_TOOL_THREADS, call)


def _stop_iteration_as_error(function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    # An asyncio future refuses a StopIteration (a bare next() in a tool), and the call
    # awaiting it then waits forever.
    try:
        return function(*args, **kwargs)
    except StopIteration as exc:
        name = getattr(function, "__name__", type(function).__name__)
        raise RuntimeError(f"{name}() raised StopIteration") from exc
