"""The model ``tooluse serve`` runs when none is configured: ``TestModel``, fully offline."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Sequence

from tooluse.messages import ChatResponse, Message, Prompt, ToolResponseMessage, UserMessage
from tooluse.models import BaseChatModel
from tooluse.search import TOOL_SEARCH_TOOL_NAME
from tooluse.testing import ScriptedModel, TestModel, tool_call
from tooluse.tools import ToolDefinition

__all__ = ["OFFLINE_ANSWER_HEADING", "OFFLINE_NOTICE", "OfflineModel", "mentioned_tools"]

# Said only when the service was given no model: --model test (TOOLUSE_MODEL=test) or a
# ServiceConfig without one. A model that is configured but cannot be reached is not replaced
# by this one (its requests fail, saying why), so the notice never blames a missing setting.
OFFLINE_NOTICE = (
    "The service runs the offline TestModel (--model test, or a ServiceConfig without a "
    "model): it calls the tools a question mentions with made-up arguments and echoes what a "
    "real model would be given. For real answers, start it with a model, e.g. --model "
    "openai:gpt-4o-mini (or TOOLUSE_MODEL)."
)

OFFLINE_ANSWER_HEADING = "[offline TestModel: what a model would be given to answer]"
"""What each offline answer starts with: short, since :data:`OFFLINE_NOTICE` is said once
where the service starts (its log, the page's banner); an answer read on its own (``/v1``)
still says what it is."""

_LATIN_WORD = re.compile(r"[a-z]+")
_IDENTIFIER_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]{2,}")
# Name parts that say nothing about what a tool is for.
_GENERIC = frozenset({"get", "set", "list", "find", "fetch", "query", "search", "current", "tool"})


class _Keywords:
    """When the offline router calls a tool: the question mentions a subject word of its
    name (``get_order_status``: order, status; plurals too), and, for a name that starts with
    a verb other than get/list/find/... (``cancel_order``), that verb as well; or it contains
    one of the CJK terms of the tool's description."""

    __slots__ = ("cjk", "subjects", "verb")

    def __init__(self, definition: ToolDefinition) -> None:
        parts = [part.lower() for part in _IDENTIFIER_PART.findall(definition.name)]
        self.verb = parts[0] if len(parts) > 1 and parts[0] not in _GENERIC else None
        rest = parts[1:] if self.verb is not None else parts
        self.subjects = [p for p in rest if len(p) >= 4 and p not in _GENERIC] or (
            [self.verb] if self.verb is not None else []
        )
        self.cjk = _CJK_RUN.findall(definition.description)

    def match(self, question: str, words: list[str]) -> bool:
        def mentioned(key: str) -> bool:
            return any(word.startswith(key) for word in words)

        latin = (self.verb is None or mentioned(self.verb)) and any(
            mentioned(subject) for subject in self.subjects
        )
        return latin or any(term in question for term in self.cjk)


def mentioned_tools(question: str, definitions: Sequence[ToolDefinition]) -> list[str]:
    """The tools the question mentions (see :class:`_Keywords`): the offline stand-in for a
    model's choice."""
    words = _LATIN_WORD.findall(question.lower())
    return [d.name for d in definitions if _Keywords(d).match(question, words)]


def _searched(messages: Sequence[Message]) -> bool:
    """Whether this turn (the messages after the last user message) has a search result."""
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return False
        if isinstance(message, ToolResponseMessage) and any(
            response.name == TOOL_SEARCH_TOOL_NAME for response in message.responses
        ):
            return True
    return False


def _question(messages: Sequence[Message]) -> str:
    return next((m.text for m in reversed(messages) if isinstance(m, UserMessage)), "")


class OfflineModel(BaseChatModel):
    """``TestModel`` for both stages of the QA pipeline, no network, no key.

    Router stage (tools offered): a ``TestModel`` that calls the tools the question mentions
    (:func:`mentioned_tools`), with made-up arguments valid for their schemas; with tool
    search, it first calls ``toolSearchTool`` with the question, then among the tools found.
    Answer stage (no tools): the answer is :data:`OFFLINE_ANSWER_HEADING` followed by the
    prompt the answer model was given (the fetched data or the retrieved documents, the
    rules, the question), which is what the pipeline is there to build. A fresh test model
    serves each request, so a long-running service keeps no recorded requests.
    """

    model_name = "offline TestModel"

    def _model_for(self, prompt: Prompt) -> TestModel | ScriptedModel:
        question = _question(prompt.messages)
        callbacks = prompt.options.tool_callbacks
        if callbacks:
            definitions = [callback.definition for callback in callbacks]
            names = {definition.name for definition in definitions}
            if TOOL_SEARCH_TOOL_NAME in names and not _searched(prompt.messages):
                # Tool search: first search with the question, as a model would.
                search = tool_call(
                    TOOL_SEARCH_TOOL_NAME, {"query": question}, id=f"call_{uuid.uuid4().hex}"
                )
                return ScriptedModel([search])
            return TestModel(call_tools=mentioned_tools(question, definitions))
        return TestModel(final_text=f"{OFFLINE_ANSWER_HEADING}\n\n{question}", chunk_size=48)

    async def acall(self, prompt: Prompt) -> ChatResponse:
        return await self._model_for(prompt).acall(prompt)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        async for chunk in self._model_for(prompt).stream(prompt):
            yield chunk
