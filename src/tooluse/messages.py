"""Messages, prompts and model responses: the value objects every layer passes around.

All of them are immutable, built with keywords (``UserMessage(text="hi")``) and survive a JSON
round-trip (``Message`` is a discriminated union on ``role``), because conversations are stored
in memory repositories and paused runs are resumed from JSON.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

if TYPE_CHECKING:
    from tooluse.tools import ToolCallback

__all__ = [
    "IMAGE_MIME_TYPES",
    "AssistantMessage",
    "ChatOptions",
    "ChatResponse",
    "DeferredTools",
    "Generation",
    "ImagePart",
    "Message",
    "Prompt",
    "ProviderContent",
    "Reasoning",
    "StoredMessage",
    "SystemMessage",
    "ToolCall",
    "ToolResponse",
    "ToolResponseMessage",
    "Usage",
    "UserMessage",
    "message_from_json",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
    "sum_usage",
]


class _Value(BaseModel):
    # Validators are built on a class's first use, not at import (``import tooluse`` stays cheap).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    # Fields a caller may also give by position, in the order of the public API (SPEC 1):
    # ``ToolCall("c1", "get_weather", "{}")`` as well as ``ToolCall(id="c1", ...)``.
    _positional: ClassVar[tuple[str, ...]] = ()

    def __init__(self, /, *args: Any, **data: Any) -> None:
        if args:
            names = self._positional
            kind = type(self).__name__
            if len(args) > len(names):
                raise TypeError(
                    f"{kind} takes at most {len(names)} positional arguments "
                    f"({', '.join(names) or 'none: use keywords'}), got {len(args)}"
                )
            for name, value in zip(names, args, strict=False):
                if name in data:
                    raise TypeError(f"{kind} got {name!r} both by position and by keyword")
                data[name] = value
        super().__init__(**data)


class ToolCall(_Value):
    """A tool call requested by the model.

    ``arguments`` is the raw JSON text the model sent; empty means no arguments (``{}``).
    """

    _positional = ("id", "name", "arguments")

    if TYPE_CHECKING:  # the signature type checkers see; __init__ is _Value's

        def __init__(self, id: str, name: str, arguments: str = ...) -> None: ...

    id: str
    name: str
    arguments: str = ""


ImageMimeType = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]
IMAGE_MIME_TYPES: Final[frozenset[str]] = frozenset(get_args(ImageMimeType))
"""The image types a tool result can show the model: those both Anthropic (``image`` blocks)
and OpenAI (``image_url`` parts) take."""


class ImagePart(_Value):
    """An image a tool result shows the model: ``data`` is the image's bytes in base64.

    Adapters send it as the provider's image (never as text); ``data_url()`` is the
    ``data:`` URL form OpenAI's APIs take.
    """

    _positional = ("mime_type", "data")

    if TYPE_CHECKING:  # the signature type checkers see; __init__ is _Value's

        def __init__(self, mime_type: str, data: str) -> None: ...

    mime_type: ImageMimeType
    data: str = Field(min_length=1)

    def data_url(self) -> str:
        return f"data:{self.mime_type};base64,{self.data}"

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # The base64 of a screenshot is 100,000s of characters: not for logs and test diffs.
        yield "mime_type", self.mime_type
        yield "data", f"<{len(self.data)} base64 characters>"


class ToolResponse(_Value):
    """The result of one tool call, sent back to the model under the call's ``id``.

    ``images`` are shown to the model next to ``data`` (see ``ImagePart``); the executor
    fills them from a tool's ``ToolResult``.
    """

    _positional = ("id", "name", "data")

    if TYPE_CHECKING:  # the signature type checkers see; __init__ is _Value's

        def __init__(
            self,
            id: str,
            name: str,
            data: str,
            *,
            is_error: bool = ...,
            images: Sequence[ImagePart] = ...,
        ) -> None: ...

    id: str
    name: str
    data: str
    is_error: bool = False
    images: tuple[ImagePart, ...] = ()


def _unset_if_none(value: object) -> bool:
    """Fields that default to ``None`` (a message's own facts) are left out of its JSON while
    unset, so the JSON of a plain message stays what it was before they existed."""
    return value is None


_PAUSED_TURN_DOC: Final = (
    "The id of a turn paused for approval: the messages that stand for the turn in memory "
    "while it waits (its question, an account of what ran and what waits) carry it, and so "
    "does the resumed turn's question, so chat memory replaces them with the resumed turn "
    "(:class:`~tooluse.memory.MessageWindowChatMemory`)."
)
_HELD_DOC: Final = (
    "The ids of the calls a round paused for approval held: on the round's record "
    "(:func:`~tooluse.history.held_round_record`), or on a text account of a paused turn."
)


class SystemMessage(_Value):
    _positional = ("text",)

    if TYPE_CHECKING:  # the signature type checkers see; __init__ is _Value's

        def __init__(
            self, text: str, *, metadata: Mapping[str, Any] = ..., role: Literal["system"] = ...
        ) -> None: ...

    role: Literal["system"] = "system"
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class UserMessage(_Value):
    _positional = ("text",)

    if TYPE_CHECKING:  # the signature type checkers see; __init__ is _Value's

        def __init__(
            self,
            text: str,
            *,
            original_text: str | None = ...,
            paused_turn: str | None = ...,
            metadata: Mapping[str, Any] = ...,
            role: Literal["user"] = ...,
        ) -> None: ...

    role: Literal["user"] = "user"
    text: str
    original_text: str | None = Field(
        default=None,
        exclude_if=_unset_if_none,
        description="What the user wrote, when an advisor rewrote ``text`` (retrieval "
        "augmentation puts documents and rules around the question); memory stores the "
        "question as asked (:func:`~tooluse.history.as_asked`).",
    )
    paused_turn: str | None = Field(
        default=None, exclude_if=_unset_if_none, description=_PAUSED_TURN_DOC
    )
    metadata: dict[str, Any] = Field(default_factory=dict)


class Reasoning(_Value):
    """Thinking a model did before it answered, kept so that it can be sent back: DeepSeek's
    thinking mode rejects a history whose tool-call turn lacks its ``reasoning_content``, and
    Claude's extended thinking one whose tool-use turn lacks its signed thinking blocks.

    ``signature`` (Anthropic) certifies ``text`` unaltered; ``redacted`` is the encrypted data
    of a ``redacted_thinking`` block (``text`` is then empty). ``id`` and ``encrypted_content``
    come from an OpenAI Responses reasoning item: a part per summary part (``text``), each with
    the item's id, the last with the item's encrypted reasoning (one empty part when the item
    has no summary); the API reads them back when the conversation is sent whole.
    """

    text: str = ""
    signature: str | None = None
    redacted: str | None = None
    id: str | None = None
    encrypted_content: str | None = None


class ProviderContent(_Value):
    """An assistant turn as the provider that produced it sent it: its content blocks, in
    their order, each as the provider's JSON. It holds what the other fields of the message
    cannot: blocks no field models (Anthropic's server tool calls and results, such as
    ``server_tool_use`` and ``web_search_tool_result``), citations on text, and the order of
    text, thinking, tool calls and those blocks. Anthropic wants an assistant turn back
    unchanged; the message's own fields (``text``, ``tool_calls``, ``reasoning``) stay the
    portable view every layer reads.

    Only the adapter of ``provider`` (a ``ChatModel.provider``, e.g. ``"anthropic"``) reads
    it, and only while the message's own fields are still those the blocks give; the others
    send those fields and ignore it.
    """

    _positional = ("provider", "blocks")

    if TYPE_CHECKING:  # the signature type checkers see; __init__ is _Value's

        def __init__(self, provider: str, blocks: Sequence[Mapping[str, Any]]) -> None: ...

    provider: str = Field(min_length=1)
    blocks: tuple[dict[str, Any], ...]


class AssistantMessage(_Value):
    _positional = ("text", "tool_calls")

    if TYPE_CHECKING:  # the signature type checkers see; __init__ is _Value's

        def __init__(
            self,
            text: str | None = ...,
            tool_calls: Sequence[ToolCall] = ...,
            *,
            reasoning: Sequence[Reasoning] = ...,
            provider_content: ProviderContent | None = ...,
            paused_turn: str | None = ...,
            held_for_approval: Sequence[str] | None = ...,
            metadata: Mapping[str, Any] = ...,
            role: Literal["assistant"] = ...,
        ) -> None: ...

    role: Literal["assistant"] = "assistant"
    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: tuple[Reasoning, ...] = ()
    # The turn in its provider's own form, where the fields above lose something of it
    # (see ProviderContent); None for most turns.
    provider_content: ProviderContent | None = None
    paused_turn: str | None = Field(
        default=None, exclude_if=_unset_if_none, description=_PAUSED_TURN_DOC
    )
    held_for_approval: tuple[str, ...] | None = Field(
        default=None, exclude_if=_unset_if_none, description=_HELD_DOC
    )
    metadata: dict[str, Any] = Field(default_factory=dict)

    def reasoning_text(self) -> str:
        """The readable reasoning, parts joined by a blank line (redacted parts left out)."""
        return "\n\n".join(part.text for part in self.reasoning if part.text)

    def has_tool_calls(self) -> bool:
        return bool(self.tool_calls)


class ToolResponseMessage(_Value):
    _positional = ("responses",)

    if TYPE_CHECKING:  # the signature type checkers see; __init__ is _Value's

        def __init__(
            self,
            responses: Sequence[ToolResponse],
            *,
            held_for_approval: Sequence[str] | None = ...,
            executed_return_direct: bool | None = ...,
            metadata: Mapping[str, Any] = ...,
            role: Literal["tool"] = ...,
        ) -> None: ...

    role: Literal["tool"] = "tool"
    responses: tuple[ToolResponse, ...]
    held_for_approval: tuple[str, ...] | None = Field(
        default=None, exclude_if=_unset_if_none, description=_HELD_DOC
    )
    executed_return_direct: bool | None = Field(
        default=None,
        exclude_if=_unset_if_none,
        description="On the results of a round paused for approval: whether every call "
        "that ran was return-direct, so the round's return-direct rule spans the resume.",
    )
    metadata: dict[str, Any] = Field(default_factory=dict)


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolResponseMessage,
    Field(discriminator="role"),
]

# Facts older releases kept in ``metadata`` under string keys, by role: the key, then the
# field that holds the fact now.
_LEGACY_METADATA: Final[Mapping[str, Mapping[str, str]]] = {
    "user": {"rag_original_text": "original_text", "paused_turn": "paused_turn"},
    "assistant": {"paused_turn": "paused_turn", "held_for_approval": "held_for_approval"},
    "tool": {
        "held_for_approval": "held_for_approval",
        "tooluse.executed_return_direct": "executed_return_direct",
    },
}


def _read_legacy_metadata(data: Any) -> Any:
    if not isinstance(data, dict):
        return data
    metadata, role = data.get("metadata"), data.get("role")
    legacy = _LEGACY_METADATA.get(role) if isinstance(role, str) else None
    if legacy is None or not metadata or not isinstance(metadata, Mapping):
        return data
    found = [key for key in legacy if key in metadata]
    if not found:
        return data
    data = {**data, "metadata": {k: v for k, v in metadata.items() if k not in found}}
    for key in found:
        data.setdefault(legacy[key], metadata[key])
    return data


StoredMessage = Annotated[Message, BeforeValidator(_read_legacy_metadata)]
"""A :data:`Message` read from storage (a memory repository, a paused run's JSON): also in
the form older releases wrote, which kept a message's own facts (``original_text``,
``paused_turn``, ``held_for_approval``, ``executed_return_direct``) in its ``metadata``
under string keys. Building messages in code needs none of it: stored JSON is validated
with this, new messages with :data:`Message`."""

_DEFERRED = ConfigDict(defer_build=True)
_MESSAGE: TypeAdapter[Message] = TypeAdapter(StoredMessage, config=_DEFERRED)
_MESSAGE_LIST: TypeAdapter[list[Message]] = TypeAdapter(list[StoredMessage], config=_DEFERRED)


def _dump_json(adapter: TypeAdapter[Any], value: object) -> str:
    try:
        return adapter.dump_json(value).decode()
    except PydanticSerializationError:
        # A lone surrogate (a model's "\ud800" escape, decoded) cannot be UTF-8 encoded;
        # the standard library escapes it, so the text is still stored intact.
        return json.dumps(adapter.dump_python(value, mode="json"))


def _load_json(adapter: TypeAdapter[Any], text: str | bytes) -> Any:
    try:
        return adapter.validate_json(text)
    except ValidationError as error:
        if error.errors()[0]["type"] != "json_invalid":
            raise
        # pydantic's parser rejects escaped lone surrogates, which the standard library reads.
        return adapter.validate_python(json.loads(text))


def messages_to_json(messages: Sequence[Message]) -> str:
    """Serialise a conversation to JSON text (tool calls and results intact)."""
    return _dump_json(_MESSAGE_LIST, list(messages))


def messages_from_json(text: str | bytes) -> list[Message]:
    """Parse what :func:`messages_to_json` wrote."""
    result: list[Message] = _load_json(_MESSAGE_LIST, text)
    return result


def message_to_json(message: Message) -> str:
    """Serialise one message to JSON text."""
    return _dump_json(_MESSAGE, message)


def message_from_json(text: str | bytes) -> Message:
    """Parse what :func:`message_to_json` wrote."""
    result: Message = _load_json(_MESSAGE, text)
    return result


class Usage(_Value):
    """Token usage of one model call, or the sum over a loop (``a + b``).

    The cache counts stay ``None`` when the provider does not report them, so "not reported"
    and "zero" are told apart.
    """

    _positional = (
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    )

    if TYPE_CHECKING:  # the signature type checkers see; __init__ is _Value's

        def __init__(
            self,
            prompt_tokens: int = ...,
            completion_tokens: int = ...,
            total_tokens: int = ...,
            cache_read_tokens: int | None = ...,
            cache_write_tokens: int | None = ...,
        ) -> None: ...

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None

    def is_empty(self) -> bool:
        return self.total_tokens == 0 and self.prompt_tokens == 0 and self.completion_tokens == 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cache_read_tokens=_add_optional(self.cache_read_tokens, other.cache_read_tokens),
            cache_write_tokens=_add_optional(self.cache_write_tokens, other.cache_write_tokens),
        )


def sum_usage(*usages: Usage | None) -> Usage | None:
    """The sum of the ``usages`` reported (``None`` when none is)."""
    total: Usage | None = None
    for usage in usages:
        if usage is not None and not usage.is_empty():
            total = usage if total is None else total + usage
    return total


def _add_optional(a: int | None, b: int | None) -> int | None:
    if a is None and b is None:
        return None
    return (a or 0) + (b or 0)


class Generation(_Value):
    """One candidate answer. ``metadata["finish_reason"]`` says why the model stopped."""

    _positional = ("message", "metadata")

    if TYPE_CHECKING:  # the signature type checkers see; __init__ is _Value's

        def __init__(
            self, message: AssistantMessage, metadata: Mapping[str, Any] = ...
        ) -> None: ...

    message: AssistantMessage
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def finish_reason(self) -> str | None:
        reason = self.metadata.get("finish_reason")
        return None if reason is None else str(reason)


class ChatResponse(_Value):
    _positional = ("generations", "usage", "metadata")

    if TYPE_CHECKING:  # the signature type checkers see; __init__ is _Value's

        def __init__(
            self,
            generations: Sequence[Generation] = ...,
            usage: Usage | None = ...,
            metadata: Mapping[str, Any] = ...,
        ) -> None: ...

    generations: tuple[Generation, ...] = ()
    usage: Usage | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def has_tool_calls(self) -> bool:
        """True if any generation's message requests a tool call."""
        return any(g.message.tool_calls for g in self.generations)

    @property
    def result(self) -> Generation | None:
        """The first generation, or ``None`` for an empty (e.g. usage-only) response."""
        return self.generations[0] if self.generations else None

    @property
    def text(self) -> str:
        """Text of the first generation ('' when there is none)."""
        first = self.result
        return (first.message.text or "") if first is not None else ""


@dataclasses.dataclass(frozen=True, slots=True)
class DeferredTools:
    """Offered tools the provider keeps out of the model's context until a result of a
    ``loaders`` tool (a JSON list of tool names, as ``toolSearchTool`` returns) names them:
    Anthropic's ``defer_loading`` with ``tool_reference`` results, OpenAI's client-executed
    ``tool_search`` with ``tool_search_output`` items. The request's tool list
    stays the same as tools are found, so the provider's prompt cache keeps hitting.

    Only models with ``loads_deferred_tools = True`` read it (``AnthropicChatModel``,
    ``OpenAIResponsesChatModel``);
    ``ToolSearchToolCallingAdvisor(defer_loading=True)`` sets it for those models only.
    """

    names: frozenset[str]
    loaders: frozenset[str]

    def __init__(self, names: Iterable[str], loaders: Iterable[str]) -> None:
        object.__setattr__(self, "names", frozenset(names))
        object.__setattr__(self, "loaders", frozenset(loaders))
        if not self.loaders:
            raise ValueError("DeferredTools needs at least one loader tool (e.g. toolSearchTool)")
        if overlap := self.names & self.loaders:
            raise ValueError(
                f"a loader tool cannot itself be deferred (nothing could load it): "
                f"{sorted(overlap)}"
            )

    def referenced(self, response: ToolResponse) -> list[str]:
        """The deferred tools a result names, in its order: none unless it is a successful
        result of a loader whose data is a JSON list of names."""
        if response.is_error or response.name not in self.loaders:
            return []
        try:
            names = json.loads(response.data)
        except json.JSONDecodeError:
            return []
        if not isinstance(names, list):
            return []
        return list(dict.fromkeys(n for n in names if isinstance(n, str) and n in self.names))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ChatOptions:
    """Per-request options: the tools offered, the hidden tool context, and model parameters.

    Model parameters left ``None`` mean "the model's default". ``extra`` is passed to the
    provider as-is (e.g. ``{"seed": 7}``) for parameters this class does not name.
    """

    tool_callbacks: tuple[ToolCallback, ...] = ()
    tool_context: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    tool_choice: str | None = None
    parallel_tool_calls: bool | None = None
    deferred_tools: DeferredTools | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def replace(self, **changes: Any) -> ChatOptions:
        if "tool_callbacks" in changes:
            changes["tool_callbacks"] = tuple(changes["tool_callbacks"])
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True, slots=True)
class Prompt:
    """The messages sent to a model plus the options of the request."""

    messages: tuple[Message, ...]
    options: ChatOptions = dataclasses.field(default_factory=ChatOptions)

    def __init__(self, messages: Sequence[Message], options: ChatOptions | None = None) -> None:
        object.__setattr__(self, "messages", tuple(messages))
        object.__setattr__(self, "options", options if options is not None else ChatOptions())

    def replace(
        self, *, messages: Sequence[Message] | None = None, options: ChatOptions | None = None
    ) -> Prompt:
        return Prompt(
            self.messages if messages is None else messages,
            self.options if options is None else options,
        )
