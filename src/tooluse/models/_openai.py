"""``OpenAIChatModel``: any OpenAI-compatible Chat Completions endpoint over the official SDK.

Works with OpenAI, DeepSeek, Qwen (DashScope compatible mode), Ollama, vLLM and llama.cpp
server. Their streams differ in ways that break naive merging, all handled here: ``null``
content, the call id only on a call's first delta (or repeated on every delta), names and
arguments split across deltas, arguments missing or empty, deltas without an ``index``,
parallel calls that all claim ``index`` 0 but carry distinct ids, calls without an id (each
gets one) or sharing one (a server numbering calls per tool name: the first keeps it, the
others get ``<id>_2``, ... as :func:`~tooluse.history.distinct_call_ids` gives; the loop
and the providers match results by id), arguments sent as a JSON
object (llama.cpp, TGI), usage in a final chunk with no choices (or only in Groq's
``x_groq.usage``), and cache hits reported as ``prompt_tokens_details.cached_tokens``
(OpenAI) or ``prompt_cache_hit_tokens`` (DeepSeek).

Reasoning that a server returns beside the answer (``reasoning_content``: DeepSeek, Qwen, vLLM;
``reasoning``: Ollama, OpenRouter) is kept on the message, and sent back as
``reasoning_content`` by DeepSeek's rule: between two user messages, if the model called a
tool, every assistant message there (the answer after the tool results too) goes back with its
reasoning in all later requests (its thinking mode answers 400 to a history that drops it, even
where the reasoning came empty: it goes back as ``""``); where it called none, without (DeepSeek
ignores it there; its older reasoner model rejected the field anywhere, and had no tool calls).
OpenAI's own API never gets the field: it returns no reasoning and rejects unknown message
fields.

A message's ``provider_content`` (a turn in another provider's own form, such as Anthropic's
server tool blocks) is not sent: an assistant message goes as its text, tool calls and
reasoning, which every message has whichever model made it.

Retries (429, 408, 409, 5xx, connection errors; exponential backoff with jitter, capped at
8 s, honouring ``Retry-After`` up to 120 s) and timeouts are the SDK's own, configured through
``max_retries`` and ``timeout``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

import openai
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

from tooluse.history import distinct_call_ids
from tooluse.messages import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    Generation,
    Message,
    Prompt,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from tooluse.models._calls import IncomingCalls
from tooluse.models._errors import ProviderError
from tooluse.models._names import ToolNameAliases
from tooluse.models._openai_sdk import FAILURES, OpenAISdkChatModel
from tooluse.models._sdk_model import ProviderSettings
from tooluse.models._text_tool_calls import recovered_stream, text_tool_calls
from tooluse.models._utf16 import StreamedText
from tooluse.tools import ToolDefinition

__all__ = ["OpenAIChatModel"]

logger = logging.getLogger(__name__)

_TOOL_CHOICE_KEYWORDS = frozenset({"auto", "none", "required"})


@dataclasses.dataclass(frozen=True, slots=True)
class _Request:
    params: dict[str, Any]
    calls: IncomingCalls

    def tool_call(self, call_id: str | None, name: str | None, arguments: object) -> ToolCall:
        return self.calls.tool_call(call_id or _new_call_id(), name, _arguments_text(arguments))

    def offered(self) -> frozenset[str]:
        """The names of the tools the request offers, as sent."""
        return frozenset(tool["function"]["name"] for tool in self.params.get("tools", ()))

    def text_call(self, name: str, arguments: str) -> ToolCall:
        return self.tool_call(None, name, arguments)


def _arguments_text(arguments: object) -> str | None:
    """``function.arguments`` as JSON text. It is a string in OpenAI's format; llama.cpp's
    server (``--tool-args-object``, for a while its default) and Hugging Face TGI send the
    object itself, which the SDK passes through unvalidated."""
    if arguments is None or isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def _new_call_id() -> str:
    # Some servers (older llama.cpp, some vLLM parsers) send calls without ids; results are
    # matched by id, so each call needs a unique one.
    return f"call_{uuid.uuid4().hex[:24]}"


class OpenAIChatModel(OpenAISdkChatModel):
    """A chat model behind an OpenAI-compatible Chat Completions API.

    ``default_options`` apply to every request (the request's own options win).
    ``strict_tools=True`` sends tools with ``"strict": true`` and strict-mode schemas (a tool
    whose schema strict mode cannot express is sent non-strict, with a warning).
    ``max_tokens_field`` names the request field for ``ChatOptions.max_tokens``; ``None``
    decides by the endpoint: ``"max_completion_tokens"`` for ``api.openai.com`` (``max_tokens``
    is deprecated there, and its reasoning models reject it), ``"max_tokens"`` elsewhere, which
    compatible servers and Azure's older API versions know. ``stream_usage=False`` omits
    ``stream_options`` for servers that reject it. ``send_reasoning`` says whether assistant
    messages go back with their reasoning as ``reasoning_content`` (by DeepSeek's rule, see
    the module); ``None`` decides by the endpoint: off for OpenAI's own API
    (``api.openai.com``, Azure OpenAI), which rejects unknown message fields, on elsewhere
    (set it ``False`` for other servers that reject the field).
    ``text_tool_calls=True`` recovers the tool calls a server left in the text, for models
    that write them as JSON (often a fenced ```` ```json ```` block) where the server's
    parser expects other markers: a response whose whole text is calls to offered tools
    comes back as those calls (streamed: such text is held back until it is clear whether
    it is calls; other text streams as it comes).
    ``client`` (an ``openai.AsyncOpenAI``) injects a preconfigured SDK client; it is used as it
    is on every event loop, and its connections belong to the loop that opened them: use it
    from one loop only. The async clients the model builds itself are one per event loop, so
    one model serves ``ChatClient.call()``, ``asyncio.run(...)`` after ``asyncio.run(...)``
    and a test suite with a loop per test.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        default_options: ChatOptions | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        max_retries: int = 2,
        strict_tools: bool = False,
        stream_usage: bool = True,
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None,
        send_reasoning: bool | None = None,
        text_tool_calls: bool = False,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        super().__init__(
            model,
            ProviderSettings(
                api_key=api_key,
                base_url=base_url,
                default_options=default_options,
                extra_headers=extra_headers,
                timeout=timeout,
                max_retries=max_retries,
                strict_tools=strict_tools,
            ),
            client,
        )
        self.stream_usage = stream_usage
        self.max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = (
            max_tokens_field
            or ("max_completion_tokens" if _host(self.base_url) == _OPENAI_HOST else "max_tokens")
        )
        self.send_reasoning = (
            not _is_openais_own_api(self.base_url) if send_reasoning is None else send_reasoning
        )
        self.text_tool_calls = text_tool_calls

    # -- the ChatModel protocol -----------------------------------------------------------

    async def acall(self, prompt: Prompt) -> ChatResponse:
        request = self._request(prompt)
        try:
            completion = await self._send(self._client.chat.completions.create, request.params)
        except FAILURES as exc:
            raise self._provider_error(exc) from exc
        return self._response(completion, request)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Text arrives as it is generated; each tool call arrives whole (real name, complete
        arguments) when its choice finishes, carrying the call's id."""
        request = self._request(prompt)
        chunks = self._stream(request)
        offered = request.offered()
        if self.text_tool_calls and offered:
            chunks = recovered_stream(chunks, offered, request.text_call)
        async for chunk in chunks:
            yield chunk

    async def _stream(self, request: _Request) -> AsyncIterator[ChatResponse]:
        params = dict(request.params)
        if self.stream_usage:
            params["stream_options"] = {"include_usage": True}
        state = _StreamState(request)
        create = self._client.chat.completions.create
        try:
            chunks = await self._send(lambda **sent: create(**sent, stream=True), params)
            async with chunks:
                async for chunk in chunks:
                    response = state.add(chunk)
                    if response is not None:
                        yield response
        except FAILURES as exc:
            raise self._provider_error(exc, chunks_received=state.chunks_received) from exc
        final = state.finish()
        if final is not None:
            yield final

    # -- request ----------------------------------------------------------------------------

    def _request(self, prompt: Prompt) -> _Request:
        options, definitions, aliases = self._options_and_tools(prompt)
        params: dict[str, Any] = {
            "model": options.model or self.model,
            "messages": _messages(prompt.messages, aliases, self.send_reasoning),
        }
        strict_schemas: dict[str, Mapping[str, Any]] = {}
        if definitions:
            params["tools"] = [self._tool(d, aliases, strict_schemas) for d in definitions]
            if options.tool_choice is not None:
                params["tool_choice"] = _tool_choice(options.tool_choice, aliases)
            if options.parallel_tool_calls is not None:
                params["parallel_tool_calls"] = options.parallel_tool_calls
        if options.temperature is not None:
            params["temperature"] = options.temperature
        if options.top_p is not None:
            params["top_p"] = options.top_p
        if options.max_tokens is not None:
            params[self.max_tokens_field] = options.max_tokens
        if options.stop:
            params["stop"] = list(options.stop)
        if options.extra:
            params["extra_body"] = dict(options.extra)
        if self._extra_headers:
            params["extra_headers"] = self._extra_headers
        return _Request(params, IncomingCalls(aliases, strict_schemas))

    def _tool(
        self,
        definition: ToolDefinition,
        aliases: ToolNameAliases,
        strict_schemas: dict[str, Mapping[str, Any]],
    ) -> dict[str, Any]:
        function, strict = self._function(definition, aliases, strict_schemas)
        if strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    # -- response ---------------------------------------------------------------------------

    def _response(self, completion: ChatCompletion, request: _Request) -> ChatResponse:
        generations = []
        for choice in completion.choices:
            message = choice.message
            calls = []
            for call in message.tool_calls or ():
                function = getattr(call, "function", None)
                if function is None:  # a custom (grammar) tool call: we never offer those
                    raise ProviderError(
                        f"openai: unsupported tool call type {call.type!r}", provider=self.provider
                    )
                calls.append(request.tool_call(call.id, function.name, function.arguments))
            metadata: dict[str, Any] = {"finish_reason": choice.finish_reason}
            if message.refusal:
                metadata["refusal"] = message.refusal
            text = message.content
            if self.text_tool_calls and not calls and text:
                recovered = text_tool_calls(text, request.offered())
                if recovered is not None:
                    calls = [request.text_call(name, arguments) for name, arguments in recovered]
                    text, metadata["finish_reason"] = None, "tool_calls"
            generations.append(
                Generation(
                    message=AssistantMessage(
                        text=text,
                        tool_calls=distinct_call_ids(calls),
                        reasoning=_reasoning(message.model_extra),
                    ),
                    metadata=metadata,
                )
            )
        metadata = {"id": completion.id, "model": completion.model, "provider": self.provider}
        return ChatResponse(
            generations=tuple(generations),
            usage=_usage(completion.usage) if completion.usage is not None else None,
            metadata=_with_reasoning_tokens(metadata, completion.usage),
        )


_OPENAI_HOST = "api.openai.com"


def _host(base_url: str) -> str:
    return urlsplit(base_url).hostname or ""


def _is_openais_own_api(base_url: str) -> bool:
    host = _host(base_url)
    return host == _OPENAI_HOST or host.endswith(".openai.azure.com")


def _messages(
    messages: Sequence[Message], aliases: ToolNameAliases, send_reasoning: bool
) -> list[dict[str, Any]]:
    with_reasoning = _in_tool_calling_questions(messages) if send_reasoning else frozenset()
    wire: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            wire.append({"role": "system", "content": message.text})
        elif isinstance(message, UserMessage):
            wire.append({"role": "user", "content": message.text})
        elif isinstance(message, AssistantMessage):
            entry: dict[str, Any] = {"role": "assistant", "content": message.text}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": aliases.to_provider(call.name),
                            # Several servers reject an empty string here.
                            "arguments": call.arguments or "{}",
                        },
                    }
                    for call in message.tool_calls
                ]
            elif message.text is None:
                entry["content"] = ""
            if position in with_reasoning and message.reasoning:
                # Empty too: DeepSeek checks that the field is there.
                entry["reasoning_content"] = message.reasoning_text()
            wire.append(entry)
        elif isinstance(message, ToolResponseMessage):
            wire.extend(_tool_messages(message.responses))
    return wire


_IMAGES_FOLLOW = "(The image(s) of this result follow in the next user message.)"


def _tool_messages(responses: Sequence[ToolResponse]) -> list[dict[str, Any]]:
    """One ``tool`` message per result, then, when results have images, one ``user`` message
    holding them as ``image_url`` parts (data URLs).

    A Chat Completions ``tool`` message takes only text parts, so the images follow in a
    user message, after every tool message of the round (the API wants those right after
    the assistant's tool calls): the workaround pydantic-ai uses
    (``ToolReturnPart.model_response_str_and_user_content`` and ``_map_user_message`` in
    ``pydantic_ai/models/openai.py``); openai-agents drops the images instead. The
    Responses API takes images in a ``function_call_output`` itself: an adapter for it
    sends ``ImagePart.data_url()`` there, not this.
    """
    wire: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for response in responses:
        content = response.data
        if response.images:
            content = f"{content}\n{_IMAGES_FOLLOW}" if content else _IMAGES_FOLLOW
            images.append(
                {
                    "type": "text",
                    "text": f"The image(s) of the result of {response.name} ({response.id}):",
                }
            )
            images.extend(
                {"type": "image_url", "image_url": {"url": image.data_url()}}
                for image in response.images
            )
        wire.append({"role": "tool", "tool_call_id": response.id, "content": content})
    if images:
        wire.append({"role": "user", "content": images})
    return wire


def _in_tool_calling_questions(messages: Sequence[Message]) -> frozenset[int]:
    """Positions of the assistant messages that answer a user message with tool calls among
    them: DeepSeek wants the reasoning of each (the answer after the tool results too) in every
    later request."""
    marked: set[int] = set()
    answer: list[int] = []  # the assistant messages since the last user message
    called = False
    for position, message in enumerate(messages):
        if isinstance(message, UserMessage):
            if called:
                marked.update(answer)
            answer, called = [], False
        elif isinstance(message, AssistantMessage):
            answer.append(position)
            called = called or bool(message.tool_calls)
    if called:
        marked.update(answer)
    return frozenset(marked)


def _reasoning(extra: Mapping[str, Any] | None) -> tuple[Reasoning, ...]:
    """The reasoning a server put beside the content; one it sent empty is kept (empty), as
    DeepSeek wants the field back on a tool-call turn even then."""
    text = _reasoning_text(extra)
    return () if text is None else (Reasoning(text=text),)


def _reasoning_text(extra: Mapping[str, Any] | None) -> str | None:
    """The reasoning a server put beside the content, under either name in use: ``""`` when
    the field came empty, ``None`` when there was none."""
    texts = [
        text for field in _REASONING_FIELDS if isinstance(text := (extra or {}).get(field), str)
    ]
    return next((text for text in texts if text), "" if texts else None)


_REASONING_FIELDS = ("reasoning_content", "reasoning")


def _tool_choice(choice: str, aliases: ToolNameAliases) -> str | dict[str, Any]:
    if choice in _TOOL_CHOICE_KEYWORDS:
        return choice
    return {"type": "function", "function": {"name": aliases.to_provider(choice)}}


def _usage(usage: CompletionUsage) -> Usage:
    details = usage.prompt_tokens_details
    cache_read = details.cached_tokens if details is not None else None
    if cache_read is None:  # DeepSeek reports cache hits at the top level
        hits = (usage.model_extra or {}).get("prompt_cache_hit_tokens")
        cache_read = hits if isinstance(hits, int) else None
    return Usage(
        prompt_tokens=usage.prompt_tokens or 0,
        completion_tokens=usage.completion_tokens or 0,
        total_tokens=usage.total_tokens or 0,
        cache_read_tokens=cache_read,
        cache_write_tokens=details.cache_write_tokens if details is not None else None,
    )


def _with_reasoning_tokens(
    metadata: dict[str, Any], usage: CompletionUsage | None
) -> dict[str, Any]:
    """``metadata`` with the reasoning tokens when the usage reports them (they are counted in
    ``completion_tokens``, as billed), as the Responses adapter gives them."""
    details = usage.completion_tokens_details if usage is not None else None
    count = details.reasoning_tokens if details is not None else None
    return {**metadata, "reasoning_tokens": count} if isinstance(count, int) else metadata


def _groq_usage(extra: Mapping[str, Any] | None) -> Usage | None:
    """Groq's stream usage: ``x_groq.usage`` on the finishing chunk, beside its timings."""
    groq = (extra or {}).get("x_groq")
    reported = groq.get("usage") if isinstance(groq, Mapping) else None
    if not isinstance(reported, Mapping):
        return None
    try:
        return _usage(CompletionUsage.model_validate(reported))
    except ValueError:  # pydantic's ValidationError: counts that are not counts
        return None


@dataclasses.dataclass(slots=True)
class _PendingCall:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = dataclasses.field(default_factory=list)
    # An ``arguments`` field arrived (even ""): the name is whole, a repeat of it is not a
    # fragment.
    arguments_begun: bool = False


class _ChoiceState:
    __slots__ = (
        "by_index",
        "calls",
        "last",
        "reasoning",
        "reasoning_came",
        "reasoning_shown",
        "refusal",
        "text",
    )

    def __init__(self) -> None:
        self.calls: list[_PendingCall] = []
        self.by_index: dict[int, _PendingCall] = {}
        self.last: _PendingCall | None = None
        self.refusal: list[str] = []  # refusal deltas, reported whole when the choice ends
        self.text = StreamedText()
        self.reasoning = StreamedText()
        # The reasoning field came (if only empty), and whether any of its text was shown: a
        # choice whose reasoning came only empty ends with an empty part (see ``_reasoning``).
        self.reasoning_came = False
        self.reasoning_shown = False

    def add(self, delta: ChoiceDeltaToolCall) -> None:
        call_id = delta.id or ""
        index: int | None = delta.index
        call = self.by_index.get(index) if index is not None else self.last
        if (
            call is None
            or (call_id and call.call_id and call_id != call.call_id)
            or (index is None and not call_id and _begins_another_call(call, delta))
        ):
            # A new call: first sight of an index, or a new id where a server numbers every
            # parallel call 0 (or sends no index at all), or, with neither, a new name.
            call = _PendingCall()
            self.calls.append(call)
            if index is not None:
                self.by_index[index] = call
        self.last = call
        if call_id and not call.call_id:
            call.call_id = call_id
        function = delta.function
        if function is None:
            return
        if function.name and not (call.arguments_begun and function.name == call.name):
            call.name += function.name  # fragments concatenate; a repeat after arguments is not
        if function.arguments is not None:
            call.arguments_begun = True
        arguments = _arguments_text(function.arguments)
        if arguments:
            call.arguments.append(arguments)


def _begins_another_call(call: _PendingCall, delta: ChoiceDeltaToolCall) -> bool:
    """Whether a delta with neither ``index`` nor ``id`` is the start of another call rather
    than more of ``call``: it names a tool after ``call``'s arguments began, and either
    another tool or (arguments following ``call``'s complete ones) the same tool again. A
    name repeated mid-arguments, or with nothing after, is the same call's."""
    function = delta.function
    if function is None or not function.name or not call.arguments:
        return False
    if function.name != call.name:
        return True
    return bool(_arguments_text(function.arguments)) and _is_json("".join(call.arguments))


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


class _StreamState:
    """Translates SDK chunks to ``ChatResponse`` chunks; holds each choice's tool calls until
    the choice finishes so they leave with real names and cleaned arguments, and a surrogate
    half ending a text or reasoning delta until the next delta completes it."""

    def __init__(self, request: _Request) -> None:
        self._request = request
        self._choices: dict[int, _ChoiceState] = {}
        self._metadata: dict[str, Any] = {"provider": "openai"}
        self._usage_seen = False
        self._groq_usage: Usage | None = None  # reported at the end if no usage chunk came
        self.chunks_received = 0

    def add(self, chunk: ChatCompletionChunk) -> ChatResponse | None:
        self.chunks_received += 1
        if chunk.id:
            self._metadata["id"] = chunk.id
        if chunk.model:
            self._metadata["model"] = chunk.model
        generations: dict[int, Generation] = {}
        for choice in chunk.choices:
            index = choice.index or 0
            delta = choice.delta
            state = self._choices.get(index)
            if state is None:
                state = self._choices[index] = _ChoiceState()
            for fragment in (delta.tool_calls or ()) if delta is not None else ():
                state.add(fragment)
            if delta is not None and delta.refusal:
                state.refusal.append(delta.refusal)
            text = state.text.add(delta.content or "") if delta is not None else ""
            field = _reasoning_text(delta.model_extra) if delta is not None else None
            reasoning = state.reasoning.add(field or "")
            state.reasoning_came = state.reasoning_came or field is not None
            state.reasoning_shown = state.reasoning_shown or bool(reasoning)
            finish_reason = choice.finish_reason
            if finish_reason is not None or text or reasoning:
                held = self._flush(index) if finish_reason is not None else _Held()
                generations[index] = held.generation(text, reasoning, finish_reason)
        usage = _usage(chunk.usage) if chunk.usage is not None else None
        if usage is not None:
            self._usage_seen = True
        else:
            self._groq_usage = _groq_usage(chunk.model_extra) or self._groq_usage
        if not generations and usage is None:
            return None
        return ChatResponse(
            generations=_positional(generations),
            usage=usage,
            metadata=_with_reasoning_tokens(dict(self._metadata), chunk.usage),
        )

    def finish(self) -> ChatResponse | None:
        """Calls (and refusals) of choices that never sent a ``finish_reason`` (some servers
        omit it), and Groq's usage when no usage chunk reported it."""
        generations = {}
        for index in list(self._choices):
            held = self._flush(index)
            if not held.is_empty():
                generations[index] = held.generation()
        usage = None if self._usage_seen else self._groq_usage
        if not generations and usage is None:
            return None
        return ChatResponse(
            generations=_positional(generations), usage=usage, metadata=dict(self._metadata)
        )

    def _flush(self, index: int) -> _Held:
        """What the choice held back until its end."""
        state = self._choices.pop(index, None)
        if state is None:
            return _Held()
        calls = distinct_call_ids(
            [
                self._request.tool_call(call.call_id, call.name, "".join(call.arguments))
                for call in state.calls
            ]
        )
        return _Held(
            text=state.text.end(),
            reasoning=state.reasoning.end(),
            empty_reasoning=state.reasoning_came and not state.reasoning_shown,
            calls=calls,
            refusal="".join(state.refusal),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class _Held:
    """What a choice holds until it ends: its calls, its refusal, and the last character of
    its text or reasoning when that is a surrogate half waiting for its partner."""

    text: str = ""
    reasoning: str = ""
    empty_reasoning: bool = False  # the reasoning field came, only empty
    calls: tuple[ToolCall, ...] = ()
    refusal: str = ""

    def is_empty(self) -> bool:
        return not (
            self.text or self.reasoning or self.empty_reasoning or self.calls or self.refusal
        )

    def generation(
        self, text: str = "", reasoning: str = "", finish_reason: str | None = None
    ) -> Generation:
        """A chunk's generation: ``text`` and ``reasoning`` of the chunk's delta, then what
        was held (the refusal whole in the metadata, as in a plain response)."""
        metadata: dict[str, Any] = {}
        if self.refusal:
            metadata["refusal"] = self.refusal
        if finish_reason is not None:
            metadata["finish_reason"] = finish_reason
        reasoning += self.reasoning
        return Generation(
            message=AssistantMessage(
                text=text + self.text or None,
                tool_calls=self.calls,
                reasoning=(Reasoning(text=reasoning),) if reasoning or self.empty_reasoning else (),
            ),
            metadata=metadata,
        )


def _positional(generations: Mapping[int, Generation]) -> tuple[Generation, ...]:
    """Generations by choice index (gaps filled with empty ones, as chunks are positional)."""
    if len(generations) == 1 and 0 in generations:  # the common case: one choice
        return (generations[0],)
    if not generations:
        return ()
    empty = Generation(message=AssistantMessage())
    return tuple(generations.get(i, empty) for i in range(max(generations) + 1))
