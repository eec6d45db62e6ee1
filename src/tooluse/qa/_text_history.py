"""``TextOnlyHistoryAdvisor``: the answer stage sees earlier tool traffic as text only."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from tooluse.advisors import (
    HIGHEST_PRECEDENCE,
    AdvisorChain,
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
)
from tooluse.messages import AssistantMessage, Message, ToolResponseMessage

__all__ = ["TextOnlyHistoryAdvisor", "text_only"]


def text_only(messages: Sequence[Message]) -> list[Message]:
    """``messages`` without tool traffic: tool results are left out, and a model message
    that called tools keeps only its text (none without text). Provider content goes too:
    Anthropic's holds the turn's ``tool_use`` and server-tool blocks."""
    kept: list[Message] = []
    for message in messages:
        if isinstance(message, ToolResponseMessage):
            continue
        if isinstance(message, AssistantMessage) and (
            message.tool_calls or message.provider_content is not None
        ):
            if not message.text:
                continue
            message = message.model_copy(update={"tool_calls": (), "provider_content": None})
        kept.append(message)
    return kept


class TextOnlyHistoryAdvisor(BaseAdvisor):
    """Sits just before the model of a client without tools (the answer stage), after memory
    and RAG: a history given with the question, or a memory another client wrote, may hold
    tool calls and results, and Anthropic refuses a request that holds them without tool
    definitions ("Requests which include tool_use or tool_result blocks must define tools").
    """

    def __init__(self) -> None:
        super().__init__(name="TextOnlyHistoryAdvisor", order=HIGHEST_PRECEDENCE + 900)

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        return await chain.next_call(_text_only_request(request))

    def advise_stream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        # The next stream itself: no generator of this advisor's that each chunk passes.
        return chain.next_stream(_text_only_request(request))


def _text_only_request(request: ChatClientRequest) -> ChatClientRequest:
    messages = text_only(request.prompt.messages)
    return request.replace(prompt=request.prompt.replace(messages=messages))
