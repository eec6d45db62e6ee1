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
``grounded_arguments``, a call whose required arguments appear nowhere in the
conversation is made up: a text that is not in it, a number that is not one of its
numbers (in digits or Chinese numerals), a list or an object holding one; a choice (an
enum, a boolean) is never made up. Such a call is not run. When every call of a response
is made up, often of the wrong tool, the model is told why and asked once more without
those tools, and only a call resting on what the user said is taken. Asked what a term is
or means ("什么是 UTC 时间？", "What does METAR stand for?"), the same model fetches that
term's current value (``get_current_time(timezone="UTC")``), grounded in the question: with
``grounded_arguments``, a call whose arguments are all in the term asked about is not run
either, and with no call left the router ends.

Shown earlier turns as messages, where the assistant answered in words, the same model
answers the next question in words too instead of calling a tool ("Where is my order
A1001?" after a knowledge answer). With ``history_as_text``, the earlier turns reach the
model as a quoted note before the question, for what "it" or "there" refer to.

The same model follows the system message's rule less the further the question is from
it: a ``reminder`` of the rule goes after the question, in the question's message ("我的订单
B2002 到哪了？" then calls the order tool, not the pickup-point one; follow-ups such as "What
about near the Bund?" call the tool the earlier question called instead of replying empty).
"""

from __future__ import annotations

import dataclasses
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from tooluse.advisors import (
    HIGHEST_PRECEDENCE,
    AdvisorChain,
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
)
from tooluse.history import current_turn
from tooluse.messages import (
    AssistantMessage,
    ChatResponse,
    Generation,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    UserMessage,
    sum_usage,
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


def _done(usage: Usage | None) -> ChatResponse:
    """The empty message that ends the router, carrying ``usage``: the tokens of the model
    responses it replaces (the tool loop sums each round's usage; dropped, they would be
    missing from the turn's)."""
    return _DONE if usage is None else _DONE.model_copy(update={"usage": usage})


def _usage_of(*responses: ChatClientResponse) -> Usage | None:
    return sum_usage(*(r.chat_response.usage for r in responses if r.chat_response is not None))


class RouterGuardAdvisor(BaseAdvisor):
    """Inside the router's tool loop: ends it after ``fetch_rounds`` rounds that fetched
    data (a round where a tool recording into the ledger returned a result that is not an
    error; ``None``: no such limit), or when the model only repeats calls already made in
    this turn, by answering for the model with an empty message. With
    ``grounded_arguments``, it drops each call with a required argument that is in no
    message of the conversation (:meth:`_Conversation.says`: texts, case, spacing and
    full-width forms aside; numbers; the items of lists and objects); when it drops every
    call, it tells the model why and asks once more without those tools, taking only a
    call whose required arguments (one at least) are all in the conversation. It also drops
    a call whose arguments are all in the term a definition question asks about
    (:func:`_defined_term`), ending the router when no call is left. With
    ``history_as_text``, the messages before the question go to the model as a note in the
    question's message; a ``reminder`` is added after the question."""

    def __init__(
        self,
        fetch_rounds: int | None,
        *,
        grounded_arguments: bool = False,
        history_as_text: bool = False,
        reminder: str | None = None,
    ) -> None:
        if fetch_rounds is not None and fetch_rounds < 1:
            raise ValueError(f"fetch_rounds must be >= 1 or None, got {fetch_rounds}")
        super().__init__(name="QaRouterGuardAdvisor", order=ROUTER_GUARD_ORDER)
        self.fetch_rounds = fetch_rounds
        self.grounded_arguments = grounded_arguments
        self.history_as_text = history_as_text
        self.reminder = reminder

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        turn = current_turn(request.prompt.messages)
        fetching = {
            callback.definition.name
            for callback in request.prompt.options.tool_callbacks
            if isinstance(callback, LedgerToolCallback)
        }
        if self.fetch_rounds is not None and _fetched_rounds(turn, fetching) >= self.fetch_rounds:
            return ChatClientResponse(_DONE, request.context)
        messages = tuple(request.prompt.messages)
        if self.history_as_text:
            messages = _history_as_text(messages)
        if self.reminder:
            messages = _reminded(messages, self.reminder)
        sent = request.replace(prompt=dataclasses.replace(request.prompt, messages=messages))
        response = await chain.next_call(sent)
        calls = _calls(response)
        if not calls:
            return response
        # Only asked for when there are calls: a round that ends the router skips the turn's.
        made = {_signature(call) for call in _calls_made(turn)}
        if made and all(_signature(call) in made for call in calls):
            return response.replace(chat_response=_done(_usage_of(response)))
        if not self.grounded_arguments:
            return response
        term = _defined_term(request.prompt.messages)
        if term is not None:
            # Asked what a term is or means, the 1.5B fetched that term's current value
            # ("什么是 UTC 时间？" -> get_current_time(timezone="UTC"), the argument in the
            # question, so grounded): a call resting only on the term asked about is not run,
            # and with none left the router ends, as a knowledge question needs no tool.
            calls = [call for call in calls if not _about(call, term)]
            if not calls:
                return response.replace(chat_response=_done(_usage_of(response)))
        conversation = _Conversation(_texts(request.prompt.messages))
        schemas = {
            callback.definition.name: callback.definition.input_schema
            for callback in request.prompt.options.tool_callbacks
        }
        unsaid = [_unsaid(call, schemas.get(call.name), conversation) for call in calls]
        kept = [call for call, missing in zip(calls, unsaid, strict=True) if not missing]
        if kept:
            return _keeping(response, kept, _usage_of(response))
        # Every call was made up, often of the wrong tool (asked where an order is, the
        # 1.5B looked for pickup points "near" a place nobody named): the model hears why,
        # as from a failed call, and decides once more without those tools. Only a call
        # resting on what the user said is taken then (a required argument, all of them in
        # the conversation); anything else ends the router.
        results = tuple(
            ToolResponse(call.id, call.name, _not_said(missing), is_error=True)
            for call, missing in zip(calls, unsaid, strict=True)
        )
        made_up = {call.name for call in calls}
        options = sent.prompt.options
        others = tuple(c for c in options.tool_callbacks if c.definition.name not in made_up)
        if not others:
            return response.replace(chat_response=_done(_usage_of(response)))
        retry = sent.replace(
            prompt=dataclasses.replace(
                sent.prompt,
                options=options.replace(tool_callbacks=others),
                messages=(
                    *sent.prompt.messages,
                    AssistantMessage(text="", tool_calls=tuple(calls)),
                    ToolResponseMessage(responses=results),
                ),
            )
        )
        again = await chain.next_call(retry)
        second = [
            call
            for call in _calls(again)
            if call.name not in made_up
            and _signature(call) not in made
            and not (term is not None and _about(call, term))
            and _rests_on_the_user(call, schemas.get(call.name), conversation)
        ]
        spent = _usage_of(response, again)  # one round of the loop, two model requests
        if not second:
            return again.replace(chat_response=_done(spent))
        return _keeping(again, second, spent)


def _calls(response: ChatClientResponse) -> list[ToolCall]:
    chat_response = response.chat_response or ChatResponse()
    return [call for g in chat_response.generations for call in g.message.tool_calls]


def _not_said(arguments: Sequence[str]) -> str:
    return (
        f"Error: not run. The user gave no {' or '.join(arguments)}: the value is in neither "
        "the question nor the conversation. Call a tool only with values the user gave; if "
        "the question needs no live data, reply with an empty message."
    )


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
    last = _last_user(messages)
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


def _reminded(messages: Sequence[Message], reminder: str) -> tuple[Message, ...]:
    """``messages`` with ``reminder`` after the text of the last user message (the
    question); the conversation's arguments are checked against the messages without it."""
    last = _last_user(messages)
    if last is None:
        return tuple(messages)
    question = messages[last]
    assert isinstance(question, UserMessage)
    text = f"{question.text or ''}\n\n{reminder}"
    return (*messages[:last], question.model_copy(update={"text": text}), *messages[last + 1 :])


def _last_user(messages: Sequence[Message]) -> int | None:
    return next(
        (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], UserMessage)),
        None,
    )


