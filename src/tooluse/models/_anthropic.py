"""``AnthropicChatModel``: Claude over the official ``anthropic`` SDK (Messages API).

Mapping: system messages become the ``system`` parameter; tool calls are ``tool_use`` blocks
in the assistant turn; tool results are ``tool_result`` blocks (``is_error`` set for failed
calls) in the next user turn, with consecutive results (and a user message that follows them)
merged into that one turn, as the API requires alternating roles. ``prompt_tokens`` counts all
input tokens (``input_tokens`` + cache reads + cache writes; Anthropic reports them apart).

Extended thinking (``ChatOptions(extra={"thinking": {"type": "enabled", "budget_tokens":
...}})``): ``thinking`` and ``redacted_thinking`` blocks are kept on the message as
:class:`~tooluse.messages.Reasoning` (text and signature, or the encrypted data) and sent back
first in their assistant turn, as the API requires of a tool-use turn. Reasoning without a
signature (from another provider) cannot be verified by the API and is not sent.

Anthropic wants an assistant turn back unchanged in a tool loop. What the message's fields do
not hold of a turn (server tool calls and results such as ``server_tool_use`` and
``web_search_tool_result``, blocks of server tools the SDK does not know, citations on text,
``caller`` on a tool call, and the order of all blocks, thinking after a search included) is
kept by keeping the whole turn, every block as the API sent it, as the message's
:class:`~tooluse.messages.ProviderContent` (provider ``"anthropic"``); a turn its fields give
back exactly gets none. That content is what goes back (less the ``file_id`` of document
citations, which requests refuse), its ``tool_use`` blocks carrying the
message's tool calls (ids, names, arguments as the message has them, e.g. repaired), as long
as the message's text, reasoning and number of tool calls are those of the blocks; a message
changed beyond that is sent from its fields, with a warning. Other providers' content is
never sent here.

A turn that stops with ``pause_turn`` (a server tool loop, such as web search or code
execution, ran long) is continued as Anthropic documents: the response goes back as it is, every
block as the API sent it, as the last (assistant) message of the same request, with the code
execution container it used, until the model ends the turn or ``max_pause_continuations``
requests went on from pauses. The caller gets the whole turn as one response.

Retries (429, 408, 409, 5xx incl. 529 overloaded, connection errors; exponential backoff with
jitter, capped at 8 s) and timeouts are the SDK's own. The SDK honours ``Retry-After`` without
an upper bound.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeGuard, cast

import anthropic
from anthropic._base_client import AsyncAPIClient, SyncAPIClient
from anthropic.types import (
    CitationsDelta,
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStreamEvent,
    RedactedThinkingBlock,
    SignatureDelta,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
)
from anthropic.types import Message as AnthropicMessage
from anthropic.types import Usage as AnthropicUsage

from tooluse.messages import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    DeferredTools,
    Generation,
    Message,
    Prompt,
    ProviderContent,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from tooluse.models._calls import IncomingCalls
from tooluse.models._errors import from_sdk_error, sdk_failures
from tooluse.models._names import ToolNameAliases
from tooluse.models._schema_cache import StrictMode, tool_input_schema
from tooluse.models._sdk_model import ProviderSettings, SdkChatModel
from tooluse.models._utf16 import StreamedText, joined_surrogates
from tooluse.tools import ToolDefinition

__all__ = ["AnthropicChatModel"]

_FAILURES = sdk_failures(anthropic.AnthropicError)

logger = logging.getLogger(__name__)

_PAUSED = "pause_turn"
_PROVIDER = "anthropic"


class AnthropicChatModel(SdkChatModel[anthropic.AsyncAnthropic]):
    """A Claude model behind the Anthropic Messages API.

    ``max_tokens`` is required by the API; ``ChatOptions.max_tokens`` overrides it per request.
    ``strict_tools=True`` sends tools with ``"strict": true`` (grammar-constrained inputs) and
    schemas shaped to Anthropic's strict subset; a tool whose schema it cannot express is sent
    non-strict, with a warning. Anthropic compiles all strict tools of a request into one
    grammar and rejects it past a size limit, so keep it for small, fixed tool sets.
    A turn paused by a server tool loop (``stop_reason: "pause_turn"``) is sent back to be
    continued, at most ``max_pause_continuations`` times in a row; a turn still paused then is
    returned as it is (``finish_reason`` ``"pause_turn"``, with a warning).
    ``temperature`` and ``top_p`` are sent in the request body when set (the installed SDK
    has no named parameters for them). ``client`` (an ``anthropic.AsyncAnthropic``, or its
    Bedrock / Vertex variants) injects a preconfigured SDK client; it is used as it is on
    every event loop, and its connections belong to the loop that opened them: use it from
    one loop only. The async clients the model builds itself are one per event loop.

    ``prompt_cache="5m"`` or ``"1h"`` turns on Anthropic's automatic prompt caching (a
    top-level ``cache_control``: each request's prefix is written to the cache, and the next
    request of a tool loop or conversation reads it at a tenth of the input price; writes cost
    1.25 times, or twice for ``"1h"``). Off by default, as in the API.

    ``ChatOptions.deferred_tools`` are sent with ``"defer_loading": true`` and a loader's
    result naming them as ``tool_reference`` blocks, which load them into the model's context
    (``loads_deferred_tools``; see ``ToolSearchToolCallingAdvisor(defer_loading=True)``).
    """

    provider = _PROVIDER
    loads_deferred_tools = True
    _new_client = anthropic.AsyncAnthropic
    # The SDK's base classes: its Bedrock and Vertex clients do not subclass AsyncAnthropic.
    _client_type = AsyncAPIClient
    _client_name = "anthropic.AsyncAnthropic"
    _blocking_client_type = SyncAPIClient

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 4096,
        default_options: ChatOptions | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        max_retries: int = 2,
        strict_tools: bool = False,
        max_pause_continuations: int = 8,
        prompt_cache: Literal["5m", "1h"] | None = None,
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        if prompt_cache not in (None, "5m", "1h"):
            raise ValueError(
                f"prompt_cache must be '5m', '1h' or None (the cache lifetimes Anthropic "
                f"offers), got {prompt_cache!r}"
            )
        if max_pause_continuations < 0:
            raise ValueError(f"max_pause_continuations must be >= 0, got {max_pause_continuations}")
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
        self.max_tokens = max_tokens
        self.max_pause_continuations = max_pause_continuations
        self.prompt_cache = prompt_cache

    # -- the ChatModel protocol -----------------------------------------------------------

    async def acall(self, prompt: Prompt) -> ChatResponse:
        params, calls = self._request(prompt)
        turn = _Turn(params, self.max_pause_continuations)
        messages: list[AnthropicMessage] = []
        sent: dict[str, Any] | None = params
        try:
            while sent is not None:
                messages.append(await self._send(self._client.messages.create, sent))
                sent = turn.continuation_after(messages[-1])
        except _FAILURES as exc:
            raise from_sdk_error(self.provider, exc, anthropic) from exc
        return _response(messages, calls)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Text arrives as it is generated; each tool call arrives whole (real name, complete
        ``input_json_delta`` arguments) when its content block stops, carrying the block id.
        A paused turn goes on in the same stream, its usage the sum of its requests'."""
        params, calls = self._request(prompt)
        turn = _Turn(params, self.max_pause_continuations)
        state = _StreamState(calls)
        create = self._client.messages.create
        sent: dict[str, Any] | None = params
        try:
            while sent is not None:
                events = await self._send(lambda **body: create(**body, stream=True), sent)
                content = _StreamedContent()
                async with events:
                    async for event in events:
                        content.add(event)
                        response = state.add(event)
                        if response is not None:
                            yield response
                blocks = content.blocks()
                sent = turn.continuation(content.stop_reason, blocks, content.container)
            # What the chunks' fields lose of the turn comes last, whole, in a chunk of its own.
            kept = _assistant_message([*turn.paused_blocks, *blocks], calls).provider_content
            if kept is not None:
                yield state.chunk(AssistantMessage(provider_content=kept))
        except _FAILURES as exc:
            raise from_sdk_error(
                self.provider, exc, anthropic, chunks_received=state.events_received
            ) from exc

    # -- request ----------------------------------------------------------------------------

    def _request(self, prompt: Prompt) -> tuple[dict[str, Any], IncomingCalls]:
        options, definitions, aliases = self._options_and_tools(prompt)
        params: dict[str, Any] = {
            "model": options.model or self.model,
            "max_tokens": options.max_tokens or self.max_tokens,
            "messages": _turns(prompt.messages, aliases, _loadable(options, definitions)),
        }
        system = "\n\n".join(m.text for m in prompt.messages if isinstance(m, SystemMessage))
        if system:
            params["system"] = system
        strict_schemas: dict[str, Mapping[str, Any]] = {}
        if definitions:
            deferred = options.deferred_tools.names if options.deferred_tools else frozenset()
            params["tools"] = [
                self._tool(d, aliases, strict_schemas, d.name in deferred) for d in definitions
            ]
            tool_choice = _tool_choice(options, aliases)
            if tool_choice is not None:
                params["tool_choice"] = tool_choice
        if options.stop:
            params["stop_sequences"] = list(options.stop)
        if self.prompt_cache is not None:
            # Automatic caching: the API puts the breakpoint on the request's last cacheable
            # block, so each request reads what the one before it wrote.
            params["cache_control"] = _cache_control(self.prompt_cache)
        body: dict[str, Any] = {}
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.top_p is not None:
            body["top_p"] = options.top_p
        body.update(options.extra)
        if body:
            params["extra_body"] = body
        if self._extra_headers:
            params["extra_headers"] = self._extra_headers
        return params, IncomingCalls(aliases, strict_schemas)

    def _tool(
        self,
        definition: ToolDefinition,
        aliases: ToolNameAliases,
        strict_schemas: dict[str, Mapping[str, Any]],
        deferred: bool,
    ) -> dict[str, Any]:
        mode: StrictMode | None = "anthropic-strict" if self.strict_tools else None
        schema, strict = tool_input_schema(definition, mode, strict_schemas)
        tool: dict[str, Any] = {
            "name": aliases.to_provider(definition.name),
            "description": definition.description,
            "input_schema": schema,
        }
        if strict:
            tool["strict"] = True
        if deferred:
            tool["defer_loading"] = True
        return tool


