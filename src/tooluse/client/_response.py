"""What ``call()`` and ``stream()`` give back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from tooluse._sync import run_sync
from tooluse.advisors import ChatClientResponse
from tooluse.calling import PendingToolCall
from tooluse.client._entity import (
    EntityValidationError,
    correction_request,
    parse_entity,
)
from tooluse.client._run import PreparedRequest
from tooluse.client._state import RunState
from tooluse.messages import ChatResponse, Message, ToolCall, UserMessage
from tooluse.streaming import StreamAggregator

__all__ = ["ApprovalRequired", "CallResponse", "StreamResponse", "ToolCallsNotExecuted"]


class ApprovalRequired(Exception):
    """Raised by ``content()`` / ``entity()`` of a run that stopped because tool calls wait
    for a human decision: there is no answer yet. Resume with
    ``client.resume(exc.state, {call_id: Approve() | Deny("why"), ...})``."""

    def __init__(self, state: RunState) -> None:
        names = ", ".join(f"{call.name} ({call.id})" for call in state.pending_tool_calls)
        super().__init__(
            f"The run is paused: tool calls wait for approval: {names}. Read "
            "response.pending_tool_calls and continue with client.resume(response.state, "
            "decisions)"
        )
        self.state = state

    @property
    def pending_tool_calls(self) -> tuple[PendingToolCall, ...]:
        return self.state.pending_tool_calls


class ToolCallsNotExecuted(Exception):
    """Raised by ``content()`` / ``entity()`` when the model asked for tools and no tool
    advisor ran them (auto-registration is off): the answer is the tool calls themselves,
    in ``chat_response()``, for a loop you drive with ``ToolCallingManager``."""

    def __init__(self, tool_calls: tuple[ToolCall, ...]) -> None:
        names = ", ".join(call.name for call in tool_calls)
        super().__init__(
            f"The model asked for tool calls ({names}) that nothing executed: no tool advisor in "
            "the chain runs tools on this path (auto-registration is off, or the tool advisor "
            "does not handle calls/streams). Read them from chat_response() and run them with "
            "ToolCallingManager, or leave auto-registration on"
        )
        self.tool_calls = tool_calls


def _check_answered(
    response: Callable[[], ChatResponse], state: RunState | None, runs_tools: bool
) -> None:
    """Raise for a run that gave no answer: paused, or its calls left unexecuted.
    ``response()`` is only asked for when calls may be left (a stream's merged response is
    then built; a stream whose loop ran its calls does without it)."""
    if state is not None:
        raise ApprovalRequired(state)
    if not runs_tools:
        merged = response()
        if merged.has_tool_calls():
            raise ToolCallsNotExecuted(
                tuple(call for g in merged.generations for call in g.message.tool_calls)
            )


def _history(
    prepared: PreparedRequest, response: ChatResponse, state: RunState | None
) -> tuple[Message, ...]:
    outcome = prepared.outcome
    history = prepared.request.prompt.messages if outcome is None else outcome.history
    result = response.result
    if state is not None or result is None:
        return tuple(history)
    return (*history, result.message)


def _turn_so_far(request: tuple[Message, ...], history: tuple[Message, ...]) -> tuple[Message, ...]:
    """The request, then the turn's tool calls and results and the answer: what a corrective
    retry sends, so the model keeps the tool results and no tool runs again. (The history
    holds the request as the advisors changed it: only what follows its last user message is
    taken from it.)"""
    for index in range(len(history) - 1, -1, -1):
        if isinstance(history[index], UserMessage):
            return (*request, *history[index + 1 :])
    return history


class CallResponse:
    """The outcome of ``call()`` / ``acall()`` / ``resume()``.

    ``content()`` is the answer's text, ``chat_response()`` the whole final response (usage
    summed over the tool rounds), ``entity(T)`` the answer validated as ``T``. A run paused
    for approval has ``pending_tool_calls`` and a ``state`` to resume from.
    """

    __slots__ = ("_prepared", "_response", "_state")

    def __init__(self, response: ChatClientResponse, prepared: PreparedRequest) -> None:
        if response.chat_response is None:
            raise ValueError("The advisor chain returned no model response")
        self._response = response
        self._prepared = prepared
        self._state = prepared.paused_state()

    def chat_client_response(self) -> ChatClientResponse:
        return self._response

    def chat_response(self) -> ChatResponse:
        response = self._response.chat_response
        assert response is not None  # checked in __init__
        return response

    @property
    def context(self) -> dict[str, Any]:
        """The request context as the advisors left it."""
        return self._response.context

    @property
    def state(self) -> RunState | None:
        """The run state when the run is paused for approval, else ``None``."""
        return self._state

    @property
    def pending_tool_calls(self) -> tuple[PendingToolCall, ...]:
        return () if self._state is None else self._state.pending_tool_calls

    @property
    def conversation_history(self) -> tuple[Message, ...]:
        """The turn as the tool loop saw it (tool calls and results included) followed by
        the final answer; without a tool loop, the request's messages and the answer."""
        return _history(self._prepared, self.chat_response(), self._state)

    def content(self) -> str:
        """The text of the answer ('' when it has none). Raises :class:`ApprovalRequired` for
        a paused run and :class:`ToolCallsNotExecuted` when the answer is unexecuted calls."""
        _check_answered(self.chat_response, self._state, self._prepared.runs_tools_on_call)
        return self.chat_response().text

    def entity(self, target: Any = None) -> Any:
        """The answer validated as ``target`` (default: the request's ``response_format``).

        Invalid output gets one corrective retry (the model is told what was wrong and the
        JSON Schema); still invalid raises :class:`EntityValidationError`.
        """
        target = self._target(target)
        text = self.content()
        try:
            return parse_entity(target, text)
        except ValueError as first:
            return run_sync(
                self._retry(target, text, str(first)),
                sync_name="CallResponse.entity() (it retries the model)",
                async_name="response.aentity(...)",
            )

    async def aentity(self, target: Any = None) -> Any:
        """Async form of :meth:`entity`."""
        target = self._target(target)
        text = self.content()
        try:
            return parse_entity(target, text)
        except ValueError as first:
            return await self._retry(target, text, str(first))

    def _target(self, target: Any) -> Any:
        target = target if target is not None else self._prepared.response_format
        if target is None:
            raise ValueError(
                "entity() needs a type: entity(MyModel), or set .response_format(MyModel) on "
                "the request"
            )
        return target

    async def _retry(self, target: Any, text: str, error: str) -> Any:
        messages = (
            *_turn_so_far(self._prepared.request.prompt.messages, self.conversation_history),
            UserMessage(text=correction_request(target, error)),
        )
        prepared = self._prepared.follow_up(messages)
        retried = CallResponse(await prepared.call(), prepared)
        retry_text = retried.content()
        try:
            return parse_entity(target, retry_text)
        except ValueError as second:
            raise EntityValidationError(
                f"The answer is not a valid {getattr(target, '__name__', target)} after one "
                f"corrective retry: {second}",
                text=retry_text,
                errors=[error, str(second)],
            ) from second


