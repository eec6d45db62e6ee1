"""``ToolCallingAdvisor``: the model -> tools -> model loop (Spring AI's ``ToolCallingAdvisor``).

One request runs as a do-while loop: call the rest of the chain (the model); if the
eligibility checker says the response asks for tools, let the ``ToolCallingManager`` run one
round of calls; stop on a return-direct round, a limit breach or calls held for approval;
otherwise send the conversation back to the model. Subclasses hook into each step (the
tool-search advisor swaps the offered tools per round in :meth:`do_before_call`); the manager
always executes with the options the hooks left.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any, ClassVar, Final, Protocol, runtime_checkable

from tooluse import _tracing
from tooluse.advisors._api import (
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    HIGHEST_PRECEDENCE,
    AdvisorChain,
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
    ToolAdvisor,
)
from tooluse.advisors._turn import LoopOutcome, LoopPause
from tooluse.calling import (
    ToolCallingManager,
    ToolCallLimitExceeded,
    ToolExecutionResult,
)
from tooluse.history import held_round_record
from tooluse.messages import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    Generation,
    Message,
    Prompt,
    SystemMessage,
    ToolResponseMessage,
    Usage,
)
from tooluse.streaming import StreamAggregator

__all__ = [
    "APPROVAL_REQUIRED",
    "PENDING_TOOL_CALLS_METADATA",
    "EligibilityChecker",
    "HistoryReplayer",
    "ToolCallingAdvisor",
    "ToolLoopListener",
    "has_tool_calls",
]

APPROVAL_REQUIRED: Final = "toolApprovalRequired"
"""Finish reason of the response of a run paused because tool calls wait for approval."""
PENDING_TOOL_CALLS_METADATA: Final = "pending_tool_calls"
"""Generation metadata key of a paused run's response: the held calls, as
``PendingToolCall.to_dict()`` (for a reader of the bare ``ChatResponse``; advisors read
``request.turn.outcome.pause``)."""

EligibilityChecker = Callable[[ChatResponse], bool]


def has_tool_calls(response: ChatResponse) -> bool:
    """The default eligibility checker: any generation asks for a tool call."""
    return response.has_tool_calls()


@runtime_checkable
class ToolLoopListener(Protocol):
    """An advisor inside the tool loop that wants the end of a turn no model call carried:
    when the loop ends on tool results (a return-direct tool, a call-limit breach), with no
    model call after them, :meth:`tool_loop_ended` gets the messages that came after the
    last model message (the tool results, then the final answer); when it pauses for
    approval, the paused round's results recorded whole (the calls that ran, and a "not run"
    result for each held call: :func:`~tooluse.history.held_round_record`). A memory inside
    the loop stores them, so it never keeps a tool call without its result, and a run left
    paused never loses the results of the calls that ran."""

    async def tool_loop_ended(
        self, request: ChatClientRequest, messages: Sequence[Message]
    ) -> None: ...


@runtime_checkable
class HistoryReplayer(Protocol):
    """An advisor that puts earlier messages before a request's own (a chat memory): inside
    the tool loop it does so after the loop's hooks ran, so a hook that must see what the
    model will see (the tool-search advisor, counting earlier searches) asks it with
    :meth:`replayed_history` (the earlier messages it would add to ``request``)."""

    async def replayed_history(self, request: ChatClientRequest) -> Sequence[Message]: ...


class _Loop:
    """The mutable state of one request's loop."""

    __slots__ = (
        "added_from",
        "ended_on_tools",
        "held_round",
        "history",
        "instructions",
        "options",
        "pause",
        "request",
        "response_context",
        "resume",
        "rounds",
        "usage",
    )

    def __init__(self, request: ChatClientRequest) -> None:
        # The loop takes the resume: the advisors inside it get requests without it.
        self.resume = request.resume
        if request.resume is not None:
            request = dataclasses.replace(request, resume=None)
        self.request = request  # the current iteration's request, as the hooks left it
        # The context the last model call came back with: an advisor inside the loop may have
        # passed on a copy of the request's, and the caller reads the response's.
        self.response_context: dict[str, Any] | None = None
        self.options: ChatOptions = request.prompt.options
        self.instructions: Sequence[Message] = request.prompt.messages  # sent to the model
        self.history: Sequence[Message] = request.prompt.messages  # the turn, for the manager
        self.usage: Usage | None = None
        self.rounds = 0
        self.ended_on_tools = False  # the final answer came from tools, not from the model
        # Where this request's messages begin in ``history`` (after the prompt; for a resumed
        # run, after the paused round's assistant message).
        self.added_from = len(self.history)
        # The record of a round paused for approval (it replaces the round's partial results
        # in what the memories are given).
        self.held_round: ToolResponseMessage | None = None
        self.pause: LoopPause | None = None

    def recorded_history(self, start: int = 0) -> list[Message]:
        """``history[start:]`` as a conversation keeps it: a held round's partial results
        replaced by its record."""
        if self.held_round is None:
            return list(self.history[start:])
        end = len(self.history)
        if isinstance(self.history[-1], ToolResponseMessage):
            end -= 1
        return [*self.history[start:end], self.held_round]

    @property
    def context(self) -> dict[str, Any]:
        """The context of the response the loop hands out."""
        return self.request.context if self.response_context is None else self.response_context

    def add_usage(self, usage: Usage | None) -> None:
        if usage is None or usage.is_empty():
            return
        self.usage = usage if self.usage is None else self.usage + usage