_MAX_DEFERRED_TOOLS = 10_000  # the Messages API's limit per request


def _cache_control(lifetime: Literal["5m", "1h"]) -> dict[str, str]:
    return {"type": "ephemeral"} if lifetime == "5m" else {"type": "ephemeral", "ttl": lifetime}


def _loadable(options: ChatOptions, definitions: Sequence[ToolDefinition]) -> DeferredTools | None:
    """The request's deferred tools, narrowed to those it offers (a ``tool_reference`` to a
    tool not in ``tools`` is an error), checked against the API's rules."""
    deferred = options.deferred_tools
    if deferred is None:
        return None
    offered = {d.name for d in definitions}
    names = deferred.names & offered
    if names and not offered - names:
        raise ValueError(
            "every tool of the request is deferred (ChatOptions.deferred_tools); the "
            "Messages API needs at least one loaded tool, such as the loader "
            f"{sorted(deferred.loaders)[0]!r}"
        )
    if len(names) > _MAX_DEFERRED_TOOLS:
        raise ValueError(
            f"{len(names)} deferred tools in one request; the Messages API takes at most "
            f"{_MAX_DEFERRED_TOOLS}"
        )
    return DeferredTools(names, deferred.loaders)


def _tool_choice(options: ChatOptions, aliases: ToolNameAliases) -> dict[str, Any] | None:
    choice = options.tool_choice
    if choice is None and options.parallel_tool_calls is not False:
        return None
    result: dict[str, Any]
    if choice is None or choice == "auto":
        result = {"type": "auto"}
    elif choice == "none":
        return {"type": "none"}
    elif choice in ("required", "any"):
        result = {"type": "any"}
    else:
        result = {"type": "tool", "name": aliases.to_provider(choice)}
    if options.parallel_tool_calls is False:
        result["disable_parallel_tool_use"] = True
    return result


