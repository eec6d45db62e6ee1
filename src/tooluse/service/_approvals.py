"""Runs paused for approval, stored in SQLite or PostgreSQL so a decision can come in a later
request, after a restart, or to another worker."""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from typing import Any, Final, Literal

from tooluse._tables import Location, Schema, open_tables
from tooluse.qa import QaPause

__all__ = [
    "DEFAULT_APPROVAL_EXPIRY",
    "DEFAULT_APPROVAL_RETENTION",
    "GONE",
    "ApprovalConflict",
    "ApprovalGone",
    "ApprovalStore",
    "StoredApproval",
    "UnknownApproval",
]

logger = logging.getLogger("tooluse.service")

# conversation_id: the pause's own (NULL for a run without one), a column of its own so that
# a conversation's runs are found by an index, not by parsing every pause's JSON.
_TABLE = """CREATE TABLE qa_approval (
    id TEXT PRIMARY KEY,
    created_at {real} NOT NULL,
    status TEXT NOT NULL,
    pause TEXT NOT NULL,
    error TEXT,
    conversation_id TEXT
)"""
_BY_CONVERSATION = (
    "CREATE INDEX qa_approval_by_conversation ON qa_approval (conversation_id, status)"
)
_SCHEMA = Schema(
    component="qa_approval",
    sqlite=(_TABLE.format(real="REAL"), _BY_CONVERSATION),
    sqlite_version=2,
    sqlite_upgrades={
        1: (
            "ALTER TABLE qa_approval ADD COLUMN conversation_id TEXT",
            "UPDATE qa_approval SET conversation_id = json_extract(pause, '$.conversation_id')",
            _BY_CONVERSATION,
        )
    },
    postgres=((_TABLE.format(real="DOUBLE PRECISION"), _BY_CONVERSATION),),
)

DEFAULT_APPROVAL_EXPIRY = 3600.0
"""Seconds a paused run waits for a decision. An hour: long enough to come back to the page,
short enough that the data fetched before the pause, which the answer will use, is not
stale, and that an action is not approved long after it was asked for."""

DEFAULT_APPROVAL_RETENTION = 7 * 24 * 3600.0
"""Seconds a run that ended is kept past its ``expires_at`` (by which it had ended): a week to
look up how a decision went; then its row, which holds the whole paused run, is deleted."""

# A store that stays open deletes the runs past their retention at most this often (as runs
# are saved, the only thing that adds rows): a scan of the table, not one per request.
_TIDY_EVERY = 3600.0

ApprovalStatus = Literal["pending", "resuming", "done", "failed", "superseded", "expired"]
GONE: Final = frozenset({"superseded", "expired"})
"""The statuses of runs that ended without a decision."""

# What the error column says of a run that ended without a decision.
_SUPERSEDED = "superseded: a later message in the conversation withdrew the approval"
_EXPIRED = "expired: no decision came within {seconds:g} seconds"


class UnknownApproval(KeyError):
    """No paused run has this id."""


class ApprovalConflict(RuntimeError):
    """The paused run is no longer waiting for a decision (it was resumed already)."""


class ApprovalGone(RuntimeError):
    """The paused run ended without a decision and can no longer get one: a later message in
    its conversation superseded it, or it expired."""

    @classmethod
    def of(cls, approval_id: str, reason: str | None) -> ApprovalGone:
        return cls(f"The run {approval_id!r} can no longer be decided: {reason}; ask again")


@dataclasses.dataclass(frozen=True, slots=True)
class StoredApproval:
    """A paused run: ``pending`` until a decision claims it, then ``resuming``, then
    ``done`` or ``failed`` (with the error); or, without a decision, ``superseded`` (a later
    message in its conversation) or ``expired`` (``expires_at`` passed), with the reason in
    ``error``."""

    id: str
    created_at: float
    expires_at: float
    status: ApprovalStatus
    pause: QaPause
    error: str | None


_WAITING = "SELECT 1 FROM qa_approval WHERE status = 'pending' AND conversation_id = ? LIMIT 1"


