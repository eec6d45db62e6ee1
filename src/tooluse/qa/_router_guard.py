"""What keeps a small model's router on track: ``RouterGuardAdvisor``.

The router's job is to fetch; the answer stage, which has no tools, writes the answer. Sent
back to the model after its tools ran, a capable model replies with an empty message (the
router's "no tool" exit), and a small one calls the same tool again, or the next tool it
sees, until the call limit (Qwen2.5-Coder-1.5B did both). So after ``fetch_rounds`` rounds
that fetched data, this advisor answers for the model with that empty message; and a
response that only repeats calls this turn already made ends the router the same way.

Asked a knowledge question, the same model calls a tool anyway, with arguments made up
from the tool's own examples ("How long do I have to return an item?" ->
``get_order_status(order_id="A1001")``, the id of the parameter's description). With
``grounded_arguments``, a call whose required text arguments appear nowhere in the
conversation is dropped as made up.

Shown earlier turns as messages, where the assistant answered in words, the same model
answers the next question in words too instead of calling a tool ("Where is my order
A1001?" after a knowledge answer). With ``history_as_text``, the earlier turns reach the
model as a quoted note before the question, for what "it" or "there" refer to.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from tooluse.advisors import (
    HIGHEST_PRECEDENCE,
    AdvisorChain,
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
)
from tooluse.messages import (
    AssistantMessage,
    ChatResponse,
    Generation,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.qa._callbacks import LedgerToolCallback

__all__ = ["ROUTER_GUARD_ORDER", "RouterGuardAdvisor"]

ROUTER_GUARD_ORDER = HIGHEST_PRECEDENCE + 375
"""Inside the tool trace (+350): the calls it drops are never reported as made."""

_DONE = ChatResponse(
    generations=(
        Generation(message=AssistantMessage(text=""), metadata={"finish_reason": "stop"}),
    ),
    metadata={"tooluse.qa.router_ended": True},
)


class RouterGuardAdvisor(BaseAdvisor):
    """Inside the router's tool loop: ends it after ``fetch_rounds`` rounds that fetched
    data (a round where a tool recording into the ledger returned a result that is not an
    error; ``None``: no such limit), or when the model only repeats calls already made in
    this turn, by answering for the model with an empty message. With
    ``grounded_arguments``, it drops each call with a required string argument (no enum)
    whose value, case and spacing aside, is in no message of the conversation. With
    ``history_as_text``, the messages before the question go to the model as a note in the
    question's message."""

    def __init__(
        self,
        fetch_rounds: int | None,
        *,
        grounded_arguments: bool = False,
        history_as_text: bool = False,
    ) -> None:
        if fetch_rounds is not None and fetch_rounds < 1:
            raise ValueError(f"fetch_rounds must be >= 1 or None, got {fetch_rounds}")
        super().__init__(name="QaRouterGuardAdvisor", order=ROUTER_GUARD_ORDER)
        self.fetch_rounds = fetch_rounds
        self.grounded_arguments = grounded_arguments
        self.history_as_text = history_as_text

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        turn = _this_turn(request.prompt.messages)
        fetching = {
            callback.definition.name
            for callback in request.prompt.options.tool_callbacks
            if isinstance(callback, LedgerToolCallback)
        }
        if self.fetch_rounds is not None and _fetched_rounds(turn, fetching) >= self.fetch_rounds:
            return ChatClientResponse(_DONE, request.context)
        sent = request
        if self.history_as_text:
            sent = request.replace(
                prompt=dataclasses.replace(
                    request.prompt, messages=_history_as_text(request.prompt.messages)
                )
            )
        response = await chain.next_call(sent)
        chat_response = response.chat_response or ChatResponse()
        calls = [call for g in chat_response.generations for call in g.message.tool_calls]
        if not calls:
            return response
        made = {_signature(call) for call in _calls_made(turn)}
        if all(_signature(call) in made for call in calls):
            return response.replace(chat_response=_DONE)
        if not self.grounded_arguments:
            return response
        conversation = _normalised(" ".join(_texts(request.prompt.messages)))
        schemas = {
            callback.definition.name: callback.definition.input_schema
            for callback in request.prompt.options.tool_callbacks
        }
        kept = [call for call in calls if _grounded(call, schemas.get(call.name), conversation)]
        if len(kept) == len(calls):
            return response
        if not kept:
            return response.replace(chat_response=_DONE)
        return response.replace(chat_response=_keeping(chat_response, kept))


def _this_turn(messages: Sequence[Message]) -> Sequence[Message]:
    """The messages after the last user message: this turn's rounds."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], UserMessage):
            return messages[index + 1 :]
    return messages


def _fetched_rounds(turn: Sequence[Message], fetching: set[str]) -> int:
    return sum(
        1
        for message in turn
        if isinstance(message, ToolResponseMessage)
        and any(r.name in fetching and not r.is_error for r in message.responses)
    )


def _calls_made(turn: Sequence[Message]) -> list[ToolCall]:
    return [
        call
        for message in turn
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    ]


HISTORY_NOTE = "Earlier in this conversation (not live data; only for what the question refers to):"


def _history_as_text(messages: Sequence[Message]) -> tuple[Message, ...]:
    """``messages`` with the user and assistant texts before the last user message moved
    into it as a note (system messages stay; earlier tool traffic is left out: not live)."""
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], UserMessage)),
        None,
    )
    if last is None:
        return tuple(messages)
    lines = [
        f"{'User' if isinstance(m, UserMessage) else 'Assistant'}: {m.text}"
        for m in messages[:last]
        if isinstance(m, UserMessage | AssistantMessage) and m.text
    ]
    if not lines:
        return tuple(messages)
    question = messages[last]
    assert isinstance(question, UserMessage)
    note = "\n".join([HISTORY_NOTE, *lines, "", f"The question: {question.text}"])
    kept = [m for m in messages[:last] if isinstance(m, SystemMessage)]
    return (*kept, question.model_copy(update={"text": note}), *messages[last + 1 :])


def _texts(messages: Sequence[Message]) -> list[str]:
    texts: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage | AssistantMessage) and message.text:
            texts.append(message.text)
        elif isinstance(message, ToolResponseMessage):
            texts += [response.data for response in message.responses]
    return texts


def _normalised(text: str) -> str:
    return " ".join(text.casefold().split())


def _grounded(call: ToolCall, schema: Mapping[str, Any] | None, conversation: str) -> bool:
    """Whether each required free-text argument of ``call`` is in ``conversation``. A call
    whose arguments are not a JSON object, or of a tool without a schema, is kept: the
    tool loop reports what is wrong with it to the model."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return True
    if not isinstance(arguments, dict) or schema is None:
        return True
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        value, spec = arguments.get(name), properties.get(name) or {}
        if (
            isinstance(value, str)
            and spec.get("type") == "string"
            and "enum" not in spec
            and _normalised(value) not in conversation
        ):
            return False
    return True


def _keeping(response: ChatResponse, kept: list[ToolCall]) -> ChatResponse:
    """``response`` with only the ``kept`` calls."""
    generations = tuple(
        g.model_copy(
            update={
                "message": g.message.model_copy(
                    update={"tool_calls": tuple(c for c in g.message.tool_calls if c in kept)}
                )
            }
        )
        for g in response.generations
    )
    return response.model_copy(update={"generations": generations})


def _signature(call: ToolCall) -> tuple[str, str]:
    """A call's tool and arguments, the arguments compared as JSON when they are JSON (key
    order and spacing aside)."""
    try:
        arguments = json.dumps(json.loads(call.arguments or "{}"), sort_keys=True)
    except ValueError:
        arguments = call.arguments
    return call.name, arguments