def _texts(messages: Sequence[Message]) -> list[str]:
    texts: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage | AssistantMessage) and message.text:
            texts.append(message.text)
        elif isinstance(message, ToolResponseMessage):
            texts += [response.data for response in message.responses]
    return texts


def _normalised(text: str) -> str:
    """Compatibility forms folded (full-width ``Ｂ２００２`` is ``B2002``), case and spacing
    aside."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


class _Conversation:
    """What a conversation says, for telling an argument it holds from a made-up one: its
    text (:func:`_normalised`) and the numbers written in it, in digits (``2.5``, ``1,000``)
    or in Chinese numerals (``三``, ``十五``, ``两百``)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.text = _normalised(" ".join(texts))
        numbers = {float(n.replace(",", "")) for n in _DIGITS.findall(self.text)}
        numbers.update(_chinese_number(n) for n in _CHINESE_NUMERALS.findall(self.text))
        self.numbers = numbers

    def says(self, value: object, spec: Mapping[str, Any]) -> bool:
        """Whether ``value``, an argument of schema ``spec``, is in the conversation, or
        could not have been made up: a choice among the schema's values (an enum, a
        boolean), or ``None``. Text must be in the conversation; a number must be one of
        its numbers; each item of a list, and each required property of an object, must
        be in it in turn."""
        if value is None or isinstance(value, bool) or _is_choice(spec):
            return True
        if isinstance(value, str):
            return not _allows(spec, "string") or _normalised(value) in self.text
        if isinstance(value, int | float):
            return not _allows(spec, "number", "integer") or float(value) in self.numbers
        if isinstance(value, list):
            items = _alternative(spec, "array").get("items") or {}
            return all(self.says(item, items) for item in value)
        if isinstance(value, dict):
            return not self.unsaid(value, _alternative(spec, "object"))
        return True

    def unsaid(self, arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
        """The required properties of ``arguments`` (of object schema ``schema``) that are
        not in the conversation (:meth:`says`)."""
        properties = schema.get("properties") or {}
        return [
            name
            for name in schema.get("required") or ()
            if not self.says(arguments.get(name), properties.get(name) or {})
        ]


_DIGITS = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
_CHINESE_NUMERALS = re.compile(r"[零〇一二两三四五六七八九十百千万]+")
_CHINESE_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5}
_CHINESE_DIGITS.update({"六": 6, "七": 7, "八": 8, "九": 9})
_CHINESE_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10000}


