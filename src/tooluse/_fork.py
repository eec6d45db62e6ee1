"""State that a forked child must not inherit: threads, locks, SQLite connections.

A child of ``os.fork()`` (a pre-fork server such as ``gunicorn --preload``, a multiprocessing
pool with the fork start method) gets a copy of every object but only the thread that forked.
A ``ThreadPoolExecutor`` copied that way has no workers and believes it has, so work submitted
in the child waits forever; a lock that another thread held at the fork stays held; an SQLite
connection must not be used by two processes (its file locks belong to the process that
opened it). :class:`PerProcess` makes such a value again in each process, on first use.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

__all__ = ["ForkGate", "PerProcess", "ProcessLock", "ThreadPool", "current_process", "run_into"]

_T = TypeVar("_T")

# This process's id, kept here so the hot paths (every search takes a few locks) need no
# getpid system call; a forked child sets its own before anything else runs in it.
_process = os.getpid()


def _forked() -> None:
    global _process
    _process = os.getpid()


if hasattr(os, "register_at_fork"):  # Windows cannot fork
    os.register_at_fork(after_in_child=_forked)


def current_process() -> int:
    """This process's id (``os.getpid()`` without the system call)."""
    return _process


class PerProcess(Generic[_T]):
    """A value made by ``factory`` once in each process, on first use there.

    The parent's value stays referenced in the child, unused: closing a copied SQLite
    connection there could touch the parent's database files. Two threads making the value at
    once in a process each call ``factory``; the first stored wins and the other value is
    dropped unused. ``shared=True``: one value for every process (an in-memory database,
    which the child gets its own copy of)."""

    def __init__(self, factory: Callable[[], _T], *, shared: bool = False) -> None:
        self._factory = factory
        self._shared = shared
        self._values: dict[int, _T] = {}

    def get(self) -> _T:
        value = self.made()
        if value is None:
            value = self._values.setdefault(self._key(), self._factory())
        return value

    def made(self) -> _T | None:
        """This process's value if it was made, else ``None`` (nothing is made)."""
        return self._values.get(self._key())

    def _key(self) -> int:
        return 0 if self._shared else _process


class ProcessLock:
    """A ``threading.Lock`` per process, for ``with lock:`` blocks. A plain lock that another
    thread held at the fork would stay held in the child forever."""

    __slots__ = ("_locks",)

    def __init__(self) -> None:
        self._locks = PerProcess(threading.Lock)

    def __enter__(self) -> None:
        self._locks.get().acquire()

    def __exit__(self, *exc_info: object) -> None:
        self._locks.get().release()


class ForkGate:
    """Sections of code that ``os.fork()`` waits out, for ``with gate:`` blocks.

    A library that keeps a global mutex (SQLite's allocator, for one) can be inside it on
    another thread at the fork; the child inherits the mutex locked and hangs on its first
    call. Calls into such a library made inside the gate never overlap a fork: the fork waits
    until no thread is inside, and threads arriving meanwhile wait until it is done. A thread
    already inside enters again freely (the fork waits for its outer section anyway), and a
    fork from inside a section does not wait for itself. Make one per library, at module
    level: it registers fork hooks that cannot be removed."""

    def __init__(self) -> None:
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(
                before=self._close, after_in_parent=self._open, after_in_child=self._reset
            )

    def _reset(self) -> None:
        # In a child, only the forking thread lives on: its own depth is the whole count.
        depth = getattr(getattr(self, "_local", None), "depth", 0)
        self._condition = threading.Condition(threading.Lock())
        self._local = threading.local()
        self._local.depth = depth
        self._inside = depth
        self._forks = 0  # forks waiting or under way (two threads may fork at once)

    def __enter__(self) -> None:
        depth = getattr(self._local, "depth", 0)
        with self._condition:
            if depth == 0:
                while self._forks:
                    self._condition.wait()
            self._inside += 1
        self._local.depth = depth + 1

    def __exit__(self, *exc_info: object) -> None:
        self._local.depth -= 1
        with self._condition:
            self._inside -= 1
            if self._inside == 0:
                self._condition.notify_all()

    def _close(self) -> None:
        own = getattr(self._local, "depth", 0)
        with self._condition:
            self._forks += 1
            while self._inside > own:
                self._condition.wait()

    def _open(self) -> None:
        with self._condition:
            self._forks -= 1
            self._condition.notify_all()


class ThreadPool(Executor):
    """A ``ThreadPoolExecutor`` per process (its threads start on demand)."""

    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self._executors = PerProcess(
            lambda: ThreadPoolExecutor(max_workers, thread_name_prefix=thread_name_prefix)
        )

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> Future[_T]:
        return self._executors.get().submit(fn, *args, **kwargs)


def run_into(future: Future[_T], function: Callable[[], _T]) -> None:
    """Run ``function`` and settle ``future`` with its result or its exception."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = function()
    except BaseException as exc:
        future.set_exception(exc)
    else:
        future.set_result(result)
