"""``LoggingAdvisor``: logs each request and response that passes it (Spring AI's
``SimpleLoggerAdvisor``)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

from tooluse.advisors._api import (
    AdvisorChain,
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
)
from tooluse.messages import ChatResponse
from tooluse.streaming import StreamAggregator

__all__ = ["LoggingAdvisor", "describe_request", "describe_response"]

_TEXT_LIMIT = 300


def _short(text: str | None) -> str:
    if text is None:
        return "None"
    return repr(text if len(text) <= _TEXT_LIMIT else f"{text[:_TEXT_LIMIT]}...")


def describe_request(request: ChatClientRequest) -> str:
    """One line: message count, the last message, the offered tools."""
    prompt = request.prompt
    last = prompt.messages[-1] if prompt.messages else None
    if last is None:
        last_text = "none"
    elif last.role == "tool":
        last_text = f"tool results for {[r.name for r in last.responses]}"
    else:
        last_text = f"{last.role} {_short(getattr(last, 'text', None))}"
    tools = [callback.definition.name for callback in prompt.options.tool_callbacks]
    return f"request: {len(prompt.messages)} messages, last {last_text}, tools {tools}"


def describe_response(response: ChatResponse | None) -> str:
    """One line per generation (text, tool calls, finish reason) and the usage."""
    if response is None:
        return "response: none"
    parts = []
    for generation in response.generations:
        message = generation.message
        calls = [f"{call.name}({call.arguments})" for call in message.tool_calls]
        parts.append(
            f"text {_short(message.text)}, tool calls {calls}, finish {generation.finish_reason}"
        )
    usage = response.usage
    tokens = (
        "no usage"
        if usage is None
        else f"tokens {usage.prompt_tokens}+{usage.completion_tokens}={usage.total_tokens}"
    )
    return f"response: {'; '.join(parts) or 'no generations'}; {tokens}"


class LoggingAdvisor(BaseAdvisor):
    """Logs the request on the way in and the response on the way out (a stream's response
    once, merged, when it ends) to the ``tooluse.advisors`` logger at ``level``.

    Order 0 by default, which is inside the tool loop (``HIGHEST_PRECEDENCE + 300``), so it
    logs every model call of a loop; give a lower order to log only the outer request and
    final answer. ``describe_request`` / ``describe_response`` change what is written.
    """

    def __init__(
        self,
        *,
        order: int = 0,
        level: int = logging.DEBUG,
        logger: logging.Logger | None = None,
        describe_request: Callable[[ChatClientRequest], str] = describe_request,
        describe_response: Callable[[ChatResponse | None], str] = describe_response,
        name: str = "LoggingAdvisor",
    ) -> None:
        super().__init__(name=name, order=order)
        self._level = level
        self._logger = logger or logging.getLogger("tooluse.advisors")
        self._describe_request = describe_request
        self._describe_response = describe_response

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        enabled = self._logger.isEnabledFor(self._level)
        if enabled:
            self._logger.log(self._level, "%s", self._describe_request(request))
        response = await chain.next_call(request)
        if enabled:
            self._logger.log(self._level, "%s", self._describe_response(response.chat_response))
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        if not self._logger.isEnabledFor(self._level):
            async for item in chain.next_stream(request):
                yield item
            return
        self._logger.log(self._level, "%s", self._describe_request(request))
        aggregator = StreamAggregator()
        async for item in chain.next_stream(request):
            if item.chat_response is not None:
                aggregator.add(item.chat_response)
            yield item
        self._logger.log(self._level, "%s", self._describe_response(aggregator.response()))
