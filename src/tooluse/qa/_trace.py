"""The router stage's tool trace: each tool call reported when the model asks for it, each
result when the loop sends it back.

One :class:`ToolTraceAdvisor` sits inside the router's tool loop for every run; the run's
:class:`ToolTrace` (where its events go) is found in :data:`CURRENT_TRACE`, a context variable
the pipeline sets in the task that runs the router. It cannot travel in the request context:
a paused run stores that context as JSON, and the trace is a live object. It is not a
per-request advisor either, because that would rebuild the advisor chain on every request.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeGuard

from tooluse.advisors import (
    HIGHEST_PRECEDENCE,
    AdvisorChain,
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
)
from tooluse.messages import (
    AssistantMessage,
    ChatResponse,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
)
from tooluse.qa._events import QaEvent, ToolCallEvent, ToolResultEvent

__all__ = ["CURRENT_TRACE", "TRACE_ORDER", "ToolTrace", "ToolTraceAdvisor"]

TRACE_ORDER = HIGHEST_PRECEDENCE + 350
"""Inside the tool loop (+300): it sees every model call of the router stage."""


class ToolTrace:
    """Where one run's tool events go (``emit``): each call when the model asks for it, each
    result once, when it first shows up in a request (or in the history the run ends with).

    Results are matched to calls by their place in the round, not by id alone: some
    providers reuse ids (``call_0`` in every round, even twice in one round), and an earlier
    turn in the history may hold calls with this run's ids. The round is the calls of the
    last model response that asked for tools (the ones the tool loop runs); its results are
    the ``ToolResponseMessage`` that follows that round's assistant message, one response
    per call in call order (calls that did not run left out).
    """

    __slots__ = ("_emit", "_reported", "_round")

    def __init__(
        self,
        emit: Callable[[QaEvent], None],
        *,
        round_calls: Sequence[ToolCall] = (),
        reported: Iterable[int] = (),
    ) -> None:
        """``round_calls``: the round in progress (a resumed run's paused round), whose calls
        at the ``reported`` positions were reported before."""
        self._emit = emit
        self._round: tuple[ToolCall, ...] = tuple(round_calls)
        self._reported = set(reported)

    @classmethod
    def resuming(cls, emit: Callable[[QaEvent], None], history: Sequence[Message]) -> ToolTrace:
        """The trace of a run resumed from ``history`` (its calls and results so far were
        reported before the pause): the paused round's calls, those already answered."""
        for index in range(len(history) - 1, -1, -1):
            message = history[index]
            if isinstance(message, AssistantMessage) and message.tool_calls:
                break
        else:
            return cls(emit)
        calls = message.tool_calls
        tail = history[index + 1 :]
        answered = tail[0].responses if _is_tool_responses(tail) else ()
        reported = [position for position, _ in _aligned(calls, answered)]
        return cls(emit, round_calls=calls, reported=reported)

    def report_calls(self, response: ChatResponse) -> None:
        """Report the calls of a model response: a new round when it asks for tools."""
        round_message = None
        for generation in response.generations:
            message = generation.message
            if message.tool_calls and round_message is None:
                round_message = message  # the tool loop runs the first one's calls
            for call in message.tool_calls:
                self._emit(ToolCallEvent(call.id, call.name, call.arguments))
        if round_message is not None:
            self._round = round_message.tool_calls
            self._reported = set()

    def report_results(self, messages: Sequence[Message]) -> None:
        """Report the results in ``messages`` of the round in progress, not reported yet."""
        calls = self._round
        if len(self._reported) == len(calls):
            return
        for position, result in _aligned(calls, _round_results(messages, calls)):
            if position not in self._reported:
                self._reported.add(position)
                self._emit(ToolResultEvent.of(result))


def _round_results(
    messages: Sequence[Message], calls: Sequence[ToolCall]
) -> Sequence[ToolResponse]:
    """The responses ``messages`` hold for the round of ``calls``: those of the last
    ``ToolResponseMessage`` when it follows the round's assistant message (or opens the
    messages, after a system message at most: a tool loop that sends the model only the
    last results) and no later assistant message asks for tools."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ToolResponseMessage):
            break
        if isinstance(message, AssistantMessage) and message.tool_calls:
            return ()  # a round whose results have not come yet
    else:
        return ()
    before = messages[index - 1] if index > 0 else None
    if isinstance(before, AssistantMessage):
        if tuple(before.tool_calls) != tuple(calls):
            return ()  # another round's results
    elif before is not None and not isinstance(before, SystemMessage):
        return ()
    return message.responses


def _aligned(
    calls: Sequence[ToolCall], responses: Sequence[ToolResponse]
) -> Iterator[tuple[int, ToolResponse]]:
    """Each response with the position of its call: responses come in call order, so each
    answers the first call after the previous one's with its id."""
    start = 0
    for response in responses:
        position = next((i for i in range(start, len(calls)) if calls[i].id == response.id), None)
        if position is not None:
            yield position, response
            start = position + 1


def _is_tool_responses(messages: Sequence[Message]) -> TypeGuard[tuple[ToolResponseMessage]]:
    return len(messages) == 1 and isinstance(messages[0], ToolResponseMessage)


CURRENT_TRACE: contextvars.ContextVar[ToolTrace | None] = contextvars.ContextVar(
    "tooluse_qa_tool_trace", default=None
)


class ToolTraceAdvisor(BaseAdvisor):
    """Reports the tool traffic of each model call to the :class:`ToolTrace` of the current
    run (none: it only passes the request on)."""

    def __init__(self) -> None:
        super().__init__(name="QaToolTraceAdvisor", order=TRACE_ORDER)

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        trace = CURRENT_TRACE.get()
        if trace is None:
            return await chain.next_call(request)
        trace.report_results(request.prompt.messages)
        response = await chain.next_call(request)
        if response.chat_response is not None:
            trace.report_calls(response.chat_response)
        return response
