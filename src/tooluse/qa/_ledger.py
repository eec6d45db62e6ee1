"""``FetchLedger``: what the tools fetched in this turn, recorded by our own callbacks.

The router/answer split decides on a structural signal, not on what the model says: did a
tool return data in this turn? The ledger is that signal. It travels in the router stage's
tool context (so every tool call can record into it) and in the answer stage's request
context (so the retrieval gate and the augmenter can read it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Final

from tooluse._fork import ProcessLock

__all__ = ["LEDGER_KEY", "FetchLedger", "FetchRecord"]

LEDGER_KEY: Final = "_tooluse.qa.fetch_ledger"
"""Tool-context and request-context key of the turn's :class:`FetchLedger`. It starts with
``_`` so that tool sources which forward the tool context (MCP ``_meta``) leave it out."""


@dataclasses.dataclass(frozen=True, slots=True)
class FetchRecord:
    """One successful tool call: the tool's name, the arguments it ran with (JSON text) and
    the result text it returned."""

    tool: str
    arguments: str
    result: str

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FetchRecord:
        fields = ("tool", "arguments", "result")
        if not isinstance(data, Mapping) or set(data) != set(fields):
            raise ValueError(f"a FetchRecord is an object with exactly the keys {fields}: {data!r}")
        wrong = [name for name in fields if not isinstance(data[name], str)]
        if wrong:
            raise ValueError(f"FetchRecord fields {wrong} must be strings: {dict(data)!r}")
        return cls(tool=data["tool"], arguments=data["arguments"], result=data["result"])


class FetchLedger:
    """The data fetched by tools in one turn, in the order the calls were made.

    Thread-safe: synchronous tools of one round run concurrently in worker threads. A call
    takes its place with :meth:`reserve` when it starts and fills it with :meth:`add` when it
    succeeds, so :attr:`records` follow the model's call order, not the order in which the
    calls happened to finish. A call that fails records nothing.
    """

    __slots__ = ("_entries", "_lock", "_next")

    def __init__(self, records: Iterable[FetchRecord] = ()) -> None:
        self._lock = ProcessLock()
        self._entries: list[tuple[int, FetchRecord]] = []
        for record in records:
            if not isinstance(record, FetchRecord):
                raise TypeError(f"FetchLedger holds FetchRecord objects, got {record!r:.100}")
            self._entries.append((len(self._entries), record))
        self._next = len(self._entries)

    @staticmethod
    def of(context: Mapping[str, Any] | None) -> FetchLedger | None:
        """The ledger a tool context or request context carries under :data:`LEDGER_KEY`."""
        if not context:
            return None
        ledger = context.get(LEDGER_KEY)
        if ledger is None or isinstance(ledger, FetchLedger):
            return ledger
        raise TypeError(
            f"The context entry {LEDGER_KEY!r} must be a FetchLedger, got {type(ledger).__name__}"
        )

    def reserve(self) -> int:
        """A position for a call that is starting (pass it to :meth:`add`)."""
        with self._lock:
            position = self._next
            self._next += 1
            return position

    def add(self, tool: str, arguments: str, result: str, *, position: int | None = None) -> None:
        """Record a successful call; ``position`` from :meth:`reserve`, else after the rest."""
        record = FetchRecord(tool, arguments, result)
        with self._lock:
            if position is None:
                position = self._next
                self._next += 1
            self._entries.append((position, record))

    @property
    def records(self) -> tuple[FetchRecord, ...]:
        with self._lock:
            return tuple(record for _, record in sorted(self._entries, key=lambda e: e[0]))

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __repr__(self) -> str:
        return f"FetchLedger({[record.tool for record in self.records]})"
