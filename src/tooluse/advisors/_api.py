"""The advisor chain: requests go inward through advisors to the model, responses come back out.

Advisors are sorted by ``order`` ascending; lower is outer (sees the request first and the
response last). ``chain.copy(advisor)`` is the part of the chain after ``advisor``, which lets
a loop (the tool-calling advisor) call the rest of the chain once per iteration.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol, runtime_checkable

from tooluse.messages import ChatResponse, Prompt
from tooluse.models import ChatModel

__all__ = [
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "Advisor",
    "AdvisorChain",
    "CallAdvisor",
    "ChatClientRequest",
    "ChatClientResponse",
    "StreamAdvisor",
]

HIGHEST_PRECEDENCE = -(2**31)
LOWEST_PRECEDENCE = 2**31 - 1


@dataclasses.dataclass(frozen=True, slots=True)
class ChatClientRequest:
    """A prompt plus the request context: a dict advisors share for the whole request
    (e.g. the conversation id under ``chat_memory_conversation_id``)."""

    prompt: Prompt
    context: dict[str, Any] = dataclasses.field(default_factory=dict)

    def replace(
        self, *, prompt: Prompt | None = None, context: dict[str, Any] | None = None
    ) -> ChatClientRequest:
        return ChatClientRequest(
            self.prompt if prompt is None else prompt,
            self.context if context is None else context,
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


class AdvisorChain:
    """An immutable position in a sorted list of advisors, ending at the model."""

    __slots__ = ("_advisors", "_model", "_position")

    def __init__(
        self, advisors: Sequence[Advisor], model: ChatModel, *, _position: int = 0
    ) -> None:
        if _position == 0:
            advisors = tuple(sorted(advisors, key=lambda a: a.order))  # stable for equal orders
        self._advisors: tuple[Advisor, ...] = tuple(advisors)
        self._model = model
        self._position = _position

    @property
    def advisors(self) -> tuple[Advisor, ...]:
        """All advisors of the chain in order, including those already passed."""
        return self._advisors

    @property
    def model(self) -> ChatModel:
        return self._model

    def _after(self, position: int) -> AdvisorChain:
        return AdvisorChain(self._advisors, self._model, _position=position)

    def copy(self, after: Advisor) -> AdvisorChain:
        """The chain that starts right after ``after``."""
        for index, advisor in enumerate(self._advisors):
            if advisor is after:
                return self._after(index + 1)
        raise ValueError(f"Advisor {after.name!r} is not part of this chain")

    async def next_call(self, request: ChatClientRequest) -> ChatClientResponse:
        position = self._position
        while position < len(self._advisors):
            advisor = self._advisors[position]
            position += 1
            if isinstance(advisor, CallAdvisor):
                return await advisor.advise_call(request, self._after(position))
        response = await self._model.acall(request.prompt)
        return ChatClientResponse(response, request.context)

    async def next_stream(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]:
        position = self._position
        while position < len(self._advisors):
            advisor = self._advisors[position]
            position += 1
            if isinstance(advisor, StreamAdvisor):
                async for item in advisor.advise_stream(request, self._after(position)):
                    yield item
                return
        async for chunk in self._model.stream(request.prompt):
            yield ChatClientResponse(chunk, request.context)