class ToolCallingAdvisor(BaseAdvisor, ToolAdvisor):
    """Runs tool calls for the model until it answers (call and stream).

    - ``tool_calling_manager``: executes each round (default ``ToolCallingManager()``:
      40 calls per tool and 150 in total per turn).
    - ``eligibility_checker``: decides whether a response's tool calls are executed
      (default :func:`has_tool_calls`).
    - ``conversation_history``: send the model the whole turn each round (default) or only
      the system message and the last tool results (for a memory advisor inside the loop
      that replays the rest).
    - ``order``: strictly between ``HIGHEST_PRECEDENCE`` and ``LOWEST_PRECEDENCE``.

    The final response carries the usage summed over all rounds. A return-direct round
    answers with one generation per tool result (finish reason ``returnDirect``); a limit
    breach with the limit message (finish reason ``toolCallLimitExceeded``); calls held for
    approval with the round's assistant message (finish reason ``toolApprovalRequired``).
    When the loop ends, the request's turn gets its outcome (``request.turn.outcome``, a
    :class:`~tooluse.advisors.LoopOutcome`): the history, the rounds this request added, the
    answer and, for a pause, the :class:`~tooluse.advisors.LoopPause`.
    A request whose ``resume`` is set (:class:`~tooluse.advisors.LoopResume`) first completes
    the paused round.

    Hooks for subclasses, all ``async`` and used by the call and the stream path alike:
    :meth:`do_initialize_loop` (once), :meth:`do_before_call` and :meth:`do_after_call`
    (each model call), :meth:`do_get_next_instructions` (after each executed round),
    :meth:`do_finalize_loop` (the final response of a call) and :meth:`do_finalize_stream`
    (the emitted stream). A subclass keeps its own state from hook to hook in the request's
    ``turn``, under a :class:`~tooluse.advisors.TurnKey` of its own.
    """

    DEFAULT_ORDER: ClassVar[int] = HIGHEST_PRECEDENCE + 300

    def __init__(
        self,
        *,
        tool_calling_manager: ToolCallingManager | None = None,
        eligibility_checker: EligibilityChecker = has_tool_calls,
        conversation_history: bool = True,
        order: int = DEFAULT_ORDER,
        name: str = "Tool Calling Advisor",
    ) -> None:
        super().__init__(name=name, order=order)
        if not callable(eligibility_checker):
            raise TypeError("eligibility_checker must be a callable (ChatResponse) -> bool")
        self.tool_calling_manager = tool_calling_manager or ToolCallingManager()
        self.eligibility_checker = eligibility_checker
        self.conversation_history = conversation_history

    # -- hooks ---------------------------------------------------------------------------

    async def do_initialize_loop(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientRequest:
        """Once per request, before the first model call."""
        return request

    async def do_before_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientRequest:
        """Before each model call. The options of the returned request are the ones the model
        sees and the manager executes with."""
        return request

    async def do_after_call(
        self, response: ChatClientResponse, chain: AdvisorChain
    ) -> ChatClientResponse:
        """After each model call (for a stream: on the round's merged response)."""
        return response

    async def do_get_next_instructions(
        self,
        request: ChatClientRequest,
        response: ChatClientResponse | None,
        result: ToolExecutionResult,
    ) -> Sequence[Message]:
        """The messages of the next model call after an executed round. ``request`` is the
        round's request; ``response`` is ``None`` when the round completed a resumed run."""
        history = result.conversation_history
        if self.conversation_history:
            return history
        system = next((m for m in request.prompt.messages if isinstance(m, SystemMessage)), None)
        return history[-1:] if system is None else (system, history[-1])

    async def do_finalize_loop(
        self, response: ChatClientResponse, chain: AdvisorChain
    ) -> ChatClientResponse:
        """Once per call, on the final response."""
        return response

    def do_finalize_stream(
        self, stream: AsyncIterator[ChatClientResponse], chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        """Once per stream: may wrap the emitted stream."""
        return stream

    # -- call ----------------------------------------------------------------------------

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        with _tracing.start_span("tool_loop", _LOOP_SPAN_ATTRIBUTES) as span:
            inner = chain.copy(self)
            request = self._with_visible_tools(request)
            loop = _Loop(await self.do_initialize_loop(request, chain))
            final = await self._resume(loop)
            while final is None:
                await self._before_round(loop, chain)
                response = await inner.next_call(loop.request)
                response = await self.do_after_call(response, chain)
                loop.response_context = response.context
                chat_response = response.chat_response
                loop.rounds += 1
                if chat_response is None:
                    raise ValueError(f"{self.name}: the chain returned no model response")
                loop.add_usage(chat_response.usage)
                if not self.eligibility_checker(chat_response):
                    final = chat_response
                    break
                final = await self._execute_round(loop, response, chat_response)
            final = self._finish(loop, final, span)
            await self._tell_inner_advisors(loop, final, chain)
            return await self.do_finalize_loop(ChatClientResponse(final, loop.context), chain)

    # -- stream --------------------------------------------------------------------------

    def advise_stream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        stream = _tracing.traced_stream(
            "tool_loop", _LOOP_SPAN_ATTRIBUTES, lambda span: self._stream(request, chain, span)
        )
        return self.do_finalize_stream(stream, chain)

    async def _stream(
        self, request: ChatClientRequest, chain: AdvisorChain, span: _tracing.SpanHandle
    ) -> AsyncGenerator[ChatClientResponse, None]:
        inner = chain.copy(self)
        request = self._with_visible_tools(request)
        loop = _Loop(await self.do_initialize_loop(request, chain))
        final = await self._resume(loop)
        while final is None:
            await self._before_round(loop, chain)
            previous_usage = loop.usage
            emitted_usage: Usage | None = None  # the last usage the caller was given
            aggregator = StreamAggregator()
            context = loop.request.context
            async for item in inner.next_stream(loop.request):
                context = item.context
                chunk = item.chat_response
                if chunk is None:
                    yield item
                    continue
                aggregator.add(chunk)
                emitted = _emittable(chunk, previous_usage)
                if emitted is not None:
                    if emitted.usage is not None and not emitted.usage.is_empty():
                        emitted_usage = emitted.usage
                    yield item if emitted is chunk else item.replace(chat_response=emitted)
            merged = aggregator.response()
            loop.response_context = context  # the dict the caller holds from the chunks
            response = await self.do_after_call(ChatClientResponse(merged, context), chain)
            merged = response.chat_response or merged
            loop.rounds += 1
            loop.add_usage(merged.usage)
            if not self.eligibility_checker(merged):
                # The total is still owed when the last round reported no usage, or
                # reported it on a hidden chunk (one carrying only tool-call fragments).
                owed = loop.usage if loop.usage != emitted_usage else None
                self._finish(loop, merged, span)
                if merged.has_tool_calls():
                    # Calls the checker left unexecuted were in hidden chunks: hand them
                    # over whole, in one chunk (the rest of the round was streamed).
                    unexecuted = _without_streamed(merged).model_copy(update={"usage": owed})
                    yield ChatClientResponse(unexecuted, context)
                elif owed is not None:
                    # The total rides on its own chunk.
                    yield ChatClientResponse(ChatResponse(usage=owed), context)
                return
            final = await self._execute_round(loop, response, merged)
        final = self._finish(loop, final, span)
        await self._tell_inner_advisors(loop, final, chain)
        if final.generations and final.generations[0].finish_reason == APPROVAL_REQUIRED:
            final = _without_streamed(final)  # streamed but for its tool calls
        yield ChatClientResponse(final, loop.context)

    # -- the steps both paths share ------------------------------------------------------

    def _with_visible_tools(self, request: ChatClientRequest) -> ChatClientRequest:
        """The request with only the tools its caller may use (the manager's
        ``tool_visibility``), before any hook sees them: the others are never offered, nor
        indexed by tool search."""
        options = request.prompt.options
        visible = self.tool_calling_manager.visible_options(options)
        if visible is options:
            return request
        return request.replace(prompt=request.prompt.replace(options=visible))

    async def _before_round(self, loop: _Loop, chain: AdvisorChain) -> None:
        iteration = loop.request.replace(prompt=Prompt(loop.instructions, loop.options))
        iteration = await self.do_before_call(iteration, chain)
        loop.request = iteration
        loop.options = iteration.prompt.options

    async def _resume(self, loop: _Loop) -> ChatResponse | None:
        """Complete a paused round when the request resumes a run; ``None``: call the model."""
        resume = loop.resume
        if resume is None:
            return None
        loop.history = resume.history
        loop.added_from = _paused_assistant_index(resume.history) + 1
        loop.usage = resume.usage
        try:
            result = await self.tool_calling_manager.aresume_tool_calls(
                Prompt(resume.history, loop.options), resume.decisions
            )
        except ToolCallLimitExceeded as exc:
            loop.history = exc.partial_result.conversation_history
            loop.add_usage(exc.partial_result.usage)
            loop.ended_on_tools = True
            return ChatResponse(generations=(exc.build_generation(),))
        return await self._after_round(loop, result, None, None)

    async def _execute_round(
        self, loop: _Loop, response: ChatClientResponse, chat_response: ChatResponse
    ) -> ChatResponse | None:
        """Run the round's tool calls; the final response, or ``None`` to call the model."""
        try:
            result = await self.tool_calling_manager.aexecute_tool_calls(
                Prompt(loop.history, loop.options), chat_response
            )
        except ToolCallLimitExceeded as exc:
            loop.history = exc.partial_result.conversation_history
            loop.add_usage(exc.partial_result.usage)
            loop.ended_on_tools = True
            return chat_response.model_copy(update={"generations": (exc.build_generation(),)})
        return await self._after_round(loop, result, response, chat_response)

    async def _after_round(
        self,
        loop: _Loop,
        result: ToolExecutionResult,
        response: ChatClientResponse | None,
        chat_response: ChatResponse | None,
    ) -> ChatResponse | None:
        loop.history = result.conversation_history
        loop.add_usage(result.usage)  # the model calls of the round's tools
        if result.pending_tool_calls:
            if chat_response is None:
                raise ValueError("A resumed round cannot hold calls for approval again")
            return self._pause(loop, result, chat_response)
        if result.return_direct:
            loop.ended_on_tools = True
            generations = tuple(result.build_generations())
            if chat_response is None:
                return ChatResponse(generations=generations)
            return chat_response.model_copy(update={"generations": generations})
        loop.instructions = await self.do_get_next_instructions(loop.request, response, result)
        return None

    def _pause(
        self, loop: _Loop, result: ToolExecutionResult, chat_response: ChatResponse
    ) -> ChatResponse:
        pending = result.pending_tool_calls
        loop.pause = LoopPause(
            history=tuple(result.conversation_history), pending_tool_calls=pending, usage=loop.usage
        )
        generation = next(g for g in chat_response.generations if g.message.tool_calls)
        history = result.conversation_history
        partial = history[-1] if isinstance(history[-1], ToolResponseMessage) else None
        loop.held_round = held_round_record(generation.message, partial)
        paused = Generation(
            message=generation.message,
            metadata={
                **generation.metadata,
                "finish_reason": APPROVAL_REQUIRED,
                PENDING_TOOL_CALLS_METADATA: [call.to_dict() for call in pending],
            },
        )
        return chat_response.model_copy(update={"generations": (paused,)})

    async def _tell_inner_advisors(
        self, loop: _Loop, final: ChatResponse, chain: AdvisorChain
    ) -> None:
        """A loop that ended on tool results or paused for approval: the advisors inside it
        saw the model message that asked for the tools, not what came after it
        (:class:`ToolLoopListener`)."""
        if not loop.ended_on_tools and loop.held_round is None:
            return
        advisors = chain.advisors
        position = next(i for i, advisor in enumerate(advisors) if advisor is self)
        listeners = [a for a in advisors[position + 1 :] if isinstance(a, ToolLoopListener)]
        if not listeners:
            return
        history = loop.recorded_history()
        last_model = max(
            (i for i, message in enumerate(history) if isinstance(message, AssistantMessage)),
            default=-1,
        )
        messages = history[last_model + 1 :]
        if loop.ended_on_tools:
            messages.extend(g.message for g in final.generations)
        for listener in listeners:
            await listener.tool_loop_ended(loop.request, messages)

    def _finish(self, loop: _Loop, final: ChatResponse, span: _tracing.SpanHandle) -> ChatResponse:
        """Stamp the summed usage, fill in the span, record the loop's outcome."""
        usage = loop.usage
        span.set_attribute("tooluse.tool_loop.rounds", loop.rounds)
        if final.generations:
            reason = final.generations[0].finish_reason
            span.set_attribute("tooluse.tool_loop.finish_reason", reason or "")
        if usage is not None:
            span.set_attribute(GEN_AI_USAGE_INPUT_TOKENS, usage.prompt_tokens)
            span.set_attribute(GEN_AI_USAGE_OUTPUT_TOKENS, usage.completion_tokens)
            if final.usage != usage:
                final = final.model_copy(update={"usage": usage})
        loop.request.turn.outcome = LoopOutcome(
            history=tuple(loop.history),
            rounds=tuple(loop.recorded_history(loop.added_from)),
            answer=final,
            pause=loop.pause,
        )
        return final


_LOOP_SPAN_ATTRIBUTES: Final[dict[str, _tracing.AttributeValue]] = {
    _tracing.GEN_AI_OPERATION_NAME: "tool_loop"
}


def _paused_assistant_index(history: Sequence[Message]) -> int:
    """The index of the paused round's assistant message: the last one with tool calls."""
    return max(
        (i for i, m in enumerate(history) if isinstance(m, AssistantMessage) and m.tool_calls),
        default=len(history) - 1,
    )


def _emittable(chunk: ChatResponse, previous_usage: Usage | None) -> ChatResponse | None:
    """What a stream chunk becomes for the caller: ``None`` for a chunk carrying tool-call
    fragments (dropped, or kept without them when it also carries text, reasoning or provider
    content), and the usage of the rounds before added to a chunk that reports its own usage."""
    if any(g.message.tool_calls for g in chunk.generations):
        if not any(
            g.message.text or g.message.reasoning or g.message.provider_content
            for g in chunk.generations
        ):
            return None
        chunk = chunk.model_copy(
            update={
                "generations": tuple(
                    g.model_copy(
                        update={"message": g.message.model_copy(update={"tool_calls": ()})}
                    )
                    if g.message.tool_calls
                    else g
                    for g in chunk.generations
                )
            }
        )
    usage = chunk.usage
    if previous_usage is not None and usage is not None and not usage.is_empty():
        chunk = chunk.model_copy(update={"usage": previous_usage + usage})
    return chunk


def _without_streamed(response: ChatResponse) -> ChatResponse:
    """``response`` without what its round's chunks already gave the caller: the text, the
    reasoning and the provider content (:func:`_emittable` never hides any of them)."""
    streamed = {"text": None, "reasoning": (), "provider_content": None}
    generations = tuple(
        g.model_copy(update={"message": g.message.model_copy(update=streamed)})
        for g in response.generations
    )
    return response.model_copy(update={"generations": generations})
