"""``QaPause``: a pipeline run stopped in its router stage until a human decides."""

from __future__ import annotations

import dataclasses
import json
from typing import ClassVar

import pydantic

from tooluse._json_state import dump_state, load_state
from tooluse.calling import PendingToolCall
from tooluse.client import RunState
from tooluse.messages import Message, StoredMessage
from tooluse.qa._ledger import FetchRecord

__all__ = ["QaPause", "StalePauseError"]

_MESSAGES: pydantic.TypeAdapter[tuple[Message, ...]] = pydantic.TypeAdapter(
    tuple[StoredMessage, ...]
)
# Version 1 (no turn_id) is still read: a service upgraded with runs pending keeps them.
_PAUSE_KEYS_1 = frozenset(
    {"version", "question", "conversation_id", "history", "router_state", "fetched"}
)
_PAUSE_KEYS = _PAUSE_KEYS_1 | {"turn_id"}


class StalePauseError(RuntimeError):
    """A paused run that can no longer be resumed: its conversation went on (a later
    question was asked) or no longer holds the paused turn (resumed already, cleared)."""


@dataclasses.dataclass(frozen=True, slots=True)
class QaPause:
    """Everything needed to continue a paused run, in a form that survives JSON (store it,
    restart, resume): the question and its conversation (id, or the history given with the
    question), the router's :class:`RunState` and what the tools fetched before the pause.

    ``turn_id`` marks the turn's record in the conversation's memory
    (their ``paused_turn``); ``None`` in a pause written by tooluse before
    version 2 of this JSON, which left no record."""

    VERSION: ClassVar[int] = 2

    question: str
    conversation_id: str | None
    history: tuple[Message, ...]
    router_state: RunState
    fetched: tuple[FetchRecord, ...]
    turn_id: str | None = None

    @property
    def pending_tool_calls(self) -> tuple[PendingToolCall, ...]:
        return self.router_state.pending_tool_calls

    def to_json(self) -> str:
        data = {
            "version": self.VERSION,
            "question": self.question,
            "conversation_id": self.conversation_id,
            "history": _MESSAGES.dump_python(self.history, mode="json"),
            "router_state": json.loads(self.router_state.to_json()),
            "fetched": [record.to_dict() for record in self.fetched],
            "turn_id": self.turn_id,
        }
        return dump_state(data)

    @classmethod
    def from_json(cls, text: str | bytes) -> QaPause:
        """The pause :meth:`to_json` wrote; ``ValueError`` saying what is wrong otherwise."""
        data = load_state(
            text, kind="QaPause", version=cls.VERSION, keys=_PAUSE_KEYS, older={1: _PAUSE_KEYS_1}
        )
        if not isinstance(data["question"], str):
            raise ValueError("QaPause JSON 'question' must be a string")
        if data["conversation_id"] is not None and not isinstance(data["conversation_id"], str):
            raise ValueError("QaPause JSON 'conversation_id' must be a string or null")
        turn_id = data.get("turn_id")
        if turn_id is not None and not isinstance(turn_id, str):
            raise ValueError("QaPause JSON 'turn_id' must be a string or null")
        if not isinstance(data["fetched"], list):
            raise ValueError("QaPause JSON 'fetched' must be a list")
        try:
            history = _MESSAGES.validate_python(data["history"])
        except pydantic.ValidationError as exc:
            raise ValueError(f"QaPause JSON holds an invalid history: {exc}") from exc
        return cls(
            question=data["question"],
            conversation_id=data["conversation_id"],
            history=history,
            router_state=RunState.from_json(json.dumps(data["router_state"])),
            fetched=tuple(FetchRecord.from_dict(item) for item in data["fetched"]),
            turn_id=turn_id,
        )
