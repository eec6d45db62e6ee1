"""Hand-written ``ToolCallback``s for the loop, client and test-double tests (each records its
calls and answers from a plain function), and a ``ToolCallingAdvisor`` that records its hooks."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from tooluse import (
    ChatResponse,
    Message,
    ToolCallingAdvisor,
    ToolContext,
    ToolDefinition,
    ToolExecutionException,
    ToolMetadata,
)
from tooluse.advisors import AdvisorChain, ChatClientRequest, ChatClientResponse
from tooluse.calling import ToolExecutionResult

OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


class RecordingTool:
    """Tool ``name`` with ``schema``; ``fn(arguments: dict, context) -> str`` gives the result
    (default: ``"<name> ok"``). Every call is appended to :attr:`calls`."""

    def __init__(
        self,
        name: str,
        fn: Callable[[dict[str, Any], ToolContext | None], str] | None = None,
        *,
        schema: dict[str, Any] | None = None,
        description: str = "",
        **metadata: Any,
    ) -> None:
        # plain attributes satisfy the protocol's read-only properties
        self.definition = ToolDefinition(
            name=name,
            description=description or f"The {name} tool.",
            input_schema=schema if schema is not None else OBJECT_SCHEMA,
        )
        self.metadata = ToolMetadata(**metadata)
        self._fn = fn or (lambda arguments, context: f"{name} ok")
        self.calls: list[tuple[dict[str, Any], ToolContext | None]] = []

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str:
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError as exc:
            raise ToolExecutionException(f"Arguments are not JSON: {exc}") from exc
        self.calls.append((parsed, context))
        return self._fn(parsed, context)


class HookRecorder(ToolCallingAdvisor):
    """Counts each hook call in :attr:`counts` (``emitted``: chunks of the finalized stream)
    and keeps the responses ``do_after_call`` saw."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.counts: Counter[str] = Counter()
        self.seen_after: list[ChatResponse | None] = []

    async def do_initialize_loop(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientRequest:
        self.counts["init"] += 1
        return request

    async def do_before_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientRequest:
        self.counts["before"] += 1
        return request

    async def do_after_call(
        self, response: ChatClientResponse, chain: AdvisorChain
    ) -> ChatClientResponse:
        self.counts["after"] += 1
        self.seen_after.append(response.chat_response)
        return response

    async def do_get_next_instructions(
        self,
        request: ChatClientRequest,
        response: ChatClientResponse | None,
        result: ToolExecutionResult,
    ) -> Sequence[Message]:
        self.counts["next"] += 1
        return await super().do_get_next_instructions(request, response, result)

    async def do_finalize_loop(
        self, response: ChatClientResponse, chain: AdvisorChain
    ) -> ChatClientResponse:
        self.counts["final"] += 1
        return response

    def do_finalize_stream(
        self, stream: AsyncIterator[ChatClientResponse], chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        self.counts["finalize_stream"] += 1

        async def counted() -> AsyncIterator[ChatClientResponse]:
            async for item in stream:
                self.counts["emitted"] += 1
                yield item

        return counted()