def _turns(
    messages: Iterable[Message], aliases: ToolNameAliases, deferred: DeferredTools | None
) -> list[dict[str, Any]]:
    """Messages as alternating user/assistant turns of content blocks; a loader's result
    that names deferred tools as ``tool_reference`` blocks, which load them."""
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in messages:
        if isinstance(message, UserMessage):
            add("user", [{"type": "text", "text": message.text}])
        elif isinstance(message, ToolResponseMessage):
            add("user", [_tool_result(r, aliases, deferred) for r in message.responses])
        elif isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(message, aliases)
            if blocks:  # the API rejects empty assistant turns
                add("assistant", blocks)
    for turn in turns:  # a lone text block is sent as a plain string, the common form
        content = turn["content"]
        if len(content) == 1 and content[0].keys() == {"type", "text"}:
            turn["content"] = content[0]["text"]
    return turns


def _assistant_blocks(message: AssistantMessage, aliases: ToolNameAliases) -> list[dict[str, Any]]:
    """The blocks an assistant message goes back as: its Anthropic content while the message's
    fields still agree with it, else blocks made from those fields."""
    kept = message.provider_content
    if kept is None or kept.provider != _PROVIDER:
        return _field_blocks(message, aliases)
    blocks = kept.blocks
    if not message.tool_calls:
        # A streamed tool loop's answer: every round's blocks, whose client calls ran inside
        # the loop and are not part of the message (a memory outside the loop stores it so).
        blocks = tuple(block for block in blocks if block.get("type") != "tool_use")
    text, reasoning, tool_uses = _fields_of(blocks)
    if (text, reasoning, len(tool_uses)) == (
        message.text,
        message.reasoning,
        len(message.tool_calls),
    ):
        return _kept_blocks(blocks, message.tool_calls, aliases)
    later = _later_rounds(message, text, reasoning) if not message.tool_calls else None
    if later is not None:
        return [*_kept_blocks(blocks, (), aliases), *_field_blocks(later, aliases)]
    logger.warning(
        "anthropic: an assistant message's text, reasoning or number of tool calls differ "
        "from those of its provider_content (the message was changed after the model made "
        "it); it is sent from its fields, without what only provider_content holds (server "
        "tool calls and results, citations)"
    )
    return _field_blocks(message, aliases)


