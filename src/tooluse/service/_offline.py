"""The model ``tooluse serve`` runs when none is configured: ``TestModel``, fully offline."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence

from tooluse.messages import ChatResponse, Message, Prompt, UserMessage
from tooluse.testing import TestModel
from tooluse.tools import ToolDefinition

__all__ = ["OFFLINE_NOTICE", "OfflineModel", "mentioned_tools"]

OFFLINE_NOTICE = (
    "No model is configured, so the service runs the offline TestModel: it calls the tools "
    "a question mentions with made-up arguments and echoes what a real model would be "
    "given. Set TOOLUSE_MODEL (e.g. openai:gpt-4o-mini) or pass --model for real answers."
)

_LATIN_WORD = re.compile(r"[a-z]+")
_IDENTIFIER_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]{2,}")
# Name parts that say nothing about what a tool is for.
_GENERIC = frozenset({"get", "set", "list", "find", "fetch", "query", "search", "current", "tool"})


def _keywords(definition: ToolDefinition) -> tuple[frozenset[str], tuple[str, ...]]:
    """The words of a tool's name (Latin, lower case) and the CJK terms of its description."""
    parts = {part.lower() for part in _IDENTIFIER_PART.findall(definition.name)}
    latin = frozenset(part for part in parts if len(part) >= 4 and part not in _GENERIC)
    return latin, tuple(_CJK_RUN.findall(definition.description))


def mentioned_tools(question: str, definitions: Sequence[ToolDefinition]) -> list[str]:
    """The tools whose name words (``get_order_status``: order, status; plurals too) or CJK
    description terms occur in ``question``: the offline stand-in for a model's choice."""
    words = _LATIN_WORD.findall(question.lower())
    chosen = []
    for definition in definitions:
        latin, cjk = _keywords(definition)
        if any(word.startswith(key) for word in words for key in latin) or any(
            term in question for term in cjk
        ):
            chosen.append(definition.name)
    return chosen


def _question(messages: Sequence[Message]) -> str:
    return next((m.text for m in reversed(messages) if isinstance(m, UserMessage)), "")


class OfflineModel:
    """``TestModel`` for both stages of the QA pipeline, no network, no key.

    Router stage (tools offered): a ``TestModel`` that calls the tools the question mentions
    (:func:`mentioned_tools`), with arguments generated from their schemas. Answer stage (no
    tools): the answer is :data:`OFFLINE_NOTICE` followed by the prompt the answer model was
    given (the fetched data or the retrieved documents, the rules, the question), which is
    what the pipeline is there to build. A fresh ``TestModel`` serves each request, so a
    long-running service keeps no recorded requests.
    """

    model_name = "offline TestModel"

    def _model_for(self, prompt: Prompt) -> TestModel:
        question = _question(prompt.messages)
        callbacks = prompt.options.tool_callbacks
        if callbacks:
            definitions = [callback.definition for callback in callbacks]
            return TestModel(call_tools=mentioned_tools(question, definitions))
        return TestModel(final_text=f"[{OFFLINE_NOTICE}]\n\n{question}", chunk_size=48)

    def call(self, prompt: Prompt) -> ChatResponse:
        return self._model_for(prompt).call(prompt)

    async def acall(self, prompt: Prompt) -> ChatResponse:
        return await self._model_for(prompt).acall(prompt)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        async for chunk in self._model_for(prompt).stream(prompt):
            yield chunk
