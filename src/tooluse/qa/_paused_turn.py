"""What a conversation's memory keeps of a turn that stopped without an answer after tools
ran: the question, and in the answer's place a plain-text account of what the tools fetched
and which calls did not run.

Tool calls and results cannot be kept as such: the answer stage has no tools, and providers
reject a history with tool traffic from a request without tool definitions (Anthropic's
does). Text is what both stages read. The messages carry the turn's id (``paused_turn``),
so the resumed turn replaces them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from tooluse.calling import PendingToolCall
from tooluse.messages import AssistantMessage, Message, ToolCall, UserMessage
from tooluse.qa._augmenter import format_records
from tooluse.qa._ledger import FetchRecord

__all__ = [
    "PAUSED_TURN_NOTE",
    "RESUMING_TURN_NOTE",
    "STOPPED_TURN_NOTE",
    "UNKNOWN_OUTCOME",
    "turn_record",
]

# Read by later turns only (a resumed turn leaves its record out), and a later turn withdraws
# the approval: so "was not given" is true whenever it is read.
PAUSED_TURN_NOTE: Final = (
    "This question was not answered: a step needed a person's approval, which was not given "
    "before the conversation went on, so that step was not run. It runs only if it is asked "
    "for again and approved."
)
STOPPED_TURN_NOTE: Final = (
    "This question was not answered: after the decision on the steps that needed approval, "
    "the run stopped before its answer."
)
# Written before the approved calls run, and replaced by the turn once it ends: what memory
# says if the process dies meanwhile (a crash, kill -9), when nobody knows what ran.
RESUMING_TURN_NOTE: Final = (
    "This question was not answered: the steps that needed approval were decided and the "
    "run went on, but it ended before its answer was recorded."
)
UNKNOWN_OUTCOME: Final = "Outcome unknown: it may have run:"


def turn_record(
    question: str,
    turn_id: str,
    note: str,
    fetched: Sequence[FetchRecord],
    held: Sequence[PendingToolCall] = (),
    approved: Sequence[ToolCall] = (),
) -> list[Message]:
    """The question and the account of its turn (``note``, the calls ``held`` that did not
    run and the calls ``approved`` that may have, with their arguments, and the data
    ``fetched``), both marked with ``turn_id``; the account lists the held calls' ids (its
    ``held_for_approval``)."""
    lines = [note]
    lines += [f"Not run: {call.name} {call.arguments}" for call in held]
    lines += [f"{UNKNOWN_OUTCOME} {call.name} {call.arguments}" for call in approved]
    if fetched:
        lines += [
            "Data fetched for the question before it stopped (it may have changed since):",
            "---------------------",
            format_records(fetched),
            "---------------------",
        ]
    held_ids = tuple(call.id for call in held)
    return [
        UserMessage(text=question, paused_turn=turn_id),
        AssistantMessage(text="\n".join(lines), paused_turn=turn_id, held_for_approval=held_ids),
    ]