def _later_rounds(
    message: AssistantMessage, text: str | None, reasoning: tuple[Reasoning, ...]
) -> AssistantMessage | None:
    """What ``message`` holds after its provider content, when its fields continue the
    blocks' (the answer of a streamed tool loop whose last rounds needed no blocks of their
    own: their fields give them exactly); ``None`` when they do not (the message was
    changed)."""
    full_text, kept_text = message.text or "", text or ""
    if not full_text.startswith(kept_text) or message.reasoning[: len(reasoning)] != reasoning:
        return None
    return AssistantMessage(
        text=full_text[len(kept_text) :] or None, reasoning=message.reasoning[len(reasoning) :]
    )


def _field_blocks(message: AssistantMessage, aliases: ToolNameAliases) -> list[dict[str, Any]]:
    """Signed and redacted thinking first, as the API requires of a tool-use turn; then the
    text and the tool calls."""
    blocks: list[dict[str, Any]] = [
        _thinking_block(part) for part in message.reasoning if part.signature or part.redacted
    ]
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    blocks.extend({"type": "tool_use", **_tool_use(call, aliases)} for call in message.tool_calls)
    return blocks


def _kept_blocks(
    blocks: Sequence[Mapping[str, Any]],
    calls: Sequence[ToolCall],
    aliases: ToolNameAliases,
) -> list[dict[str, Any]]:
    """``blocks`` as they came, the n-th ``tool_use`` block carrying the n-th of ``calls``
    (its other fields, such as ``caller``, kept), and without empty text blocks (a stream
    may open one that no delta fills; the API rejects them)."""
    remaining = iter(calls)
    sent: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "tool_use":
            sent.append({**block, **_tool_use(next(remaining), aliases)})
        elif kind != "text" or block.get("text"):
            sent.append(_as_request_block(block))
    return sent


