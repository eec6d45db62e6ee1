"""A request ready to run: the request, its advisor chain, and what a pause or a retry needs."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from tooluse.advisors import (
    Advisor,
    AdvisorChain,
    ChatClientRequest,
    ChatClientResponse,
    LoopOutcome,
)
from tooluse.client._state import RunState, model_parameters
from tooluse.messages import Message

__all__ = ["PreparedRequest"]


@dataclasses.dataclass(frozen=True, slots=True)
class PreparedRequest:
    """``request`` goes through ``chain``. ``caller_context`` is the request context as the
    caller set it (advisors add entries to the live one). ``tool_advisor`` is the chain's tool
    advisor, if any; ``response_format`` is the type of ``.entity()``, if set."""

    request: ChatClientRequest
    chain: AdvisorChain
    caller_context: Mapping[str, Any]
    tool_advisor: Advisor | None
    response_format: Any = None

    @property
    def outcome(self) -> LoopOutcome | None:
        """How the tool loop ended, once it did."""
        return self.request.turn.outcome

    async def call(self) -> ChatClientResponse:
        response = await self.chain.next_call(self.request)
        self._check_resumed()
        return response

    async def stream(self) -> AsyncIterator[ChatClientResponse]:
        async for item in self.chain.next_stream(self.request):
            yield item
        self._check_resumed()

    def _check_resumed(self) -> None:
        if self.request.resume is not None and self.outcome is None:
            raise RuntimeError(
                "The run was not resumed: the tool advisor in the chain does not continue "
                "paused runs (no tool loop took the request's resume); use ToolCallingAdvisor "
                "or a subclass of it"
            )

    # Plain attribute checks: a runtime-protocol isinstance costs tens of microseconds and
    # these are read on every answer.
    @property
    def runs_tools_on_call(self) -> bool:
        return callable(getattr(self.tool_advisor, "advise_call", None))

    @property
    def runs_tools_on_stream(self) -> bool:
        return callable(getattr(self.tool_advisor, "advise_stream", None))

    def follow_up(self, messages: Sequence[Message]) -> PreparedRequest:
        """The same request with other messages and a fresh copy of the caller's context."""
        request = ChatClientRequest(
            self.request.prompt.replace(messages=messages), dict(self.caller_context)
        )
        return dataclasses.replace(self, request=request)

    def paused_state(self) -> RunState | None:
        """The run state when the tool loop stopped for approval."""
        pause = None if self.outcome is None else self.outcome.pause
        if pause is None:
            return None
        options = self.request.prompt.options
        return RunState(
            messages=self.request.prompt.messages,
            history=pause.history,
            pending_tool_calls=pause.pending_tool_calls,
            usage=pause.usage,
            context=dict(self.caller_context),
            tool_context=dict(options.tool_context),
            options=model_parameters(options),
        )