def _chinese_number(numeral: str) -> float:
    """``三`` 3, ``十五`` 15, ``两百零五`` 205, ``二〇二六`` 2026 (digit by digit)."""
    if not any(unit in numeral for unit in _CHINESE_UNITS):
        return float(int("".join(str(_CHINESE_DIGITS[c]) for c in numeral)))
    total, section, digit = 0, 0, 0
    for char in numeral:
        if char in _CHINESE_DIGITS:
            digit = _CHINESE_DIGITS[char]
        elif char == "万":
            total += (section + digit) * 10000
            section, digit = 0, 0
        else:
            section += (digit or 1) * _CHINESE_UNITS[char]
            digit = 0
    return float(total + section + digit)


def _alternatives(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``spec`` and the schemas of its ``anyOf`` / ``oneOf`` (``Optional[str]`` is
    ``anyOf: [{type: string}, {type: null}]``)."""
    return [spec, *spec.get("anyOf", ()), *spec.get("oneOf", ())]


def _types(spec: Mapping[str, Any]) -> set[str]:
    kind = spec.get("type")
    return {kind} if isinstance(kind, str) else set(kind or ())


def _alternative(spec: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The schema among :func:`_alternatives` for values of JSON type ``kind``."""
    return next((s for s in _alternatives(spec) if kind in _types(s)), spec)


def _allows(spec: Mapping[str, Any], *kinds: str) -> bool:
    """Whether ``spec`` takes free values of one of the JSON types ``kinds``."""
    return any(_types(s) & set(kinds) and not _is_choice(s) for s in _alternatives(spec))


def _is_choice(spec: Mapping[str, Any]) -> bool:
    return "enum" in spec or "const" in spec


def _rests_on_the_user(
    call: ToolCall, schema: Mapping[str, Any] | None, conversation: _Conversation
) -> bool:
    """Whether ``call`` has a required argument, and each is in ``conversation``."""
    required = (schema or {}).get("required") or ()
    return bool(required) and not _unsaid(call, schema, conversation)


def _unsaid(
    call: ToolCall, schema: Mapping[str, Any] | None, conversation: _Conversation
) -> list[str]:
    """The required arguments of ``call`` that are not in ``conversation``
    (:meth:`_Conversation.unsaid`). A call whose arguments are not a JSON object, or of a
    tool without a schema, has none: the tool loop reports what is wrong with it to the
    model."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return []
    if not isinstance(arguments, dict) or schema is None:
        return []
    return conversation.unsaid(arguments, schema)


# The forms of a question asking what a term is or means, on the question as _normalised.
# Not with a determiner ("What is the weather in Paris?"), a "like" ("What is it like
# there?"), a word for now ("What is UTC now?", "现在 UTC 时间是什么？") or for where ("What
# is a good locker near the Bund?"): those ask for a value.
_DEFINITIONS = tuple(
    re.compile(pattern)
    for pattern in (
        r"^(?:what is|what's|what are) (?:meant by )?(?:an? )?(?P<term>.+?)\??$",
        r"^what does (?P<term>.+?) (?:mean|stand for)\??$",
        r"^(?:define|what is the meaning of|the meaning of) (?P<term>.+?)[.?]?$",
        r"^(?:请问)?什么(?:是|叫)(?P<term>.+?)[?。]?$",
        r"^(?P<term>.+?)(?:是什么意思|是啥意思|指的是什么|指什么|的意思是什么|的含义是什么)[?。]?$",
    )
)
_NOT_A_TERM = re.compile(
    r"^(?:the|my|your|our|his|her|its|their|this|that|these|those) |'s\b| like$"
    r"|\b(?:now|today|currently|current|right now|at the moment|tonight|tomorrow)\b"
    r"|\b(?:near|nearest|around|close to|in|at)\b"
    r"|现在|目前|当前|今天|此刻|最新|附近|哪"
)


def _defined_term(messages: Sequence[Message]) -> str | None:
    """The term the question (the last user message) asks the meaning of, _normalised
    ("什么是 UTC 时间？" -> ``"utc 时间"``, "What does METAR stand for?" -> ``"metar"``), or
    ``None`` when it asks something else."""
    last = _last_user(messages)
    question = messages[last] if last is not None else None
    if not isinstance(question, UserMessage):
        return None
    text = _normalised(question.text or "")
    for pattern in _DEFINITIONS:
        match = pattern.match(text)
        if match and not _NOT_A_TERM.search(match["term"]):
            return match["term"].strip()
    return None


def _about(call: ToolCall, term: str) -> bool:
    """Whether ``call``'s arguments, each text and number, are all in ``term`` (none
    counts): the call fetches the current value of the very thing asked about."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return False
    return isinstance(arguments, dict) and all(
        _normalised(str(value)) in term for value in _leaves(arguments)
    )


def _leaves(value: object) -> list[object]:
    """The texts and numbers in a JSON value (choices such as booleans and nulls aside)."""
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [] if value is None or isinstance(value, bool) else [value]


def _keeping(
    response: ChatClientResponse, kept: list[ToolCall], usage: Usage | None
) -> ChatClientResponse:
    """``response`` with only the ``kept`` calls, and ``usage``."""
    chat_response = response.chat_response or ChatResponse()
    generations = tuple(
        g.model_copy(
            update={
                "message": g.message.model_copy(
                    update={"tool_calls": tuple(c for c in g.message.tool_calls if c in kept)}
                )
            }
        )
        for g in chat_response.generations
    )
    kept_response = chat_response.model_copy(update={"generations": generations, "usage": usage})
    return response.replace(chat_response=kept_response)


def _signature(call: ToolCall) -> tuple[str, str]:
    """A call's tool and arguments, the arguments compared as JSON when they are JSON (key
    order and spacing aside)."""
    try:
        arguments = json.dumps(json.loads(call.arguments or "{}"), sort_keys=True)
    except ValueError:
        arguments = call.arguments
    return call.name, arguments
