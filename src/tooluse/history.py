"""Conversation histories: repairing tool-call pairs so that no provider gets a broken one.

Providers reject a history in which a tool result has no call before it, or a tool call is
not answered by the messages right after it. Such histories arise from windowed or
interrupted conversations (a crash mid-tool, a pending approval abandoned, a window edge),
so the loop runs :func:`repair_tool_pairs` before each model request.

A round paused for approval is recorded whole (:func:`held_round_record`): the results of
the calls that ran and, for each held call, a result saying it has not run. A conversation
abandoned at the pause then tells the model the truth, where a repaired one would say the
calls were cut off and invite calling them again, repeating a side effect that already
happened. When the run is resumed, the completed round supersedes the record
(:func:`completes_held_round`, :func:`with_held_rounds_completed`).

A caller that keeps no tool traffic in memory (the QA pipeline, whose answer stage has no
tools) records a paused turn as plain messages instead, marked with the turn's id (their
``paused_turn``); the resumed turn's messages carry the same mark and take their place.

This module needs only :mod:`tooluse.messages` (declaration layer), so the loop can use it
and chat memory re-exports it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Sequence
from typing import TypeGuard

from tooluse.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)

__all__ = [
    "HELD_TOOL_CALL_RESULT",
    "UNANSWERED_TOOL_CALL_RESULT",
    "as_asked",
    "completes_held_round",
    "current_turn",
    "distinct_call_ids",
    "held_round_record",
    "paused_turn_of",
    "repair_tool_pairs",
    "with_held_rounds_completed",
]

logger = logging.getLogger(__name__)

UNANSWERED_TOOL_CALL_RESULT = (
    "Error: this tool call has no result (the conversation was interrupted or cut before the "
    "tool returned). Call the tool again if the result is still needed."
)

HELD_TOOL_CALL_RESULT = (
    "Error: this tool call was not run. It needs a human's approval, and none was given (the "
    "run was left waiting for the decision). Nothing was executed for it."
)


def as_asked(message: Message) -> Message:
    """``message`` as the user wrote it: a user message rewritten by an advisor (it keeps
    the user's text as its ``original_text``) gets that text back; any other message is
    returned as it is. Chat memory stores questions this way, so a rewritten prompt (old
    documents, rules) never comes back in later turns."""
    if not isinstance(message, UserMessage) or message.original_text is None:
        return message
    return message.model_copy(update={"text": message.original_text, "original_text": None})


def current_turn(messages: Sequence[Message]) -> Sequence[Message]:
    """The messages after the last user message: the rounds of the turn under way (all of
    ``messages`` when none is a user message)."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], UserMessage):
            return messages[index + 1 :]
    return messages


def paused_turn_of(message: Message) -> str | None:
    """The id of the paused turn ``message`` stands for or resumes (its ``paused_turn``)."""
    return message.paused_turn if isinstance(message, UserMessage | AssistantMessage) else None


def held_round_record(
    assistant: AssistantMessage, results: ToolResponseMessage | None
) -> ToolResponseMessage:
    """The results of a round paused for approval, one per call of ``assistant`` in call
    order: the call's result from ``results`` (the calls that ran, or were refused) and, for
    each call still waiting, :data:`HELD_TOOL_CALL_RESULT` (``is_error=True``). The held
    ids are its ``held_for_approval``."""
    answered = {response.id: response for response in results.responses} if results else {}
    held = [call for call in assistant.tool_calls if call.id not in answered]
    responses = tuple(
        answered.get(call.id)
        or ToolResponse(id=call.id, name=call.name, data=HELD_TOOL_CALL_RESULT, is_error=True)
        for call in assistant.tool_calls
    )
    return ToolResponseMessage(
        responses=responses, held_for_approval=tuple(call.id for call in held)
    )


def completes_held_round(record: Message, results: Message) -> bool:
    """Whether ``results`` is the completed round of which ``record`` is the held-round
    record (:func:`held_round_record`): it answers every call the record answers, so it
    replaces the record."""
    if not _is_held_record(record) or not isinstance(results, ToolResponseMessage):
        return False
    answered = {response.id for response in results.responses}
    return all(response.id in answered for response in record.responses)


def with_held_rounds_completed(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with each held-round record that a later message completes
    (:func:`completes_held_round`) replaced, where it is, by that message, taken from where
    it was: a memory that only appends keeps both after a resumed run."""
    completed = list(messages)
    if not any(_is_held_record(message) for message in completed):
        return completed
    index = 0
    while index < len(completed):
        record = next(
            (
                earlier
                for earlier in range(index - 1, -1, -1)
                if completes_held_round(completed[earlier], completed[index])
            ),
            None,
        )
        if record is None:
            index += 1
        else:
            completed[record] = completed.pop(index)
    return completed


def _is_held_record(message: Message) -> TypeGuard[ToolResponseMessage]:
    return isinstance(message, ToolResponseMessage) and message.held_for_approval is not None


def repair_tool_pairs(messages: Sequence[Message]) -> list[Message]:
    """Return ``messages`` with every tool call answered and every tool result paired.

    A tool call's results must follow its assistant message directly (consecutive tool
    messages). A held round's record is first replaced by the completed round if one follows
    (:func:`with_held_rounds_completed`), so the model sees what the resumed calls did.
    Results without such a call, and repeated results for one call, are dropped;
    calls left without a result are answered with an error result
    (:data:`UNANSWERED_TOOL_CALL_RESULT`, ``is_error=True``) placed after their group.
    Calls of one round that share an id (some servers number calls per name, or repeat
    them) get ids of their own, ``<id>_2``, ``<id>_3``, ...: providers reject repeated call
    ids, and the k-th result under the id answers the k-th call (the order the manager
    returns them in), so every call keeps its result.
    A well-formed history comes back unchanged (equal, in a new list).
    """
    repaired: list[Message] = []
    pending: dict[str, ToolCall] = {}  # calls of the current group still awaiting a result
    # The ids the current group's calls sharing an id were given, in call order, by the id.
    shared_ids: dict[str, deque[str]] = {}
    dropped = 0
    answered = 0
    renamed = 0
    for message in with_held_rounds_completed(messages):
        if isinstance(message, ToolResponseMessage):
            responses = message.responses
            if shared_ids:
                responses = tuple(_with_call_id(r, shared_ids) for r in responses)
            kept = [r for r in responses if pending.pop(r.id, None) is not None]
            dropped += len(responses) - len(kept)
            if len(kept) == len(responses) and responses is message.responses:
                repaired.append(message)
            elif kept:
                repaired.append(message.model_copy(update={"responses": tuple(kept)}))
            continue
        if pending:  # any other message closes the group of the last tool calls
            answered += len(pending)
            repaired.append(_error_results(pending.values()))
            pending = {}
        if shared_ids:
            shared_ids = {}
        if isinstance(message, AssistantMessage) and message.tool_calls:
            pending = {call.id: call for call in message.tool_calls}
            if len(pending) < len(message.tool_calls):
                message, shared_ids = _with_distinct_call_ids(message, messages)
                pending = {call.id: call for call in message.tool_calls}
                renamed += sum(len(ids) - 1 for ids in shared_ids.values())
        repaired.append(message)
    if pending:
        answered += len(pending)
        repaired.append(_error_results(pending.values()))
    if dropped or answered or renamed:
        logger.warning(
            "Repaired a conversation history: dropped %d orphan tool result(s), answered %d "
            "unanswered tool call(s) with an error result, gave %d tool call(s) sharing an id "
            "with another call of their round an id of their own",
            dropped,
            answered,
            renamed,
        )
    return repaired


def _with_distinct_call_ids(
    message: AssistantMessage, messages: Sequence[Message]
) -> tuple[AssistantMessage, dict[str, deque[str]]]:
    """``message`` with each repeated call id replaced by an id no call in ``messages`` has,
    and, per repeated id, the ids its calls now have, in call order."""
    taken = {c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
    calls = distinct_call_ids(message.tool_calls, taken)
    ids: dict[str, deque[str]] = {}
    for original, call in zip(message.tool_calls, calls, strict=True):
        ids.setdefault(original.id, deque()).append(call.id)
    shared = {call_id: given for call_id, given in ids.items() if len(given) > 1}
    return message.model_copy(update={"tool_calls": calls}), shared


def distinct_call_ids(calls: Sequence[ToolCall], taken: Iterable[str] = ()) -> tuple[ToolCall, ...]:
    """``calls`` (one round) with distinct ids: the first call with an id keeps it, each
    later one gets ``<id>_2``, ``<id>_3``, ..., skipping the ids of ``calls`` and ``taken``.
    Providers reject a round whose calls share an id, and results are matched by id."""
    used = {*taken, *(call.id for call in calls)}
    seen: dict[str, int] = {}  # how many calls had each id so far
    distinct: list[ToolCall] = []
    for call in calls:
        count = seen[call.id] = seen.get(call.id, 0) + 1
        if count > 1:
            number = count
            while f"{call.id}_{number}" in used:
                number += 1
            new_id = f"{call.id}_{number}"
            used.add(new_id)
            call = call.model_copy(update={"id": new_id})
        distinct.append(call)
    return tuple(distinct)


def _with_call_id(response: ToolResponse, shared_ids: dict[str, deque[str]]) -> ToolResponse:
    """``response`` under the id of the next call it answers, when its id is shared."""
    given = shared_ids.get(response.id)
    if not given:
        return response
    call_id = given.popleft()
    return response if call_id == response.id else response.model_copy(update={"id": call_id})


def _error_results(calls: Iterable[ToolCall]) -> ToolResponseMessage:
    return ToolResponseMessage(
        responses=tuple(
            ToolResponse(
                id=call.id, name=call.name, data=UNANSWERED_TOOL_CALL_RESULT, is_error=True
            )
            for call in calls
        )
    )
