"""``QaPause``: a pipeline run stopped in its router stage until a human decides."""

from __future__ import annotations

import dataclasses
import json
from typing import ClassVar

import pydantic

from tooluse._json_state import dump_state, load_state
from tooluse.calling import PendingToolCall
from tooluse.client import RunState
from tooluse.messages import Message
from tooluse.qa._ledger import FetchRecord

__all__ = ["QaPause"]

_MESSAGES: pydantic.TypeAdapter[tuple[Message, ...]] = pydantic.TypeAdapter(tuple[Message, ...])
_PAUSE_KEYS = frozenset(
    {"version", "question", "conversation_id", "history", "router_state", "fetched"}
)


@dataclasses.dataclass(frozen=True, slots=True)
class QaPause:
    """Everything needed to continue a paused run, in a form that survives JSON (store it,
    restart, resume): the question and its conversation (id, or the history given with the
    question), the router's :class:`RunState` and what the tools fetched before the pause."""

    VERSION: ClassVar[int] = 1

    question: str
    conversation_id: str | None
    history: tuple[Message, ...]
    router_state: RunState
    fetched: tuple[FetchRecord, ...]

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
        }
        return dump_state(data)

    @classmethod
    def from_json(cls, text: str | bytes) -> QaPause:
        """The pause :meth:`to_json` wrote; ``ValueError`` saying what is wrong otherwise."""
        data = load_state(text, kind="QaPause", version=cls.VERSION, keys=_PAUSE_KEYS)
        if not isinstance(data["question"], str):
            raise ValueError("QaPause JSON 'question' must be a string")
        if data["conversation_id"] is not None and not isinstance(data["conversation_id"], str):
            raise ValueError("QaPause JSON 'conversation_id' must be a string or null")
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
        )