def _as_request_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """A response's content block as a request takes it back. The one field responses have
    that requests refuse ("Extra inputs are not permitted") is a document citation's
    ``file_id`` (``char_location``, ``page_location``, ``content_block_location``; the SDK's
    request types have none), which a web fetch's cited text carries, null or not."""
    citations = block.get("citations")
    if not isinstance(citations, list):  # none, or a document's {"enabled": true}
        return dict(block)
    return {
        **block,
        "citations": [
            {key: value for key, value in citation.items() if key != "file_id"}
            for citation in citations
        ],
    }


def _tool_use(call: ToolCall, aliases: ToolNameAliases) -> dict[str, Any]:
    return {
        "id": call.id,
        "name": aliases.to_provider(call.name),
        "input": _input_object(call.arguments),
    }


def _thinking_block(part: Reasoning) -> dict[str, Any]:
    if part.redacted is not None:
        return {"type": "redacted_thinking", "data": part.redacted}
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


def _tool_result(
    response: ToolResponse, aliases: ToolNameAliases, deferred: DeferredTools | None
) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": response.id}
    references = deferred.referenced(response) if deferred is not None else []
    if references:
        block["content"] = [
            {"type": "tool_reference", "tool_name": aliases.to_provider(name)}
            for name in references
        ]
    elif response.images:
        # Images go in the result itself as image blocks, next to its text.
        text = [{"type": "text", "text": response.data}] if response.data else []
        block["content"] = text + [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": image.mime_type, "data": image.data},
            }
            for image in response.images
        ]
    elif response.data:  # the API rejects empty text content
        block["content"] = response.data
    if response.is_error:
        block["is_error"] = True
    return block


