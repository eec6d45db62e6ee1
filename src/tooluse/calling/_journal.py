"""The idempotency journal: a write tool's call, by its idempotency key, runs once.

A tool declares a key (``@tool(idempotency_key=True)``: all its arguments; or a function of
the arguments and the tool context, e.g. an order number and the user). Before the call
runs, the manager claims the key in the journal (a ``started`` entry, committed before the
tool is called); after it, records the result (``done``). A later call with the same key
within the retention window, from the model, a retry, a resumed run or a process started
after a crash, does not run the tool:

- ``done``: the stored result is returned, marked as a repeat;
- ``started``: a call with this key began and recorded no result. It is still running, or
  its process stopped while it ran (a crash between executing and recording): whether it
  acted is unknown, so it is not run again; the model is told so, and an operator clears
  the entry (:meth:`ToolCallJournal.forget`) once they have checked.

A call that raises (the tool refused, or failed before acting) releases its key, so a
corrected call may run; one that timed out keeps it ``started`` (it may still act).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, Protocol, runtime_checkable

from tooluse.tools import ToolCallback, ToolContext

__all__ = [
    "DEFAULT_JOURNAL_RETENTION",
    "JournalEntry",
    "ToolCallJournal",
    "idempotency_key_of",
]

DEFAULT_JOURNAL_RETENTION: Final = 7 * 24 * 3600.0
"""Seconds a journal entry answers repeats: a week covers a model's repeats, a client's
retries and a run resumed after a weekend; then a call with the key runs again."""

JournalState = Literal["started", "done"]


@dataclasses.dataclass(frozen=True, slots=True)
class JournalEntry:
    """One key's record: which tool and call claimed it and when, its state, and for a
    ``done`` entry the result text the model read."""

    key: str
    tool: str
    call_id: str
    state: JournalState
    started_at: float
    result: str | None = None
    finished_at: float | None = None


@runtime_checkable
class ToolCallJournal(Protocol):
    """Where idempotency keys are claimed and results kept; SQLite by default
    (:class:`SqliteToolCallJournal`), PostgreSQL for several workers on several hosts
    (:class:`PostgresToolCallJournal`). ``begin`` must be atomic across every process
    sharing the journal: of two calls claiming one key at once, exactly one gets ``None``."""

    async def begin(self, key: str, *, tool: str, call_id: str) -> JournalEntry | None:
        """Claim ``key`` for a call about to run (``None``), or the live entry that holds it."""
        ...

    async def finish(self, key: str, result: str) -> None:
        """Record the result of the call that claimed ``key``."""
        ...

    async def release(self, key: str) -> None:
        """Give up ``key`` (its call raised before acting), so a later call may run."""
        ...

    async def entry(self, key: str) -> JournalEntry | None:
        """The live entry of ``key``, if any (e.g. to see calls whose outcome is unknown)."""
        ...

    async def forget(self, key: str) -> bool:
        """Delete ``key``'s entry (an operator cleared an unknown outcome); whether one was."""
        ...


def idempotency_key_of(callback: ToolCallback, arguments: str, context: ToolContext) -> str | None:
    """The journal key of a call to ``callback`` (``None``: the tool declares none): a hash of
    the tool's name and its declared key, all the arguments as canonical JSON for ``True``.
    Raises ``ValueError`` when the key function does not return a non-empty string."""
    declared = callback.metadata.idempotency_key
    if declared is None:
        return None
    name = callback.definition.name
    try:
        parsed: Any = json.loads(arguments)
    except ValueError:
        parsed = arguments  # the tool refuses it; the same text is still the same call
    if declared is True:
        key = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    else:
        values: Mapping[str, Any] = parsed if isinstance(parsed, dict) else {}
        key = _declared_key(declared, values, context, name)
    # (surrogatepass: a model's lone "\ud800" escape is still one key, not an error)
    return hashlib.sha256(f"{name}\x00{key}".encode("utf-8", "surrogatepass")).hexdigest()


def _declared_key(
    declared: Callable[[Mapping[str, Any], ToolContext], str],
    arguments: Mapping[str, Any],
    context: ToolContext,
    name: str,
) -> str:
    key = declared(arguments, context)
    if not isinstance(key, str) or not key:
        raise ValueError(
            f"The idempotency_key function of tool '{name}' returned {key!r}; it must return a "
            "non-empty string"
        )
    return key


def repeat_text(entry: JournalEntry) -> tuple[str, bool]:
    """What the model reads for a repeated call: the stored result marked as a repeat (not an
    error), or, for a call whose outcome is unknown, an error saying it was not run again."""
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(entry.started_at))
    if entry.state == "done" and entry.result is not None:
        note = (
            f"[Not run again: a call of '{entry.tool}' with the same idempotency key ran at "
            f"{started}; this is its result.]"
        )
        return f"{note}\n{entry.result}", False
    return (
        f"Tool '{entry.tool}' was not run: a call with the same idempotency key started at "
        f"{started} and recorded no result (it is still running, or was cut off). Whether it "
        "took effect is unknown; do not retry it. Tell the user a person must check.",
        True,
    )
