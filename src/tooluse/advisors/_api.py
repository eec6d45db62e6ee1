"""The advisor chain: requests go inward through advisors to the model, responses come back out.

Advisors are sorted by ``order`` ascending; lower is outer (sees the request first and the
response last). ``chain.copy(advisor)`` is the part of the chain after ``advisor``, which lets
a loop (the tool-calling advisor) call the rest of the chain once per iteration.

The end of the chain calls the model inside an OpenTelemetry span ``chat {model}`` (GenAI
semantic conventions, with token usage) when OpenTelemetry is installed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any, Final, Protocol, runtime_checkable

from tooluse import _tracing
from tooluse.advisors._turn import LoopResume, Turn
from tooluse.history import repair_tool_pairs
from tooluse.messages import ChatResponse, Prompt, Usage
from tooluse.models import ChatModel

__all__ = [
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "Advisor",
    "AdvisorChain",
    "BaseAdvisor",
    "CallAdvisor",
    "ChatClientRequest",
    "ChatClientResponse",
    "StreamAdvisor",
    "ToolAdvisor",
    "model_name",
]

HIGHEST_PRECEDENCE = -(2**31)
LOWEST_PRECEDENCE = 2**31 - 1

GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"


@dataclasses.dataclass(frozen=True, slots=True)
class ChatClientRequest:
    """A prompt, the caller's request context, and the turn's typed state.

    - ``context``: the caller's data, which advisors read and may add to for the caller
      (e.g. the conversation id under ``chat_memory_conversation_id``); shared by the whole
      request.
    - ``resume``: set when the request continues a paused run (:class:`LoopResume`); the tool
      loop takes it.
    - ``turn``: what this request's advisors share besides the context (:class:`Turn`): the
      tool loop's outcome once it ended, each advisor's own state. Pass a request on with
      :meth:`replace`, which keeps it.
    """

    prompt: Prompt
    context: dict[str, Any] = dataclasses.field(default_factory=dict)
    resume: LoopResume | None = None
    turn: Turn = dataclasses.field(default_factory=Turn)

    def replace(
        self, *, prompt: Prompt | None = None, context: dict[str, Any] | None = None
    ) -> ChatClientRequest:
        """The same request (its resume and its turn) with another prompt or context."""
        return ChatClientRequest(
            self.prompt if prompt is None else prompt,
            self.context if context is None else context,
            self.resume,
            self.turn,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ChatClientResponse:
    """A model response (``None`` for a response-less chunk) plus the request context."""

    chat_response: ChatResponse | None
    context: dict[str, Any] = dataclasses.field(default_factory=dict)

    def replace(
        self,
        *,
        chat_response: ChatResponse | None = None,
        context: dict[str, Any] | None = None,
    ) -> ChatClientResponse:
        return ChatClientResponse(
            self.chat_response if chat_response is None else chat_response,
            self.context if context is None else context,
        )


@runtime_checkable
class Advisor(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def order(self) -> int: ...


@runtime_checkable
class CallAdvisor(Advisor, Protocol):
    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse: ...


@runtime_checkable
class StreamAdvisor(Advisor, Protocol):
    def advise_stream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]: ...


class BaseAdvisor:
    """The ``name`` and ``order`` every advisor has, checked once.

    Subclass it and add ``advise_call`` and/or ``advise_stream``. ``order`` must be an ``int``
    strictly between ``HIGHEST_PRECEDENCE`` and ``LOWEST_PRECEDENCE`` (lower is outer);
    ``name`` a non-blank string (it names the advisor in errors and traces).
    """

    def __init__(self, *, name: str, order: int) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"An advisor's name must be a non-blank string, got {name!r}")
        if isinstance(order, bool) or not isinstance(order, int):
            raise TypeError(f"{name}: order must be an int, got {type(order).__name__}")
        if not HIGHEST_PRECEDENCE < order < LOWEST_PRECEDENCE:
            raise ValueError(
                f"{name}: order must be strictly between HIGHEST_PRECEDENCE and "
                f"LOWEST_PRECEDENCE, got {order}"
            )
        self._name = name
        self._order = order

    @property
    def name(self) -> str:
        return self._name

    @property
    def order(self) -> int:
        return self._order

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r}, order={self._order})"


class ToolAdvisor:
    """Marker base class of advisors that run the model <-> tool loop.

    ``ChatClient`` adds a :class:`~tooluse.advisors.ToolCallingAdvisor` to a request's chain
    unless one of these is already there, and refuses a chain with two of them.
    """

    __slots__ = ()


def model_name(model: ChatModel) -> str:
    """The model's name for traces when a request names none (``options.model``): the model
    object's ``model_name`` / ``model`` attribute, else its class name."""
    for attribute in ("model_name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def _span_attributes(name: str) -> dict[str, _tracing.AttributeValue]:
    return {_tracing.GEN_AI_OPERATION_NAME: "chat", _tracing.GEN_AI_REQUEST_MODEL: name}


def _record_usage(span: _tracing.SpanHandle, usage: Usage | None) -> None:
    if usage is not None and not usage.is_empty():
        span.set_attribute(GEN_AI_USAGE_INPUT_TOKENS, usage.prompt_tokens)
        span.set_attribute(GEN_AI_USAGE_OUTPUT_TOKENS, usage.completion_tokens)


def _model_prompt(prompt: Prompt, model: ChatModel) -> Prompt:
    """The prompt as the model gets it: tool pairs repaired, deferred tools only for a model
    that loads them (another would offer them all, silently undoing the deferral)."""
    if prompt.options.deferred_tools is not None and not getattr(
        model, "loads_deferred_tools", False
    ):
        raise ValueError(
            f"{type(model).__name__} cannot defer tools (ChatOptions.deferred_tools needs a "
            "model with loads_deferred_tools, such as AnthropicChatModel)"
        )
    return _with_tool_pairs_repaired(prompt)


def _with_tool_pairs_repaired(prompt: Prompt) -> Prompt:
    """Providers reject a history with an orphan tool result or an unanswered tool call (a
    window edge, an interrupted run), so every model request goes out repaired."""
    messages = repair_tool_pairs(prompt.messages)
    if len(messages) == len(prompt.messages) and all(
        repaired is original for repaired, original in zip(messages, prompt.messages, strict=True)
    ):
        return prompt
    return prompt.replace(messages=messages)


class AdvisorChain:
    """An immutable position in a sorted list of advisors, ending at the model.

    Which advisors take part in calls and which in streams is worked out once, when the chain
    is built, so moving along the chain costs no protocol checks.
    """

    __slots__ = (
        "_advisors",
        "_call_positions",
        "_model",
        "_model_name",
        "_position",
        "_stream_positions",
    )

    def __init__(self, advisors: Sequence[Advisor], model: ChatModel) -> None:
        ordered = tuple(sorted(advisors, key=lambda a: a.order))  # stable for equal orders
        self._advisors: tuple[Advisor, ...] = ordered
        self._model = model
        self._model_name = model_name(model)
        self._position = 0
        self._call_positions = _next_positions(ordered, CallAdvisor)
        self._stream_positions = _next_positions(ordered, StreamAdvisor)

    @property
    def advisors(self) -> tuple[Advisor, ...]:
        """All advisors of the chain in order, including those already passed."""
        return self._advisors

    @property
    def model(self) -> ChatModel:
        return self._model

    def _after(self, position: int) -> AdvisorChain:
        chain = AdvisorChain.__new__(AdvisorChain)
        chain._advisors = self._advisors
        chain._model = self._model
        chain._model_name = self._model_name
        chain._call_positions = self._call_positions
        chain._stream_positions = self._stream_positions
        chain._position = position
        return chain

    def copy(self, after: Advisor) -> AdvisorChain:
        """The chain that starts right after ``after``."""
        for index, advisor in enumerate(self._advisors):
            if advisor is after:
                return self._after(index + 1)
        raise ValueError(f"Advisor {after.name!r} is not part of this chain")

    async def next_call(self, request: ChatClientRequest) -> ChatClientResponse:
        position = self._call_positions[self._position]
        if position < len(self._advisors):
            advisor: Any = self._advisors[position]
            response: ChatClientResponse = await advisor.advise_call(
                request, self._after(position + 1)
            )
            return response
        prompt = _model_prompt(request.prompt, self._model)
        name = prompt.options.model or self._model_name
        with _tracing.start_span(f"chat {name}", _span_attributes(name)) as span:
            chat_response = await self._model.acall(prompt)
            _record_usage(span, chat_response.usage)
        return ChatClientResponse(chat_response, request.context)

    def next_stream(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]:
        # The next advisor's stream itself, or the model's: no generator of the chain's own
        # around it, which every chunk would pass through once per advisor.
        position = self._stream_positions[self._position]
        if position < len(self._advisors):
            advisor: Any = self._advisors[position]
            stream: AsyncIterator[ChatClientResponse] = advisor.advise_stream(
                request, self._after(position + 1)
            )
            return stream
        prompt = _model_prompt(request.prompt, self._model)
        name = prompt.options.model or self._model_name

        async def model_stream(
            span: _tracing.SpanHandle,
        ) -> AsyncGenerator[ChatClientResponse, None]:
            usage: Usage | None = None
            async for chunk in self._model.stream(prompt):
                if chunk.usage is not None and not chunk.usage.is_empty():
                    usage = chunk.usage
                yield ChatClientResponse(chunk, request.context)
            _record_usage(span, usage)

        return _tracing.traced_stream(f"chat {name}", _span_attributes(name), model_stream)


def _next_positions(advisors: tuple[Advisor, ...], kind: type) -> tuple[int, ...]:
    """For each position, the index of the first advisor at or after it that is a ``kind``
    (``len(advisors)`` when none is: the model)."""
    positions = [len(advisors)] * (len(advisors) + 1)
    for index in range(len(advisors) - 1, -1, -1):
        positions[index] = index if isinstance(advisors[index], kind) else positions[index + 1]
    return tuple(positions)
