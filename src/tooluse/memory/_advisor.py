"""``MessageChatMemoryAdvisor``: replays a conversation's memory and records each turn."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Final

from tooluse.advisors import (
    HIGHEST_PRECEDENCE,
    AdvisorChain,
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
    TurnKey,
)
from tooluse.history import as_asked, completes_held_round, paused_turn_of
from tooluse.memory._api import CONVERSATION_ID, ChatMemory, validate_conversation_id
from tooluse.messages import (
    ChatResponse,
    Message,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.streaming import StreamAggregator

__all__ = ["DEFAULT_ORDER", "INSIDE_TOOL_LOOP_ORDER", "MessageChatMemoryAdvisor", "merge_history"]

DEFAULT_ORDER = HIGHEST_PRECEDENCE + 200
"""Outside the tool loop (+300): memory sees the user message and the final answer only."""
INSIDE_TOOL_LOOP_ORDER = HIGHEST_PRECEDENCE + 400
"""Inside the tool loop: memory sees, and stores, every round's tool calls and results."""
_QUESTION_AS_SENT: Final = TurnKey[tuple[Message, Message]]("memory: question as sent")
"""Inside the loop: the turn's question as stored (as asked) and as the model was sent it
(rewritten by RAG), so later rounds that replay it from memory, when the loop forwards only
the latest results, show the model what its first round saw."""


class MessageChatMemoryAdvisor(BaseAdvisor):
    """Adds a conversation's memory to each request and stores the new messages after it.

    The conversation id comes from the request context key :data:`CONVERSATION_ID` and is
    required. Memory is prepended without duplicating what the prompt already holds: if the
    stored messages appear as a contiguous run in the prompt nothing is added, and if the
    prompt starts with the tail of the memory only the rest is added (this is what lets the
    advisor sit inside the tool loop whatever history the loop forwards). System messages come
    first; the prompt's own system messages win over remembered ones.

    By default (order ``HIGHEST_PRECEDENCE + 200``, outside the tool loop) it stores the
    prompt's last user message and the final answer; assistant messages that carry tool
    calls are not stored, so memory never holds half a tool exchange. A question rewritten
    by RAG is stored as asked (:func:`~tooluse.history.as_asked`), in any placement. A turn
    that pauses for approval is the exception: the question and the tool rounds so far are
    stored at the pause, the held round recorded whole (the results of the calls that ran,
    and a "not run" result for each held call), so a run that is never resumed does not make
    the model forget, or repeat, what already ran; the resumed run then stores the completed
    round (which replaces the record), its later rounds and the answer. A response with tool
    calls handed to the caller stores nothing.

    With ``inside_tool_loop=True`` (default order ``HIGHEST_PRECEDENCE + 400``) it runs once
    per round and stores tool traffic too: the round's last user message or tool result, then
    the model's message. A turn that ends on tool results with no model call after them (a
    return-direct tool, a call-limit breach) has those results and the final answer stored
    when the loop ends, and a round held for approval is stored as its record
    (:class:`~tooluse.advisors.ToolLoopListener`), so memory never keeps a tool call without
    its result.

    ``read_only=True`` replays memory but never writes it (e.g. a routing stage that must
    resolve "that ship" from the history while only the answering stage records the turn).

    What a request produced is stored in one ``add`` after the model answered (or after the
    stream ended), so a failed request leaves memory as it was and two concurrent requests
    on one conversation never interleave their messages.
    """

    def __init__(
        self,
        memory: ChatMemory,
        *,
        inside_tool_loop: bool = False,
        read_only: bool = False,
        order: int | None = None,
        name: str = "MessageChatMemoryAdvisor",
    ) -> None:
        if order is None:
            order = INSIDE_TOOL_LOOP_ORDER if inside_tool_loop else DEFAULT_ORDER
        super().__init__(name=name, order=order)
        self._memory = memory
        self._inside_tool_loop = inside_tool_loop
        self._read_only = read_only

    @property
    def memory(self) -> ChatMemory:
        return self._memory

    @property
    def inside_tool_loop(self) -> bool:
        return self._inside_tool_loop

    @property
    def read_only(self) -> bool:
        return self._read_only

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        conversation_id = _conversation_id(request)
        augmented = await self._with_memory(conversation_id, request)
        response = await chain.next_call(augmented)
        await self._store(conversation_id, request, response.chat_response)
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        conversation_id = _conversation_id(request)
        augmented = await self._with_memory(conversation_id, request)
        aggregator = StreamAggregator()
        async for item in chain.next_stream(augmented):
            if item.chat_response is not None:
                aggregator.add(item.chat_response)
            yield item
        await self._store(conversation_id, request, aggregator.response())

    async def _with_memory(
        self, conversation_id: str, request: ChatClientRequest
    ) -> ChatClientRequest:
        remembered = await self._remembered(conversation_id, request)
        if not remembered:
            return request
        messages = merge_history(remembered, request.prompt.messages)
        return request.replace(prompt=request.prompt.replace(messages=messages))

    async def replayed_history(self, request: ChatClientRequest) -> list[Message]:
        """The remembered messages this advisor would put before ``request``'s own (none
        without a conversation id)."""
        if CONVERSATION_ID not in request.context:
            return []
        remembered = await self._remembered(_conversation_id(request), request)
        prompt = [m for m in request.prompt.messages if not isinstance(m, SystemMessage)]
        merged = merge_history(remembered, prompt)
        return merged[: len(merged) - len(prompt)]

    async def _remembered(self, conversation_id: str, request: ChatClientRequest) -> list[Message]:
        """The conversation's memory, the current turn's question (inside the loop) as the
        model was sent it."""
        remembered = await self._memory.aget(conversation_id)
        question = request.turn.get(_QUESTION_AS_SENT)
        if question is None:
            return remembered
        stored, sent = question
        for index in range(len(remembered) - 1, -1, -1):
            if remembered[index] == stored:
                remembered[index] = sent
                break
        return remembered

    async def _store(
        self,
        conversation_id: str,
        request: ChatClientRequest,
        response: ChatResponse | None,
    ) -> None:
        if self._read_only:
            return
        # Both are for a memory outside the loop: inside it, the loop has taken the resume
        # and has not ended yet.
        resumed = request.resume is not None
        outcome = request.turn.outcome
        replies: list[Message] = [
            generation.message
            for generation in (response.generations if response is not None else ())
            if self._inside_tool_loop or not generation.message.tool_calls
        ]
        incoming = self._last_incoming(request.prompt.messages)
        # A resumed run's question was stored when it paused. A question rewritten by RAG is
        # stored as asked: the documents and rules are this turn's, not the conversation's.
        received: list[Message] = []
        if incoming is not None and not resumed:
            received.append(as_asked(incoming))
            if self._inside_tool_loop and received[0] is not incoming:
                request.turn[_QUESTION_AS_SENT] = (received[0], incoming)
        if self._inside_tool_loop:
            new = [*received, *replies]
        elif resumed or (outcome is not None and outcome.pause is not None):
            # A turn that paused keeps its tool rounds: what ran before the pause stays known
            # if the run is never resumed, and the resumed run completes the held round.
            new = [*received, *(outcome.rounds if outcome else ()), *replies]
        elif replies:
            new = [*received, *replies]
        else:
            return  # tool calls handed to the caller: its next request completes the turn
        if new:
            await self._memory.aadd(conversation_id, new)

    async def tool_loop_ended(
        self, request: ChatClientRequest, messages: Sequence[Message]
    ) -> None:
        """The tool results and final answer of a turn that ended on tools (inside the loop)."""
        if self._inside_tool_loop and not self._read_only and messages:
            await self._memory.aadd(_conversation_id(request), list(messages))

    def _last_incoming(self, messages: Sequence[Message]) -> Message | None:
        kinds = (UserMessage, ToolResponseMessage) if self._inside_tool_loop else (UserMessage,)
        return next((m for m in reversed(messages) if isinstance(m, kinds)), None)