def _input_object(arguments: str) -> dict[str, Any]:
    """A ``tool_use`` block's ``input`` must be an object. Arguments the model sent broken
    (e.g. cut off at max_tokens) were answered with an error result; they are replayed as
    ``{}`` since the text cannot be sent."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _usage(
    input_tokens: int | None,
    output_tokens: int | None,
    cache_read: int | None,
    cache_write: int | None,
) -> Usage:
    """``prompt_tokens`` includes cached input, which Anthropic counts apart."""
    prompt = (input_tokens or 0) + (cache_read or 0) + (cache_write or 0)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=output_tokens or 0,
        total_tokens=prompt + (output_tokens or 0),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


class _Turn:
    """One turn of the model over as many requests as its pauses take. A server tool loop
    that runs long stops with ``pause_turn``; Anthropic's documented way on is to send the
    response back as it is, as the last (assistant) message of the same request, and the
    next response continues it. Blocks of successive pauses go back together."""

    def __init__(self, params: dict[str, Any], max_continuations: int) -> None:
        self._params = params
        self._max_continuations = max_continuations
        self._paused: list[dict[str, Any]] = []
        self._continuations = 0

    def continuation_after(self, message: AnthropicMessage) -> dict[str, Any] | None:
        if message.stop_reason != _PAUSED:
            return None
        # The container as a plain dict, on every SDK version.
        container = _container_id(message.to_dict(mode="json", warnings=False))
        return self.continuation(message.stop_reason, _content_of(message), container)

    @property
    def paused_blocks(self) -> tuple[dict[str, Any], ...]:
        """The blocks of the responses that paused the turn, sent back to continue it."""
        return tuple(self._paused)

    def continuation(
        self, stop_reason: str | None, content: list[dict[str, Any]], container: str | None
    ) -> dict[str, Any] | None:
        """The request that continues the turn after a response that stopped with
        ``stop_reason`` (its ``content`` and ``container``), or ``None`` when the turn ended
        or the continuations allowed are used up (it is then returned paused)."""
        if stop_reason != _PAUSED:
            return None
        if self._continuations == self._max_continuations:
            logger.warning(
                "anthropic: the turn is still paused after %d continuation(s) of a server tool "
                "loop; it is returned as it is (finish_reason 'pause_turn'; "
                "max_pause_continuations allows more)",
                self._continuations,
            )
            return None
        self._continuations += 1
        self._paused.extend(content)
        params = dict(self._params)
        params["messages"] = [
            *self._params["messages"],
            {"role": "assistant", "content": [_as_request_block(b) for b in self._paused]},
        ]
        if container is not None:  # code execution goes on in the container it used
            # In the body: SDKs before the ``container`` parameter send it as well.
            params["extra_body"] = {**self._params.get("extra_body", {}), "container": container}
        return params


def _container_id(sent: Mapping[str, Any]) -> str | None:
    container = sent.get("container")
    return container.get("id") if isinstance(container, Mapping) else None


# The SDK builds a block or delta of a type it does not know (a server tool newer than it, the
# MCP connector's blocks) as the first of its union, a text one without text: the type tells.
def _is_text_block(block: object) -> TypeGuard[TextBlock]:
    return isinstance(block, TextBlock) and block.type == "text"


def _is_text_delta(delta: object) -> TypeGuard[TextDelta]:
    return isinstance(delta, TextDelta) and delta.type == "text_delta"


def _response(messages: Sequence[AnthropicMessage], incoming: IncomingCalls) -> ChatResponse:
    """The turn the ``messages`` made: one, or a paused one and its continuations."""
    blocks = [block for message in messages for block in _content_of(message)]
    last = messages[-1]
    generation = Generation(
        message=_assistant_message(blocks, incoming),
        metadata={"finish_reason": last.stop_reason},
    )
    usage = _message_usage(messages[0])
    for message in messages[1:]:  # every request of the turn is billed
        usage += _message_usage(message)
    return ChatResponse(
        generations=(generation,),
        usage=usage,
        metadata={"id": last.id, "model": last.model, "provider": "anthropic"},
    )


def _content_of(message: AnthropicMessage) -> list[dict[str, Any]]:
    """The content blocks as the API sent them (unset fields left out), as the SDK would send
    ``message.content`` back (a block of a type the SDK does not know keeps its own)."""
    sent = message.to_dict(mode="json", warnings=False)
    return cast("list[dict[str, Any]]", sent["content"])  # a list of block objects


def _assistant_message(
    blocks: Sequence[Mapping[str, Any]], incoming: IncomingCalls
) -> AssistantMessage:
    """The message a turn's ``blocks`` make: its text, reasoning and tool calls, and the
    blocks themselves as its provider content when those fields would not give them back."""
    text, reasoning, tool_uses = _fields_of(blocks)
    calls = tuple(
        incoming.tool_call(
            block["id"], block["name"], json.dumps(block["input"], ensure_ascii=False)
        )
        for block in tool_uses
    )
    message = AssistantMessage(text=text, tool_calls=calls, reasoning=reasoning)
    as_kept = _kept_blocks(blocks, calls, incoming.aliases)
    if _without_nulls(as_kept) == _without_nulls(_field_blocks(message, incoming.aliases)):
        return message
    content = ProviderContent(provider=_PROVIDER, blocks=tuple(dict(block) for block in blocks))
    return message.model_copy(update={"provider_content": content})


def _fields_of(
    blocks: Iterable[Mapping[str, Any]],
) -> tuple[str | None, tuple[Reasoning, ...], list[Mapping[str, Any]]]:
    """What a message's fields hold of ``blocks``: the text (of all text blocks), the
    reasoning (thinking blocks) and the ``tool_use`` blocks."""
    texts: list[str] = []
    reasoning: list[Reasoning] = []
    tool_uses: list[Mapping[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(block["text"])
        elif kind == "thinking":  # an empty signature is none (as a stream without one)
            reasoning.append(
                Reasoning(text=block["thinking"], signature=block.get("signature") or None)
            )
        elif kind == "redacted_thinking":
            reasoning.append(Reasoning(redacted=block["data"]))
        elif kind == "tool_use":
            tool_uses.append(block)
    return "".join(texts) or None, tuple(reasoning), tool_uses


def _without_nulls(blocks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A field sent as null says no more than one left out (``"citations": null``)."""
    return [{key: value for key, value in block.items() if value is not None} for block in blocks]