class ApprovalStore:
    """Paused runs (:class:`QaPause` JSON) by id, in a SQLite file (WAL, shared with memory
    and the knowledge base) or a PostgreSQL database (``location`` a ``postgresql://`` URL
    or a :class:`~tooluse.memory.PostgresDatabase`), which every worker of a service shares.
    :meth:`claim` moves a run from ``pending`` to ``resuming`` in one transaction, so a run
    is resumed once even when two decisions race, on any workers: an approved call never
    runs twice. A run whose resumption was cut off by a crash stays ``resuming``; it is
    not retried, because its approved calls may have run.

    A run waits ``expire_after`` seconds at most: past that it reads as ``expired`` and
    cannot be claimed (the store marks the overdue runs when it opens and hourly as runs are
    saved, and each one when it is claimed). :meth:`supersede` ends a conversation's waiting
    runs when it goes on.

    A run that ended (``done``, ``failed``, ``superseded``, ``expired``) is deleted
    ``retention`` seconds after its ``expires_at``, by which time it had ended (when the store
    opens, then at most hourly as runs are saved): each row holds the whole paused run.
    Runs ``pending`` or ``resuming`` are kept."""

    def __init__(
        self,
        location: Location,
        *,
        busy_timeout: float = 30.0,
        expire_after: float = DEFAULT_APPROVAL_EXPIRY,
        retention: float = DEFAULT_APPROVAL_RETENTION,
    ) -> None:
        if not expire_after > 0:
            raise ValueError(f"expire_after must be > 0 seconds, got {expire_after}")
        if not retention > 0:
            raise ValueError(f"retention must be > 0 seconds, got {retention}")
        self._tables = open_tables(location, _SCHEMA, busy_timeout=busy_timeout)
        self._expire_after = expire_after
        self._retention = retention
        self._next_tidy = 0.0  # time.monotonic() from which save() tidies up
        self._tidy()

    @property
    def expire_after(self) -> float:
        return self._expire_after

    def close(self) -> None:
        self._tables.close()

    def __enter__(self) -> ApprovalStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def save(self, pause: QaPause) -> StoredApproval:
        """Store a paused run, ``pending`` under a new id."""
        approval_id, created_at = uuid.uuid4().hex, time.time()
        text = pause.to_json()
        with self._tables.write() as connection:
            connection.execute(
                "INSERT INTO qa_approval (id, created_at, status, pause, conversation_id) "
                "VALUES (?, ?, ?, ?, ?)",
                (approval_id, created_at, "pending", text, pause.conversation_id),
            )
        if time.monotonic() >= self._next_tidy:
            self._tidy()
        expires_at = created_at + self._expire_after
        return StoredApproval(approval_id, created_at, expires_at, "pending", pause, None)

    def get(self, approval_id: str) -> StoredApproval:
        with self._tables.read() as connection:
            row = connection.execute(
                "SELECT id, created_at, status, pause, error FROM qa_approval WHERE id = ?",
                (approval_id,),
            ).fetchone()
        if row is None:
            raise UnknownApproval(f"No paused run has the approval id {approval_id!r}")
        return self._stored(row)

    def pending(self, conversation_id: str) -> list[StoredApproval]:
        """The conversation's runs still waiting for a decision, oldest first (a reloaded
        page shows them again)."""
        with self._tables.read() as connection:
            rows = connection.execute(
                "SELECT id, created_at, status, pause, error FROM qa_approval "
                "WHERE status = 'pending' AND created_at > ? "
                "AND conversation_id = ? ORDER BY created_at",
                (time.time() - self._expire_after, conversation_id),
            ).fetchall()
        return [self._stored(row) for row in rows]

    def claim(self, approval_id: str) -> QaPause:
        """Take a pending run for resumption (``pending`` -> ``resuming``):
        :class:`ApprovalConflict` when it was claimed already, :class:`ApprovalGone` when it
        was superseded or expired."""
        with self._tables.write() as connection:
            row = connection.execute(
                "SELECT status, pause, error, created_at FROM qa_approval WHERE id = ?"
                + self._tables.row_lock,
                (approval_id,),
            ).fetchone()
            if row is None:
                raise UnknownApproval(f"No paused run has the approval id {approval_id!r}")
            status, pause, error, created_at = row
            if status == "pending" and created_at <= time.time() - self._expire_after:
                status, error = "expired", self._expired()
                connection.execute(
                    "UPDATE qa_approval SET status = ?, error = ? WHERE id = ?",
                    (status, error, approval_id),
                )
            if status in GONE:
                raise ApprovalGone.of(approval_id, error)
            if status != "pending":
                raise ApprovalConflict(
                    f"The run {approval_id!r} is {status}, not waiting for a decision: a run "
                    "is resumed once"
                )
            connection.execute(
                "UPDATE qa_approval SET status = 'resuming' WHERE id = ?", (approval_id,)
            )
        return QaPause.from_json(pause)

    def supersede(self, conversation_id: str, *, waiting: bool | None = None) -> list[str]:
        """End the conversation's runs still waiting for a decision (``superseded``), as a
        later message in it does; their ids. A run claimed first is not affected.
        ``waiting``: whether :meth:`waiting_query`, made by the caller with another read of
        the database, found one (``None``: read it here)."""
        # Most messages find nothing waiting: a read says so without a write transaction
        # (each request of a conversation asks). Only a turn of the conversation makes a
        # pending run, and its turns run one at a time, so none appears after the read.
        if waiting is None:
            with self._tables.read() as connection:
                waiting = connection.execute(_WAITING, (conversation_id,)).fetchone() is not None
        if not waiting:
            return []
        where = "WHERE status = 'pending' AND conversation_id = ?"
        # Selected, then updated, in one write transaction (no RETURNING: SQLite 3.35+).
        with self._tables.write() as connection:
            rows = connection.execute(
                f"SELECT id FROM qa_approval {where}{self._tables.row_lock}", (conversation_id,)
            ).fetchall()
            connection.execute(
                f"UPDATE qa_approval SET status = 'superseded', error = ? {where}",
                (_SUPERSEDED, conversation_id),
            )
        return [row[0] for row in rows]

    @staticmethod
    def waiting_query(conversation_id: str) -> tuple[str, tuple[str]]:
        """The read :meth:`supersede` starts with (a row if the conversation has a run
        waiting for a decision) in psycopg's placeholders, and its parameters: for a caller
        that sends it with another read of the same PostgreSQL database."""
        return _WAITING.replace("?", "%s"), (conversation_id,)

    def expire_overdue(self) -> int:
        """Mark the runs that waited longer than ``expire_after`` ``expired``; how many."""
        with self._tables.write() as connection:
            cursor = connection.execute(
                "UPDATE qa_approval SET status = 'expired', error = ? "
                "WHERE status = 'pending' AND created_at <= ?",
                (self._expired(), time.time() - self._expire_after),
            )
        return cursor.rowcount

    def delete_ended(self) -> int:
        """Delete the runs that ended (``done``, ``failed``, ``superseded``, ``expired``)
        ``retention`` seconds or more after their ``expires_at``; how many."""
        cutoff = time.time() - self._expire_after - self._retention
        with self._tables.write() as connection:
            cursor = connection.execute(
                "DELETE FROM qa_approval WHERE created_at <= ? "
                "AND status IN ('done', 'failed', 'superseded', 'expired')",
                (cutoff,),
            )
        return cursor.rowcount

    def finish(self, approval_id: str, error: str | None = None) -> None:
        """Record how the resumption ended (``done``, or ``failed`` with ``error``)."""
        status = "done" if error is None else "failed"
        with self._tables.write() as connection:
            connection.execute(
                "UPDATE qa_approval SET status = ?, error = ? WHERE id = ?",
                (status, error, approval_id),
            )

    def _tidy(self) -> None:
        self._next_tidy = time.monotonic() + _TIDY_EVERY
        expired = self.expire_overdue()
        if expired:
            logger.info("%d run(s) paused for approval expired without a decision", expired)
        deleted = self.delete_ended()
        if deleted:
            logger.info(
                "%d ended run(s) paused for approval deleted (kept %g seconds past their expiry)",
                deleted,
                self._retention,
            )

    def _expired(self) -> str:
        return _EXPIRED.format(seconds=self._expire_after)

    def _stored(self, row: tuple[Any, ...]) -> StoredApproval:
        """A row as read: a pending run past its expiry reads as expired (it is marked so
        when claimed, or when a store opens)."""
        approval_id, created_at, status, pause, error = row
        expires_at = created_at + self._expire_after
        if status == "pending" and expires_at <= time.time():
            status, error = "expired", self._expired()
        return StoredApproval(
            approval_id, created_at, expires_at, status, QaPause.from_json(pause), error
        )