def _conversation_id(request: ChatClientRequest) -> str:
    if CONVERSATION_ID not in request.context:
        raise ValueError(
            "MessageChatMemoryAdvisor needs a conversation id: put it in the request context "
            f"under {CONVERSATION_ID!r}, e.g. "
            f"client.prompt().context({{{CONVERSATION_ID!r}: 'user-42'}})"
        )
    return validate_conversation_id(request.context[CONVERSATION_ID])


def merge_history(remembered: Sequence[Message], prompt: Sequence[Message]) -> list[Message]:
    """``remembered`` followed by ``prompt``, minus what the prompt already holds.

    System messages go first: the prompt's own, or if it has none, the remembered ones. The
    remembered record of a paused turn that the prompt resumes (a message of the prompt
    carries its id as ``paused_turn``) is left out.
    """
    prompt_system: list[Message] = [m for m in prompt if isinstance(m, SystemMessage)]
    prompt_rest: list[Message] = [m for m in prompt if not isinstance(m, SystemMessage)]
    resumed_turns = {paused_turn_of(m) for m in prompt_rest} - {None}
    # One pass over the memory (a window of 20 or more, read by every stage of every turn).
    memory_system: list[Message] = []
    memory_rest: list[Message] = []
    for message in remembered:
        if isinstance(message, SystemMessage):
            memory_system.append(message)
        elif not resumed_turns or paused_turn_of(message) not in resumed_turns:
            memory_rest.append(message)
    if memory_rest and any(completes_held_round(memory_rest[-1], m) for m in prompt_rest):
        memory_rest.pop()  # a resumed run: the prompt holds the paused round completed
    # Questions compare as asked: memory stores them so, the prompt may hold them rewritten.
    # Of the memory, only what the prompt could hold is compared: all of it when the prompt
    # is as long (it may contain the memory), else its tail as long as the prompt.
    prompt_asked = [as_asked(m) for m in prompt_rest]
    compared = memory_rest[max(0, len(memory_rest) - len(prompt_asked)) :]
    memory_asked = [as_asked(m) for m in compared]
    if len(compared) == len(memory_rest) and _contains_run(prompt_asked, memory_asked):
        history: list[Message] = []
    else:
        history = memory_rest[: len(memory_rest) - _overlap(memory_asked, prompt_asked)]
    return (prompt_system or memory_system) + history + prompt_rest


def _contains_run(messages: list[Message], run: list[Message]) -> bool:
    width = len(run)
    return any(messages[i : i + width] == run for i in range(len(messages) - width + 1))


def _overlap(remembered: list[Message], prompt: list[Message]) -> int:
    """The length of the longest tail of ``remembered`` that the prompt starts with."""
    for size in range(min(len(remembered), len(prompt)), 0, -1):
        if remembered[-size:] == prompt[:size]:
            return size
    return 0