def _message_usage(message: AnthropicMessage) -> Usage:
    return _usage(
        message.usage.input_tokens,
        message.usage.output_tokens,
        message.usage.cache_read_input_tokens,
        message.usage.cache_creation_input_tokens,
    )


@dataclasses.dataclass(slots=True)
class _PendingToolUse:
    block_id: str
    name: str
    parts: list[str]


@dataclasses.dataclass(slots=True)
class _StreamedBlock:
    """A text or thinking block arriving delta by delta."""

    thinking: bool
    text: StreamedText = dataclasses.field(default_factory=StreamedText)

    def add(self, delta: str) -> AssistantMessage | None:
        """What of ``delta`` can be shown now (a surrogate half ending it waits for the next)."""
        return self._message(self.text.add(delta))

    def end(self) -> AssistantMessage | None:
        """A surrogate half nothing completed, passed on as it came."""
        return self._message(self.text.end())

    def _message(self, text: str) -> AssistantMessage | None:
        if not text:
            return None
        if self.thinking:
            return AssistantMessage(reasoning=(Reasoning(text=text),))
        return AssistantMessage(text=text)


class _StreamedContent:
    """A streamed message's content blocks as the API sent them (their deltas applied), its
    stop reason and its container: what a paused turn is sent back as."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        # (block index, field) -> its deltas, joined only if the turn is sent back
        self._deltas: dict[tuple[int, str], list[str]] = {}
        self.stop_reason: str | None = None
        self.container: str | None = None

    def add(self, event: RawMessageStreamEvent) -> None:
        if isinstance(event, RawContentBlockStartEvent):
            self._blocks[event.index] = event.content_block.to_dict(mode="json", warnings=False)
        elif isinstance(event, RawContentBlockDeltaEvent) and event.index in self._blocks:
            delta = event.delta
            if _is_text_delta(delta):
                self._deltas.setdefault((event.index, "text"), []).append(delta.text)
            elif isinstance(delta, ThinkingDelta):
                self._deltas.setdefault((event.index, "thinking"), []).append(delta.thinking)
            elif isinstance(delta, InputJSONDelta):
                self._deltas.setdefault((event.index, "input"), []).append(delta.partial_json)
            elif isinstance(delta, SignatureDelta):
                self._blocks[event.index]["signature"] = delta.signature
            elif isinstance(delta, CitationsDelta):
                block = self._blocks[event.index]
                citation = delta.citation.to_dict(mode="json")
                block["citations"] = [*(block.get("citations") or ()), citation]
        elif isinstance(event, RawMessageStartEvent):
            self.container = _container_id(event.message.to_dict(mode="json"))
        elif isinstance(event, RawMessageDeltaEvent):
            self.stop_reason = event.delta.stop_reason
            self.container = _container_id(event.delta.to_dict(mode="json")) or self.container

    def blocks(self) -> list[dict[str, Any]]:
        blocks = {index: dict(block) for index, block in self._blocks.items()}
        for (index, field), deltas in self._deltas.items():
            # Halves of a character cut between deltas are one again: the API gets back the
            # text it sent (a signed thinking block changed fails its signature check).
            joined = joined_surrogates("".join(deltas))
            if field == "input":  # the deltas replace the start's empty object
                blocks[index]["input"] = _input_object(joined)
            else:
                blocks[index][field] = blocks[index].get(field, "") + joined
        return [blocks[index] for index in sorted(blocks)]


class _StreamState:
    """Translates raw stream events into ``ChatResponse`` chunks."""

    def __init__(self, incoming: IncomingCalls) -> None:
        self._incoming = incoming
        self._tool_uses: dict[int, _PendingToolUse] = {}
        self._blocks: dict[int, _StreamedBlock] = {}  # text and thinking, by block index
        self._start_usage: AnthropicUsage | None = None
        self._paused_usage: Usage | None = None  # of the requests before a continuation
        self._metadata: dict[str, Any] = {"provider": "anthropic"}
        self.events_received = 0

    def add(self, event: RawMessageStreamEvent) -> ChatResponse | None:
        self.events_received += 1
        if isinstance(event, RawMessageStartEvent):
            self._metadata.update(id=event.message.id, model=event.message.model)
            self._start_usage = event.message.usage
        elif isinstance(event, RawContentBlockStartEvent):
            block = event.content_block
            if isinstance(block, ToolUseBlock):
                # Some gateways send the whole input here instead of as deltas.
                parts = [json.dumps(block.input, ensure_ascii=False)] if block.input else []
                self._tool_uses[event.index] = _PendingToolUse(block.id, block.name, parts)
            elif _is_text_block(block):
                return self._streamed(event.index, block.text, thinking=False)
            elif isinstance(block, RedactedThinkingBlock):
                return self.chunk(AssistantMessage(reasoning=(Reasoning(redacted=block.data),)))
            elif isinstance(block, ThinkingBlock) and block.signature:
                # Some gateways send the block whole; nothing to join it with.
                part = Reasoning(text=block.thinking, signature=block.signature)
                return self.chunk(AssistantMessage(reasoning=(part,)))
            elif isinstance(block, ThinkingBlock):  # usually empty, the text following as deltas
                return self._streamed(event.index, block.thinking, thinking=True)
        elif isinstance(event, RawContentBlockDeltaEvent):
            delta = event.delta
            if _is_text_delta(delta):
                return self._streamed(event.index, delta.text, thinking=False)
            if isinstance(delta, InputJSONDelta) and event.index in self._tool_uses:
                self._tool_uses[event.index].parts.append(delta.partial_json)
            # Thinking streams as text deltas, then a signature that closes the block (the
            # aggregator joins them: see StreamAggregator).
            if isinstance(delta, ThinkingDelta):
                return self._streamed(event.index, delta.thinking, thinking=True)
            if isinstance(delta, SignatureDelta):
                streamed = self._blocks.pop(event.index, None)
                held = streamed.end() if streamed is not None else None
                signed = (*(held.reasoning if held else ()), Reasoning(signature=delta.signature))
                return self.chunk(AssistantMessage(reasoning=signed))
        elif isinstance(event, RawContentBlockStopEvent):
            pending = self._tool_uses.pop(event.index, None)
            if pending is not None:
                arguments = "".join(pending.parts)
                call = self._incoming.tool_call(pending.block_id, pending.name, arguments)
                return self.chunk(AssistantMessage(tool_calls=(call,)))
            streamed = self._blocks.pop(event.index, None)
            held = streamed.end() if streamed is not None else None
            if held is not None:
                return self.chunk(held)
        elif isinstance(event, RawMessageDeltaEvent):
            usage = self._final_usage(event)
            if self._paused_usage is not None:  # every request of a paused turn is billed
                usage = self._paused_usage + usage
            if event.delta.stop_reason == _PAUSED:
                self._paused_usage = usage
            return self.chunk(
                AssistantMessage(),
                metadata={"finish_reason": event.delta.stop_reason},
                usage=usage,
            )
        return None

    def _streamed(self, index: int, delta: str, *, thinking: bool) -> ChatResponse | None:
        message = self._blocks.setdefault(index, _StreamedBlock(thinking)).add(delta)
        return self.chunk(message) if message is not None else None

    def _final_usage(self, event: RawMessageDeltaEvent) -> Usage:
        # The delta's counts are cumulative; input counts in it (newer API versions send
        # them) supersede those of message_start.
        final, start = event.usage, self._start_usage
        return _usage(
            _first(final.input_tokens, start.input_tokens if start else None),
            final.output_tokens,
            _first(final.cache_read_input_tokens, start.cache_read_input_tokens if start else None),
            _first(
                final.cache_creation_input_tokens,
                start.cache_creation_input_tokens if start else None,
            ),
        )

    def chunk(
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


def _first(*values: int | None) -> int | None:
    return next((v for v in values if v is not None), None)
