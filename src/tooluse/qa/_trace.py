"""The router stage's tool trace: an advisor inside the tool loop that reports each tool call
when the model asks for it and each result when the loop sends it back."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from tooluse.advisors import (
    HIGHEST_PRECEDENCE,
    AdvisorChain,
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
)
from tooluse.messages import AssistantMessage, Message, ToolResponseMessage
from tooluse.qa._events import QaEvent, ToolCallEvent, ToolResultEvent

__all__ = ["ToolTraceAdvisor"]

TRACE_ORDER = HIGHEST_PRECEDENCE + 350
"""Inside the tool loop (+300): it sees every model call of the router stage."""


class ToolTraceAdvisor(BaseAdvisor):
    """Reports ``ToolCallEvent``s and ``ToolResultEvent``s to ``emit`` as the loop runs, each
    call and each result once. One instance serves one run; ``reported_calls`` and
    ``reported_results`` are the ids a resumed run already reported before its pause."""

    def __init__(
        self,
        emit: Callable[[QaEvent], None],
        *,
        reported_calls: Iterable[str] = (),
        reported_results: Iterable[str] = (),
    ) -> None:
        super().__init__(name="QaToolTraceAdvisor", order=TRACE_ORDER)
        self._emit = emit
        self._calls = set(reported_calls)
        self._results = set(reported_results)

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        self.report_results(request.prompt.messages)
        response = await chain.next_call(request)
        if response.chat_response is not None:
            for generation in response.chat_response.generations:
                for call in generation.message.tool_calls:
                    if call.id not in self._calls:
                        self._calls.add(call.id)
                        self._emit(ToolCallEvent(call.id, call.name, call.arguments))
        return response

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


def reported_ids(history: Sequence[Message]) -> tuple[set[str], set[str]]:
    """The call ids and result ids a run whose loop history is ``history`` has reported."""
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
    return calls, results
