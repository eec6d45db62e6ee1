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
from collections.abc import Callable, Iterable, Sequence

from tooluse.advisors import (
    HIGHEST_PRECEDENCE,
    AdvisorChain,
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
)
from tooluse.messages import AssistantMessage, ChatResponse, Message, ToolResponseMessage
from tooluse.qa._events import QaEvent, ToolCallEvent, ToolResultEvent

__all__ = ["CURRENT_TRACE", "TRACE_ORDER", "ToolTrace", "ToolTraceAdvisor"]

TRACE_ORDER = HIGHEST_PRECEDENCE + 350
"""Inside the tool loop (+300): it sees every model call of the router stage."""


class ToolTrace:
    """Where one run's tool events go (``emit``), each call and result reported once.
    ``reported_calls`` / ``reported_results``: ids a resumed run reported before its pause."""

    __slots__ = ("_calls", "_emit", "_results")

    def __init__(
        self,
        emit: Callable[[QaEvent], None],
        *,
        reported_calls: Iterable[str] = (),
        reported_results: Iterable[str] = (),
    ) -> None:
        self._emit = emit
        self._calls = set(reported_calls)
        self._results = set(reported_results)

    @classmethod
    def resuming(cls, emit: Callable[[QaEvent], None], history: Sequence[Message]) -> ToolTrace:
        """The trace of a run resumed from ``history`` (its calls and results so far were
        reported before the pause)."""
        calls = {
            call.id
            for message in history
            if isinstance(message, AssistantMessage)
            for call in message.tool_calls
        }
        results = {
            result.id
            for message in history
            if isinstance(message, ToolResponseMessage)
            for result in message.responses
        }
        return cls(emit, reported_calls=calls, reported_results=results)

    def report_calls(self, response: ChatResponse) -> None:
        for generation in response.generations:
            for call in generation.message.tool_calls:
                if call.id not in self._calls:
                    self._calls.add(call.id)
                    self._emit(ToolCallEvent(call.id, call.name, call.arguments))

    def report_results(self, messages: Sequence[Message]) -> None:
        """Report the results in ``messages`` of calls reported earlier, not reported yet."""
        for message in messages:
            if not isinstance(message, ToolResponseMessage):
                continue
            for result in message.responses:
                if result.id in self._calls and result.id not in self._results:
                    self._results.add(result.id)
                    self._emit(
                        ToolResultEvent(result.id, result.name, result.data, result.is_error)
                    )


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
