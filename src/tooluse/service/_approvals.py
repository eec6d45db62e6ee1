"""Runs paused for approval, stored in SQLite so a decision can come in a later request or
after a restart."""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from typing import Literal

from tooluse._sqlite import SqliteStore, write_transaction
from tooluse.qa import QaPause

__all__ = ["ApprovalConflict", "ApprovalStore", "StoredApproval", "UnknownApproval"]

SCHEMA_VERSION = 1
_SCHEMA = (
    """CREATE TABLE qa_approval (
        id TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        status TEXT NOT NULL,
        pause TEXT NOT NULL,
        error TEXT
    )""",
)

ApprovalStatus = Literal["pending", "resuming", "done", "failed"]


class UnknownApproval(KeyError):
    """No paused run has this id."""


class ApprovalConflict(RuntimeError):
    """The paused run is no longer waiting for a decision (it was resumed already)."""


@dataclasses.dataclass(frozen=True, slots=True)
class StoredApproval:
    """A paused run: ``pending`` until a decision claims it, then ``resuming``, then
    ``done`` or ``failed`` (with the error)."""

    id: str
    created_at: float
    status: ApprovalStatus
    pause: QaPause
    error: str | None


class ApprovalStore(SqliteStore):
    """Paused runs (:class:`QaPause` JSON) by id, in a SQLite file (WAL, shared with memory
    and the knowledge base). :meth:`claim` moves a run from ``pending`` to ``resuming`` in one
    transaction, so a run is resumed once even when two decisions race: an approved call
    never runs twice. A run whose resumption was cut off by a crash stays ``resuming``; it is
    not retried, because its approved calls may have run."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        super().__init__(
            path,
            component="qa_approval",
            version=SCHEMA_VERSION,
            statements=_SCHEMA,
            busy_timeout=busy_timeout,
            synchronous="NORMAL",
        )

    def save(self, pause: QaPause) -> str:
        """Store a paused run; its new id."""
        approval_id = uuid.uuid4().hex
        text = pause.to_json()
        with self._lock, write_transaction(self._connection) as connection:
            connection.execute(
                "INSERT INTO qa_approval (id, created_at, status, pause) VALUES (?, ?, ?, ?)",
                (approval_id, time.time(), "pending", text),
            )
        return approval_id

    def get(self, approval_id: str) -> StoredApproval:
        with self._lock:
            row = self._connection.execute(
                "SELECT id, created_at, status, pause, error FROM qa_approval WHERE id = ?",
                (approval_id,),
            ).fetchone()
        if row is None:
            raise UnknownApproval(f"No paused run has the approval id {approval_id!r}")
        return StoredApproval(row[0], row[1], row[2], QaPause.from_json(row[3]), row[4])

    def pending(self, conversation_id: str) -> list[StoredApproval]:
        """The conversation's runs still waiting for a decision, oldest first (a reloaded
        page shows them again)."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT id, created_at, status, pause, error FROM qa_approval "
                "WHERE status = 'pending' AND json_extract(pause, '$.conversation_id') = ? "
                "ORDER BY created_at",
                (conversation_id,),
            ).fetchall()
        return [StoredApproval(r[0], r[1], r[2], QaPause.from_json(r[3]), r[4]) for r in rows]

    def claim(self, approval_id: str) -> QaPause:
        """Take a pending run for resumption (``pending`` -> ``resuming``)."""
        with self._lock, write_transaction(self._connection) as connection:
            row = connection.execute(
                "SELECT status, pause FROM qa_approval WHERE id = ?", (approval_id,)
            ).fetchone()
            if row is None:
                raise UnknownApproval(f"No paused run has the approval id {approval_id!r}")
            if row[0] != "pending":
                raise ApprovalConflict(
                    f"The run {approval_id!r} is {row[0]}, not waiting for a decision: a run "
                    "is resumed once"
                )
            connection.execute(
                "UPDATE qa_approval SET status = 'resuming' WHERE id = ?", (approval_id,)
            )
        return QaPause.from_json(row[1])

    def finish(self, approval_id: str, error: str | None = None) -> None:
        """Record how the resumption ended (``done``, or ``failed`` with ``error``)."""
        status = "done" if error is None else "failed"
        with self._lock, write_transaction(self._connection) as connection:
            connection.execute(
                "UPDATE qa_approval SET status = ?, error = ? WHERE id = ?",
                (status, error, approval_id),
            )
