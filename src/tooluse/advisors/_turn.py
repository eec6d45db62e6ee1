"""The typed state of one turn, next to the caller's ``context`` dict.

What goes into the tool loop (``request.resume``: a :class:`LoopResume`), what comes out of
it (``request.turn.outcome``: a :class:`LoopOutcome`, holding a :class:`LoopPause` when calls
wait for approval), and what an advisor keeps for itself during the turn (``request.turn``, a
:class:`Turn`: one slot per :class:`TurnKey`). The request ``context`` is left to the
caller's data (a conversation id, a tenant), which advisors read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from tooluse.calling import Decision, PendingToolCall
from tooluse.messages import ChatResponse, Message, Usage

__all__ = ["LoopOutcome", "LoopPause", "LoopResume", "Turn", "TurnKey"]

T = TypeVar("T")


class TurnKey(Generic[T]):
    """The key of an advisor's own per-turn state in a :class:`Turn`, typed by the value it
    holds: ``SEEN = TurnKey[set[str]]("my advisor: seen")``, then ``request.turn[SEEN]``.
    A slot is told apart by the key object, never by its name (which is for messages), so
    two advisors cannot clash by choosing one string."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"TurnKey({self.name!r})"


class Turn:
    """What one request's advisors share besides the caller's context: ``outcome``, the tool
    loop's :class:`LoopOutcome` once the loop ended (``None`` before, or without a loop), and
    each advisor's own state, a value per :class:`TurnKey`.

    One per request: ``request.replace(...)`` keeps it, so an advisor outside the loop reads
    the outcome from its own request once the chain returned (a call) or ended (a stream),
    and a hook of the loop finds in a later round what an earlier one left. A follow-up
    request (a resumed run, a corrective retry) starts with a new one. It lives in memory
    only (a paused run's ``RunState`` does not carry it).
    """

    __slots__ = ("_values", "outcome")

    def __init__(self) -> None:
        self.outcome: LoopOutcome | None = None
        self._values: dict[TurnKey[Any], Any] = {}

    def __getitem__(self, key: TurnKey[T]) -> T:
        try:
            value: T = self._values[key]
        except KeyError:
            raise KeyError(f"The turn holds nothing under {key!r}") from None
        return value

    def __setitem__(self, key: TurnKey[T], value: T) -> None:
        self._values[key] = value

    def get(self, key: TurnKey[T]) -> T | None:
        value: T | None = self._values.get(key)
        return value

    def pop(self, key: TurnKey[T]) -> T | None:
        value: T | None = self._values.pop(key, None)
        return value

    def __repr__(self) -> str:
        names = ", ".join(key.name for key in self._values)
        return f"Turn(outcome={self.outcome!r:.80}, state=[{names}])"


@dataclasses.dataclass(frozen=True, slots=True)
class LoopResume:
    """How to continue a paused run (``request.resume``): its history, a decision per held
    call id, its usage. The tool loop takes it: advisors inside the loop get requests
    without it; those outside see it and can skip work done for the paused request."""

    history: tuple[Message, ...]
    decisions: Mapping[str, Decision]
    usage: Usage | None


@dataclasses.dataclass(frozen=True, slots=True)
class LoopPause:
    """Where a run stopped for approval: the history up to the held round (its assistant
    message, then the responses of the calls that ran), the held calls, the usage so far."""

    history: tuple[Message, ...]
    pending_tool_calls: tuple[PendingToolCall, ...]
    usage: Usage | None


@dataclasses.dataclass(frozen=True, slots=True)
class LoopOutcome:
    """How the tool loop ended (``request.turn.outcome``, set before the loop returns its
    final response or yields its last chunk).

    - ``history``: the turn as the loop saw it, the prompt then every tool call and result
      (the answer not included).
    - ``rounds``: the messages this request added to the conversation, its tool rounds after
      the prompt (for a resumed run, from the completed paused round on), a round held for
      approval recorded whole (:func:`~tooluse.history.held_round_record`). A memory outside
      the loop stores them for a turn that paused, so what ran is remembered even if the run
      is never resumed.
    - ``answer``: the response that ended the loop, usage summed over the rounds (for a
      stream, whose chunks merge the text of every round, the last round's own response).
    - ``pause``: where the run stopped when calls wait for approval, else ``None``.
    """

    history: tuple[Message, ...]
    rounds: tuple[Message, ...]
    answer: ChatResponse
    pause: LoopPause | None = None
