"""What the page showed of each turn besides its question and answer (its tool calls and
results, its route, its sources), stored in SQLite or PostgreSQL so that a reloaded page
shows it again, from any worker.

The conversation's memory keeps only the question and the answer: it is what the model
reads, and the router reads it but never writes it. These records are for display only, and
the model never reads them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from typing import Any, Final

from tooluse._tables import Location, PostgresTables, Schema, open_tables, storable_text
from tooluse.qa import DoneEvent, QaEvent, RouteEvent, ToolCallEvent, ToolResultEvent

__all__ = [
    "DEFAULT_TURN_DISPLAY_RETENTION",
    "MAX_SHOWN_RESULT_CHARS",
    "MAX_TOOL_EVENTS",
    "StoredTurnDisplay",
    "TurnDisplay",
    "TurnDisplayStore",
]

logger = logging.getLogger("tooluse.service")

# seq: the order the turns began in. turn_id: the id of a turn that paused for approval,
# which its resumed run adds its events under (NULL for a turn that never paused).
_BY_CONVERSATION = (
    "CREATE INDEX qa_turn_display_by_conversation ON qa_turn_display (conversation_id, seq)"
)
_TABLE = """CREATE TABLE qa_turn_display (
    seq {serial},
    conversation_id TEXT NOT NULL,
    turn_id TEXT UNIQUE,
    question TEXT NOT NULL,
    updated_at {real} NOT NULL,
    events TEXT NOT NULL
)"""
_SCHEMA = Schema(
    component="qa_turn_display",
    sqlite=(
        _TABLE.format(serial="INTEGER PRIMARY KEY AUTOINCREMENT", real="REAL"),
        _BY_CONVERSATION,
    ),
    sqlite_version=1,
    postgres=(
        (
            _TABLE.format(
                serial="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", real="DOUBLE PRECISION"
            ),
            _BY_CONVERSATION,
        ),
    ),
)

DEFAULT_TURN_DISPLAY_RETENTION: Final = 30 * 24 * 3600.0
"""Seconds a turn's display record is kept after its turn last ran: a month. After that a
reloaded page shows the turn as its question and answer."""

MAX_TOOL_EVENTS: Final = 100
"""Tool calls and results kept per turn; later ones are counted, not kept."""

MAX_SHOWN_RESULT_CHARS: Final = 4000
"""Characters kept of each tool result's text (the model had all of it; this is what a
reloaded page shows). Its images are kept whole: the executor's ``max_image_bytes`` bounds
them."""

_INSERT = (
    "INSERT INTO qa_turn_display (conversation_id, turn_id, question, updated_at, events) "
    "VALUES (?, ?, ?, ?, ?)"
)

# A store that stays open deletes the records past their retention at most this often (as
# records are saved, the only thing that adds rows): a scan of the table, not one per turn.
_TIDY_EVERY = 3600.0


class TurnDisplay:
    """The display events of one turn as its stream passes them: ``tool_call``,
    ``tool_result`` (its text cut to :data:`MAX_SHOWN_RESULT_CHARS`), ``route`` and, from
    ``done``, ``sources`` (``{"sources": [...]}``); not the answer, which memory keeps. At
    most :data:`MAX_TOOL_EVENTS` tool events; ``omitted`` counts the rest."""

    __slots__ = ("answered", "events", "omitted", "tool_events")

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.tool_events = 0
        self.omitted = 0
        self.answered = False  # the stream reached done: memory holds the turn

    @property
    def empty(self) -> bool:
        """Nothing to store."""
        return not self.events and not self.omitted

    def add(self, event: QaEvent) -> None:
        if isinstance(event, ToolCallEvent | ToolResultEvent):
            if self.tool_events >= MAX_TOOL_EVENTS:
                self.omitted += 1
                return
            self.tool_events += 1
            data = event.to_dict()
            if isinstance(event, ToolResultEvent):
                data["result"] = _shortened(event.result)
            self.events.append({"event": event.kind, "data": data})
        elif isinstance(event, RouteEvent):
            self.events.append({"event": event.kind, "data": event.to_dict()})
        elif isinstance(event, DoneEvent):
            self.answered = True
            sources = event.to_dict()["sources"]
            self.events.append({"event": "sources", "data": {"sources": sources}})


def _shortened(text: str) -> str:
    if len(text) <= MAX_SHOWN_RESULT_CHARS:
        return text
    cut = len(text) - MAX_SHOWN_RESULT_CHARS
    return f"{text[:MAX_SHOWN_RESULT_CHARS]}… ({cut} more characters, not kept for display)"


@dataclasses.dataclass(frozen=True, slots=True)
class StoredTurnDisplay:
    """A turn's display record: its question, its paused-turn id if it paused, its events
    (as :class:`TurnDisplay` keeps them) in the order they streamed."""

    seq: int
    conversation_id: str
    turn_id: str | None
    question: str
    events: list[dict[str, Any]]


class TurnDisplayStore:
    """Display records of turns, by conversation in the order the turns began, in a SQLite
    file (WAL, shared with memory, the knowledge base and paused runs) or a PostgreSQL
    database (``location`` a ``postgresql://`` URL or a
    :class:`~tooluse.memory.PostgresDatabase`). A record untouched
    for ``retention`` seconds is deleted (when the store opens, then at most hourly as
    records are saved)."""

    def __init__(
        self,
        location: Location,
        *,
        busy_timeout: float = 30.0,
        retention: float = DEFAULT_TURN_DISPLAY_RETENTION,
    ) -> None:
        if not retention > 0:
            raise ValueError(f"retention must be > 0 seconds, got {retention}")
        self._tables = open_tables(location, _SCHEMA, busy_timeout=busy_timeout)
        self._retention = retention
        self._next_tidy = 0.0  # time.monotonic() from which save() tidies up
        self._tidy()

    def close(self) -> None:
        self._tables.close()

    def __enter__(self) -> TurnDisplayStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def save(
        self, conversation_id: str, question: str, turn_id: str | None, display: TurnDisplay
    ) -> None:
        """Store a turn's events. A turn with a ``turn_id`` (it paused) has one record: a
        resumed run's events are added to its paused run's."""
        events = _shown(display)
        now = time.time()
        if turn_id is None:  # a turn that never paused: its one record, in one statement
            with self._tables.write_one() as connection:
                connection.execute(_INSERT, _inserted(conversation_id, question, now, events))
        else:
            self._save_paused(conversation_id, question, turn_id, events, now)
        if self._tidy_due():
            self._tidy()

    async def asave(
        self, conversation_id: str, question: str, turn_id: str | None, display: TurnDisplay
    ) -> None:
        """:meth:`save` from a coroutine: a turn that never paused in one statement (on
        PostgreSQL on the running event loop's connections), the rest in a thread."""
        if turn_id is not None or self._tidy_due():
            await asyncio.to_thread(self.save, conversation_id, question, turn_id, display)
            return
        await self._tables.aexecute_one(
            _INSERT, _inserted(conversation_id, question, time.time(), _shown(display))
        )

    def _tidy_due(self) -> bool:
        return time.monotonic() >= self._next_tidy

    def insertion(
        self, conversation_id: str, question: str, display: TurnDisplay
    ) -> tuple[str, tuple[Any, ...]] | None:
        """The record of a turn that never paused as one statement for PostgreSQL (psycopg's
        placeholders) and its parameters, for a caller that writes it with another write of
        the database (the turn's memory); ``None`` when :meth:`save` must store it (a SQLite
        file; the hourly tidying is due)."""
        if not isinstance(self._tables, PostgresTables) or self._tidy_due():
            return None
        inserted = _inserted(conversation_id, question, time.time(), _shown(display))
        return _INSERT.replace("?", "%s"), inserted

    def _save_paused(
        self,
        conversation_id: str,
        question: str,
        turn_id: str,
        events: list[dict[str, Any]],
        now: float,
    ) -> None:
        with self._tables.write() as connection:
            row = connection.execute(
                "SELECT seq, events FROM qa_turn_display WHERE turn_id = ?" + self._tables.row_lock,
                (turn_id,),
            ).fetchone()
            if row is None:
                connection.execute(
                    _INSERT, _inserted(conversation_id, question, now, events, turn_id)
                )
            else:
                seq, stored = row
                connection.execute(
                    "UPDATE qa_turn_display SET events = ?, updated_at = ? WHERE seq = ?",
                    (json.dumps([*json.loads(stored), *events]), now, seq),
                )

    def recent(self, conversation_id: str, limit: int) -> list[StoredTurnDisplay]:
        """The conversation's last ``limit`` records, oldest first."""
        with self._tables.read() as connection:
            rows = connection.execute(
                "SELECT seq, conversation_id, turn_id, question, events FROM qa_turn_display "
                "WHERE conversation_id = ? ORDER BY seq DESC LIMIT ?",
                (conversation_id, limit),
            ).fetchall()
        return [
            StoredTurnDisplay(seq, conversation, turn_id, question, json.loads(events))
            for seq, conversation, turn_id, question, events in reversed(rows)
        ]

    def delete_old(self) -> int:
        """Delete the records untouched for ``retention`` seconds; how many."""
        with self._tables.write() as connection:
            cursor = connection.execute(
                "DELETE FROM qa_turn_display WHERE updated_at <= ?",
                (time.time() - self._retention,),
            )
        return cursor.rowcount

    def _tidy(self) -> None:
        self._next_tidy = time.monotonic() + _TIDY_EVERY
        deleted = self.delete_old()
        if deleted:
            logger.info(
                "%d turn display record(s) deleted (kept %g seconds)", deleted, self._retention
            )


def _inserted(
    conversation_id: str,
    question: str,
    now: float,
    events: list[dict[str, Any]],
    turn_id: str | None = None,
) -> tuple[Any, ...]:
    """:data:`_INSERT`'s parameters (the question as both engines store any text: a NUL or
    a lone surrogate, which JSON can bring, as an escape)."""
    return conversation_id, turn_id, storable_text(question), now, json.dumps(events)


def _shown(display: TurnDisplay) -> list[dict[str, Any]]:
    """A turn's events as its record keeps them."""
    if not display.omitted:
        return display.events
    # Shown as a tool result of its own, so that the page says what is missing.
    return [*display.events, _omitted_note(display.omitted)]


def _omitted_note(omitted: int) -> dict[str, Any]:
    return {
        "event": "tool_result",
        "data": {
            "id": "",
            "name": f"{omitted} more tool calls and results",
            "result": f"not kept for display: a turn keeps its first {MAX_TOOL_EVENTS}",
            "is_error": False,
            "images": [],
        },
    }