class StreamResponse:
    """The outcome of ``stream()``: iterate it for ``ChatResponse`` chunks, or iterate
    ``content()`` for the text pieces. A stream runs once.

    After the stream ended, ``chat_response()`` is the merged response (usage included) and
    a run paused for approval has ``pending_tool_calls`` and ``state``; ``content()`` then
    raises :class:`ApprovalRequired` at the end, after the text that came before.
    """

    __slots__ = (
        "_aggregator",
        "_context",
        "_done",
        "_prepared",
        "_response",
        "_started",
        "_state",
    )

    def __init__(self, prepared: PreparedRequest) -> None:
        self._prepared = prepared
        self._aggregator = StreamAggregator()
        self._started = False
        self._done = False
        self._context: dict[str, Any] = prepared.request.context
        self._state: RunState | None = None
        self._response: ChatResponse | None = None

    def __aiter__(self) -> AsyncIterator[ChatResponse]:
        if self._started:
            raise RuntimeError("A stream can be consumed once; make a new request to stream again")
        self._started = True
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[ChatResponse]:
        async for item in self._prepared.stream():
            self._context = item.context
            chunk = item.chat_response
            if chunk is None:
                continue
            self._aggregator.add(chunk)
            yield chunk
        self._state = self._prepared.paused_state()
        self._done = True

    async def content(self) -> AsyncIterator[str]:
        """The text pieces of the answer as they arrive (tool rounds run in between)."""
        async for chunk in self:
            text = chunk.text
            if text:
                yield text
        _check_answered(self.chat_response, self._state, self._prepared.runs_tools_on_stream)

    def _check_done(self) -> None:
        if not self._done:
            raise RuntimeError("The stream has not been consumed to its end yet")

    def chat_response(self) -> ChatResponse:
        self._check_done()
        # Merged once: the stream has ended, so every caller gets the same response, as
        # CallResponse's callers do (content() and the caller both ask for it).
        if self._response is None:
            self._response = self._aggregator.response()
        return self._response

    @property
    def context(self) -> dict[str, Any]:
        return self._context

    @property
    def conversation_history(self) -> tuple[Message, ...]:
        """As :attr:`CallResponse.conversation_history`, once the stream ended."""
        response = self.chat_response()
        # The merged chunks hold the text of every round, which the history already has up
        # to the last one: the answer is the response that ended the tool loop.
        outcome = self._prepared.outcome
        if outcome is not None:
            response = outcome.answer
        return _history(self._prepared, response, self._state)

    @property
    def state(self) -> RunState | None:
        self._check_done()
        return self._state

    @property
    def pending_tool_calls(self) -> tuple[PendingToolCall, ...]:
        self._check_done()
        return () if self._state is None else self._state.pending_tool_calls
