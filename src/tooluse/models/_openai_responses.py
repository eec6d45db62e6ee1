"""``OpenAIResponsesChatModel``: OpenAI's Responses API (``POST /v1/responses``) over the
official SDK, the API OpenAI recommends for its reasoning models.

Stateless: every request carries the whole conversation and, by default, ``"store": false``
(OpenAI keeps nothing). A reasoning model's reasoning items come back with their encrypted
content (``"include": ["reasoning.encrypted_content"]``) and are kept on the message as
:class:`~tooluse.messages.Reasoning` parts (item id, summary, encrypted content); they go back
before the calls and text of their turn, which is how OpenAI has the model carry its
reasoning across the rounds of a tool loop without storing it. A model that does not reason
refuses that ``include`` (400); the request goes again without it, and so do the model's
later ones.

Mapping: leading system messages become ``instructions``, later ones ``developer`` messages in
place; user and assistant text are ``message`` items; tool calls ``function_call`` items (the
call's ``call_id`` is :attr:`ToolCall.id <tooluse.messages.ToolCall.id>`) and tool results
``function_call_output`` items. Tools are sent flat (``{"type": "function", "name", ...}``)
with ``strict`` always given, as the API takes a missing one for ``true``.

Retries and timeouts are the SDK's own, as for :class:`~tooluse.models.OpenAIChatModel`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from itertools import groupby
from typing import Any, TypeGuard, TypeVar, get_args

import openai
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseToolSearchCall,
    ResponseUsage,
)
from pydantic import BaseModel

from tooluse.history import distinct_call_ids
from tooluse.messages import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    DeferredTools,
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
from tooluse.models._errors import ProviderError, ProviderResponseError
from tooluse.models._names import ToolNameAliases
from tooluse.models._openai_sdk import FAILURES, OpenAISdkChatModel
from tooluse.models._sdk_model import ProviderSettings
from tooluse.models._utf16 import StreamedText
from tooluse.tools import ToolDefinition

__all__ = ["OpenAIResponsesChatModel"]

logger = logging.getLogger(__name__)

_ENCRYPTED_REASONING = "reasoning.encrypted_content"
_Sent = TypeVar("_Sent")  # what a request gives: a Response, or a stream of events
_TOOL_CHOICE_KEYWORDS = frozenset({"auto", "none", "required"})


class OpenAIResponsesChatModel(OpenAISdkChatModel):
    """A chat model behind OpenAI's Responses API (``client.responses.create``).

    ``default_options`` apply to every request (the request's own options win);
    ``ChatOptions.max_tokens`` is sent as ``max_output_tokens``; the API has no stop
    sequences, so ``ChatOptions.stop`` is refused (and ``store`` in ``extra``: it is
    ``store=``). ``extra`` is merged into the JSON body
    (``{"reasoning": {"effort": "low", "summary": "auto"}}``, ``{"service_tier": "flex"}``;
    an ``include`` list there is sent beside the encrypted reasoning).
    ``strict_tools=True`` sends strict-mode schemas with ``"strict": true`` (a tool whose
    schema strict mode cannot express is sent ``"strict": false``, with a warning).
    ``store=True`` lets OpenAI keep the responses (it then also takes reasoning items back by
    id alone); the request still carries the whole conversation. ``client`` injects a
    preconfigured SDK client, as for ``OpenAIChatModel``.

    ``ChatOptions.deferred_tools`` use OpenAI's client-executed tool search
    (``loads_deferred_tools``; ``ToolSearchToolCallingAdvisor(defer_loading=True)``): the
    loader is sent as the ``tool_search`` tool (``"execution": "client"``), the deferred
    tools are left out of ``tools``, the model's ``tool_search_call`` is a call of the loader,
    and its result goes back as a ``tool_search_output`` carrying the definitions of the
    deferred tools it names, which loads them; a loaded tool's calls go back with its
    ``namespace`` (its own name, where the output put it). (Tool search needs gpt-5.4 or
    later.)
    """

    loads_deferred_tools = True

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
        store: bool = False,
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
        self.store = store
        # Models the API refused encrypted reasoning for: they do not reason.
        self._without_encrypted_reasoning: set[str] = set()

    # -- the ChatModel protocol -----------------------------------------------------------

    async def acall(self, prompt: Prompt) -> ChatResponse:
        params, incoming = self._request(prompt)
        try:
            response = await self._create(self._client.responses.create, params)
        except FAILURES as exc:
            raise self._provider_error(exc) from exc
        return _response(response, incoming)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Text and reasoning summaries arrive as they are generated; each tool call arrives
        whole (real name, complete arguments, its ``call_id``) when its item is done; the last
        chunk has the finish reason and the usage. A failure the API reports in the stream
        (``response.failed``, an ``error`` event) raises :class:`ProviderResponseError`
        after the chunks that came before it."""
        params, incoming = self._request(prompt)
        state = _StreamState(incoming)
        create = self._client.responses.create
        try:
            events = await self._create(lambda **sent: create(**sent, stream=True), params)
            async with events:
                async for event in events:
                    chunk = state.add(event)
                    if chunk is not None:
                        yield chunk
        except FAILURES as exc:
            raise self._stream_error(exc, state.events_received) from exc
        if not state.finished:
            raise ProviderError(
                f"openai: the stream ended after {state.events_received} events without "
                "response.completed",
                provider=self.provider,
            )

    async def _create(
        self, create: Callable[..., Awaitable[_Sent]], params: dict[str, Any]
    ) -> _Sent:
        try:
            return await self._send(create, params)
        except openai.BadRequestError as exc:
            retry = self._retry_without_encrypted_reasoning(exc, params)
            if retry is None:
                raise
            return await self._send(create, retry)

    def _retry_without_encrypted_reasoning(
        self, exc: openai.BadRequestError, params: dict[str, Any]
    ) -> dict[str, Any] | None:
        """``params`` without ``reasoning.encrypted_content`` in ``include`` when the API
        refused it: a model that does not reason (gpt-4o, gpt-4.1, gpt-5-chat-latest) answers
        400 "Encrypted content is not supported with this model." (``param`` ``include``).
        The model is remembered, so its later requests leave it out from the start; ``None``
        for any other refusal."""
        include = params.get("include", [])
        if not (
            exc.param == "include"
            and "encrypted content" in exc.message.lower()
            and _ENCRYPTED_REASONING in include
        ):
            return None
        self._without_encrypted_reasoning.add(params["model"])
        logger.info(
            "openai: %s takes no %r in include (it does not reason); its requests leave it out",
            params["model"],
            _ENCRYPTED_REASONING,
        )
        retry = {key: value for key, value in params.items() if key != "include"}
        rest = [name for name in include if name != _ENCRYPTED_REASONING]
        if rest:
            retry["include"] = rest
        return retry

    def _stream_error(self, exc: Exception, events_received: int) -> ProviderError:
        # The SDK raises a bare APIError for an event whose data has an ``error`` object
        # (the form some servers give the ``error`` event).
        if type(exc) is openai.APIError:
            body = exc.body if isinstance(exc.body, Mapping) else {}
            code = body.get("code")
            return _failure("error", code if isinstance(code, str) else None, exc.message)
        return self._provider_error(exc, chunks_received=events_received)

    # -- request ----------------------------------------------------------------------------

    def _request(self, prompt: Prompt) -> tuple[dict[str, Any], _Incoming]:
        options, definitions, aliases = self._options_and_tools(prompt)
        if options.stop:
            raise ValueError(
                f"stop={options.stop!r}: the Responses API has no stop sequences "
                "(OpenAIChatModel sends them over Chat Completions)"
            )
        instructions, messages = _instructions(prompt.messages)
        strict_schemas: dict[str, Mapping[str, Any]] = {}
        search = self._client_search(options.deferred_tools, definitions, aliases, strict_schemas)
        model = options.model or self.model
        params: dict[str, Any] = {
            "model": model,
            "input": _input_items(messages, aliases, self.store, search),
            "store": self.store,
        }
        if instructions:
            params["instructions"] = instructions
        if definitions:
            params["tools"] = [
                search.tool
                if search is not None and d.name == search.name
                else self._tool(d, aliases, strict_schemas)
                for d in definitions
                if search is None or d.name not in search.loadable
            ]
            if options.tool_choice is not None:
                params["tool_choice"] = _tool_choice(options.tool_choice, aliases)
            if options.parallel_tool_calls is not None:
                params["parallel_tool_calls"] = options.parallel_tool_calls
        if options.temperature is not None:
            params["temperature"] = options.temperature
        if options.top_p is not None:
            params["top_p"] = options.top_p
        if options.max_tokens is not None:
            params["max_output_tokens"] = options.max_tokens
        body = dict(options.extra)
        if "store" in body:
            raise ValueError(
                "extra={'store': ...}: pass store= to OpenAIResponsesChatModel instead (it "
                "also decides which reasoning items can go back)"
            )
        include = [] if model in self._without_encrypted_reasoning else [_ENCRYPTED_REASONING]
        # Beside ours: the body would replace the list.
        include = list(dict.fromkeys([*include, *body.pop("include", ())]))
        if include:
            params["include"] = include
        if body:
            params["extra_body"] = body
        if self._extra_headers:
            params["extra_headers"] = self._extra_headers
        return params, _Incoming(aliases, strict_schemas, search.name if search else None)

    def _client_search(
        self,
        deferred: DeferredTools | None,
        definitions: Sequence[ToolDefinition],
        aliases: ToolNameAliases,
        strict_schemas: dict[str, Mapping[str, Any]],
    ) -> _ClientSearch | None:
        """Deferred tools as OpenAI's client-executed tool search: the loader becomes the
        request's ``tool_search`` tool, the deferred tools leave ``tools`` and go out in the
        ``tool_search_output`` of the searches that name them."""
        if deferred is None:
            return None
        loaders = [d for d in definitions if d.name in deferred.loaders]
        if len(loaders) != 1:
            raise ValueError(
                f"ChatOptions.deferred_tools needs exactly one of its loaders "
                f"{sorted(deferred.loaders)} among the request's tools for the Responses API's "
                f"one tool_search tool, got {len(loaders)}"
            )
        (loader,) = loaders
        function, _ = self._function(loader, aliases, strict_schemas)
        tool: dict[str, Any] = {"type": "tool_search", "execution": "client"}
        tool.update((k, function[k]) for k in ("description", "parameters") if k in function)
        loadable = {
            d.name: {**self._tool(d, aliases, strict_schemas), "defer_loading": True}
            for d in definitions
            if d.name in deferred.names
        }
        return _ClientSearch(loader.name, tool, loadable, deferred)

    def _tool(
        self,
        definition: ToolDefinition,
        aliases: ToolNameAliases,
        strict_schemas: dict[str, Mapping[str, Any]],
    ) -> dict[str, Any]:
        function, strict = self._function(definition, aliases, strict_schemas)
        return {"type": "function", **function, "strict": strict}


def _instructions(messages: Sequence[Message]) -> tuple[str, Sequence[Message]]:
    """The leading system messages as ``instructions``, and the messages after them."""
    texts: list[str] = []
    for message in messages:
        if not isinstance(message, SystemMessage):
            break
        texts.append(message.text)
    return "\n\n".join(texts), messages[len(texts) :]


@dataclasses.dataclass(frozen=True, slots=True)
class _ClientSearch:
    """A request's client-executed tool search: the loader tool's name, the ``tool_search``
    tool it is sent as, and the deferred tools' definitions by name."""

    name: str
    tool: dict[str, Any]
    loadable: dict[str, dict[str, Any]]
    deferred: DeferredTools

    def call_item(self, call: ToolCall) -> dict[str, Any]:
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            arguments = {}  # answered with an error result; the text cannot be sent
        return {
            "type": "tool_search_call",
            "call_id": call.id,
            "execution": "client",
            "status": "completed",
            "arguments": arguments if isinstance(arguments, dict) else {},
        }

    def output_item(self, response: ToolResponse) -> dict[str, Any]:
        names = [n for n in self.deferred.referenced(response) if n in self.loadable]
        return {
            "type": "tool_search_output",
            "call_id": response.id,
            "execution": "client",
            "status": "completed",
            "tools": [self.loadable[name] for name in names],
        }


@dataclasses.dataclass(frozen=True, slots=True)
class _Incoming(IncomingCalls):
    """The calls' way back, and the loader a ``tool_search_call`` of the model stands for."""

    tool_search: str | None = None

    def search_call(self, call_id: str | None, item_id: str | None, arguments: object) -> ToolCall:
        if self.tool_search is None:
            raise ProviderError(
                "openai: a client tool_search_call came back for a request without a "
                "client tool_search tool",
                provider="openai",
            )
        return ToolCall(
            id=call_id or item_id or "", name=self.tool_search, arguments=json.dumps(arguments)
        )


def _input_items(
    messages: Iterable[Message],
    aliases: ToolNameAliases,
    store: bool,
    search: _ClientSearch | None,
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            items.append({"type": "message", "role": "developer", "content": message.text})
        elif isinstance(message, UserMessage):
            items.append({"type": "message", "role": "user", "content": message.text})
        elif isinstance(message, AssistantMessage):
            # A reasoning item goes back only with the item it led to (the API refuses one
            # "provided without its required following item").
            if message.text or message.tool_calls:
                items.extend(_reasoning_items(message.reasoning, store))
            if message.text:
                items.append({"type": "message", "role": "assistant", "content": message.text})
            items.extend(_call_item(call, aliases, search) for call in message.tool_calls)
        elif isinstance(message, ToolResponseMessage):
            items.extend(
                search.output_item(response)
                if search is not None and response.name == search.name
                else {
                    "type": "function_call_output",
                    "call_id": response.id,
                    "output": _output(response),
                }
                for response in message.responses
            )
    return items


def _call_item(
    call: ToolCall, aliases: ToolNameAliases, search: _ClientSearch | None
) -> dict[str, Any]:
    if search is not None and call.name == search.name:
        return search.call_item(call)
    item = {
        "type": "function_call",
        "call_id": call.id,
        "name": aliases.to_provider(call.name),
        "arguments": call.arguments or "{}",
    }
    if search is not None and call.name in search.loadable:
        # A tool a tool_search_output loaded lives in a namespace named after it; the API
        # refuses its call sent back without it ("Missing namespace for function_call").
        item["namespace"] = item["name"]
    return item


def _output(response: ToolResponse) -> str | list[dict[str, Any]]:
    """A result's text, or with images its text and images as input parts (the Responses
    API takes them in the output itself, unlike Chat Completions' tool messages)."""
    if not response.images:
        return response.data
    parts = [{"type": "input_text", "text": response.data}] if response.data else []
    parts += [{"type": "input_image", "image_url": image.data_url()} for image in response.images]
    return parts


def _reasoning_items(parts: Sequence[Reasoning], store: bool) -> list[dict[str, Any]]:
    """The reasoning items the parts came from (consecutive parts with one item id; parts
    without one came from another provider). Without ``store`` an item goes back only with
    its encrypted content: OpenAI would look its id up among stored items and fail."""
    items = []
    for item_id, group in groupby(parts, key=lambda part: part.id):
        if item_id is None:
            continue
        item_parts = list(group)
        encrypted = next((p.encrypted_content for p in item_parts if p.encrypted_content), None)
        if encrypted is None and not store:
            continue
        item: dict[str, Any] = {
            "type": "reasoning",
            "id": item_id,
            "summary": [{"type": "summary_text", "text": p.text} for p in item_parts if p.text],
        }
        if encrypted is not None:
            item["encrypted_content"] = encrypted
        items.append(item)
    return items


def _tool_choice(choice: str, aliases: ToolNameAliases) -> str | dict[str, Any]:
    if choice in _TOOL_CHOICE_KEYWORDS:
        return choice
    return {"type": "function", "name": aliases.to_provider(choice)}


# -- response -------------------------------------------------------------------------------

_Kind = TypeVar("_Kind", bound=BaseModel)


def _is(value: object, kind: type[_Kind]) -> TypeGuard[_Kind]:
    """``isinstance``, and the wire ``type`` is the class's own: the SDK builds an event or
    item of a type it does not know as the first class of its union."""
    return isinstance(value, kind) and getattr(value, "type", None) == _wire_type(kind)


@functools.cache
def _wire_type(kind: type[BaseModel]) -> str:
    (literal,) = get_args(kind.model_fields["type"].annotation)
    return str(literal)


def _response(response: Response, incoming: _Incoming) -> ChatResponse:
    if response.status == "failed":
        error = response.error
        raise _failure(
            "response failed",
            error.code if error is not None else None,
            error.message if error is not None else "no error given",
        )
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    for item in response.output:
        if _is(item, ResponseOutputMessage):
            texts.extend(part.text for part in item.content if _is(part, ResponseOutputText))
            refusals.extend(
                part.refusal for part in item.content if _is(part, ResponseOutputRefusal)
            )
        elif _is(item, ResponseFunctionToolCall):
            calls.append(incoming.tool_call(item.call_id, item.name, item.arguments))
        elif _is(item, ResponseToolSearchCall) and item.execution == "client":
            calls.append(incoming.search_call(item.call_id, item.id, item.arguments))
        elif _is(item, ResponseReasoningItem):
            reasoning.extend(_reasoning_parts(item))
    metadata: dict[str, Any] = {"finish_reason": _finish_reason(response)}
    if refusals:
        metadata["refusal"] = "".join(refusals)
    generation = Generation(
        message=AssistantMessage(
            text="".join(texts) or None,
            tool_calls=distinct_call_ids(calls),
            reasoning=tuple(reasoning),
        ),
        metadata=metadata,
    )
    return ChatResponse(
        generations=(generation,),
        usage=_usage(response.usage) if response.usage is not None else None,
        metadata=_response_metadata(response),
    )


def _reasoning_parts(item: ResponseReasoningItem) -> list[Reasoning]:
    """A part per summary part, each with the item's id, the last with its encrypted content
    (one empty part for an item without summary)."""
    summaries = [summary.text for summary in item.summary or ()] or [""]
    parts = [Reasoning(text=text, id=item.id) for text in summaries[:-1]]
    parts.append(
        Reasoning(text=summaries[-1], id=item.id, encrypted_content=item.encrypted_content)
    )
    return parts


def _finish_reason(response: Response) -> str | None:
    """``completed``, or why the response is incomplete (``max_output_tokens``,
    ``content_filter``, ...)."""
    if response.status == "incomplete":
        details = response.incomplete_details
        return (details.reason if details is not None else None) or "incomplete"
    return response.status


def _response_metadata(response: Response) -> dict[str, Any]:
    metadata: dict[str, Any] = {"id": response.id, "model": response.model, "provider": "openai"}
    reasoning_tokens = _reasoning_tokens(response.usage)
    if reasoning_tokens is not None:
        metadata["reasoning_tokens"] = reasoning_tokens
    return metadata


def _usage(usage: ResponseUsage) -> Usage:
    """``completion_tokens`` includes the reasoning tokens (OpenAI bills them as output);
    their count is in the response metadata as ``reasoning_tokens``."""
    details = usage.input_tokens_details
    return Usage(
        prompt_tokens=usage.input_tokens or 0,
        completion_tokens=usage.output_tokens or 0,
        total_tokens=usage.total_tokens or 0,
        # Optional on the wire, though the SDK types them as always there.
        cache_read_tokens=getattr(details, "cached_tokens", None),
        cache_write_tokens=getattr(details, "cache_write_tokens", None),
    )


def _reasoning_tokens(usage: ResponseUsage | None) -> int | None:
    details = usage.output_tokens_details if usage is not None else None
    count = getattr(details, "reasoning_tokens", None)
    return count if isinstance(count, int) else None


def _failure(what: str, code: str | None, message: str) -> ProviderResponseError:
    return ProviderResponseError(
        f"openai: {what}: {code}: {message}" if code else f"openai: {what}: {message}",
        provider="openai",
        code=code,
        provider_message=message,
    )


# -- stream ---------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class _Summary:
    """The summary part of a reasoning item being streamed."""

    index: int
    text: StreamedText = dataclasses.field(default_factory=StreamedText)


class _StreamState:
    """Translates the stream's events into ``ChatResponse`` chunks: text and summary deltas
    as they come (a surrogate half ending one held for the next), each function call whole
    when its item is done, a reasoning item's id and encrypted content when it is done (they
    close its last summary part: see :class:`~tooluse.streaming.StreamAggregator`)."""

    def __init__(self, incoming: _Incoming) -> None:
        self._incoming = incoming
        self._arguments: dict[str, list[str]] = {}  # function call deltas by item id
        self._texts: dict[tuple[str, int], StreamedText] = {}  # by item id, content index
        self._summaries: dict[str, _Summary] = {}  # by reasoning item id
        self._metadata: dict[str, Any] = {"provider": "openai"}
        self.events_received = 0
        self.finished = False

    def add(self, event: object) -> ChatResponse | None:
        self.events_received += 1
        if _is(event, ResponseCreatedEvent):
            self._metadata.update(id=event.response.id, model=event.response.model)
        elif _is(event, ResponseTextDeltaEvent):
            text = self._texts.setdefault((event.item_id, event.content_index), StreamedText())
            return self._text(text.add(event.delta))
        elif _is(event, ResponseTextDoneEvent):
            held = self._texts.pop((event.item_id, event.content_index), None)
            return self._text(held.end() if held is not None else "")
        elif _is(event, ResponseReasoningSummaryTextDeltaEvent):
            return self._summary_delta(event)
        elif _is(event, ResponseOutputItemAddedEvent):
            item = event.item
            if _is(item, ResponseFunctionToolCall) and item.id:
                self._arguments[item.id] = [item.arguments] if item.arguments else []
        elif _is(event, ResponseFunctionCallArgumentsDeltaEvent):
            self._arguments.setdefault(event.item_id, []).append(event.delta)
        elif _is(event, ResponseOutputItemDoneEvent):
            return self._item_done(event.item)
        elif _is(event, ResponseCompletedEvent) or _is(event, ResponseIncompleteEvent):
            self.finished = True
            return self._finish(event.response)
        elif _is(event, ResponseFailedEvent):
            error = event.response.error
            raise _failure(
                "response failed",
                error.code if error is not None else None,
                error.message if error is not None else "no error given",
            )
        elif _is(event, ResponseErrorEvent):
            raise _failure("error", event.code, event.message)
        return None

    def _summary_delta(self, event: ResponseReasoningSummaryTextDeltaEvent) -> ChatResponse | None:
        summary = self._summaries.get(event.item_id)
        parts: list[Reasoning] = []
        if summary is None or summary.index != event.summary_index:
            if summary is not None:  # the item's next summary part: the last one is done
                parts.extend(_closing(summary.text.end(), Reasoning(id=event.item_id)))
            summary = self._summaries[event.item_id] = _Summary(event.summary_index)
        text = summary.text.add(event.delta)
        if text:
            parts.append(Reasoning(text=text))
        return self._chunk(AssistantMessage(reasoning=tuple(parts))) if parts else None

    def _item_done(self, item: object) -> ChatResponse | None:
        if _is(item, ResponseFunctionToolCall):
            deltas = self._arguments.pop(item.id or "", [])
            # The done item carries the whole arguments; the deltas are the fallback.
            arguments = item.arguments or "".join(deltas)
            call = self._incoming.tool_call(item.call_id, item.name, arguments)
            return self._chunk(AssistantMessage(tool_calls=(call,)))
        if _is(item, ResponseToolSearchCall) and item.execution == "client":
            call = self._incoming.search_call(item.call_id, item.id, item.arguments)
            return self._chunk(AssistantMessage(tool_calls=(call,)))
        if _is(item, ResponseReasoningItem):
            summary = self._summaries.pop(item.id, None)
            held = summary.text.end() if summary is not None else ""
            seal = Reasoning(id=item.id, encrypted_content=item.encrypted_content)
            if summary is None and item.summary:  # a server that sent the summary only here
                parts = _reasoning_parts(item)
            else:
                parts = _closing(held, seal)
            return self._chunk(AssistantMessage(reasoning=tuple(parts)))
        if _is(item, ResponseOutputMessage):
            refusal = "".join(
                part.refusal for part in item.content or () if _is(part, ResponseOutputRefusal)
            )
            if refusal:
                return self._chunk(AssistantMessage(), metadata={"refusal": refusal})
        return None

    def _finish(self, response: Response) -> ChatResponse:
        self._metadata.update(_response_metadata(response))
        return self._chunk(
            AssistantMessage(),
            metadata={"finish_reason": _finish_reason(response)},
            usage=_usage(response.usage) if response.usage is not None else None,
        )

    def _text(self, text: str) -> ChatResponse | None:
        return self._chunk(AssistantMessage(text=text)) if text else None

    def _chunk(
        self,
        message: AssistantMessage,
        *,
        metadata: dict[str, Any] | None = None,
        usage: Usage | None = None,
    ) -> ChatResponse:
        return ChatResponse(
            generations=(Generation(message=message, metadata=metadata or {}),),
            usage=usage,
            metadata=dict(self._metadata),
        )


def _closing(held: str, seal: Reasoning) -> list[Reasoning]:
    """The end of a streamed summary part: its held text, then the part that closes it."""
    return [Reasoning(text=held), seal] if held else [seal]
