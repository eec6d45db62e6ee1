"""``ChatClient``: a model with defaults (system text, tools, advisors, tool context), and the
request builder ``client.prompt()``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Final

from tooluse._sync import run_sync
from tooluse.advisors import (
    Advisor,
    AdvisorChain,
    CallAdvisor,
    ChatClientRequest,
    LoopResume,
    StreamAdvisor,
    ToolAdvisor,
    ToolCallingAdvisor,
)
from tooluse.calling import Approve, Decision
from tooluse.client._entity import format_instructions
from tooluse.client._response import CallResponse, StreamResponse
from tooluse.client._run import PreparedRequest
from tooluse.client._state import RunState, options_from_parameters
from tooluse.client._tools import ToolSources
from tooluse.messages import (
    AssistantMessage,
    ChatOptions,
    Message,
    Prompt,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.models import ChatModel
from tooluse.tools import ToolContext

__all__ = ["AUTO_REGISTER_TOOL_ADVISOR", "ChatClient", "ChatClientRequestSpec"]

_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolResponseMessage)

AUTO_REGISTER_TOOL_ADVISOR: Final = "tooluse.tool_calling.auto_register"
"""Request context key: ``False`` keeps the client from adding a ``ToolCallingAdvisor`` to
this request, so the model's tool calls come back unexecuted (a loop you drive yourself)."""


def _checked_advisors(advisors: Iterable[object]) -> tuple[Advisor, ...]:
    checked = []
    for advisor in advisors:
        if not isinstance(advisor, CallAdvisor | StreamAdvisor):
            raise TypeError(
                f"{advisor!r} is not an advisor: it needs `name`, `order` and "
                "`advise_call(request, chain)` and/or `advise_stream(request, chain)`"
            )
        checked.append(advisor)
    return tuple(checked)


def _model_options(options: ChatOptions | None, where: str) -> ChatOptions:
    if options is None:
        return ChatOptions()
    if not isinstance(options, ChatOptions):
        raise TypeError(f"{where} takes a ChatOptions, got {type(options).__name__}")
    if options.tool_callbacks or options.tool_context:
        raise ValueError(
            f"{where}: give tools with tools=/.tools() and the tool context with "
            "tool_context=/.tool_context(), not inside ChatOptions"
        )
    return options


def _override(base: ChatOptions, parameters: Mapping[str, Any]) -> ChatOptions:
    """``base`` with the parameters that are set (``extra`` merged key by key)."""
    changes = {k: v for k, v in parameters.items() if v is not None}
    if "extra" in changes:
        changes["extra"] = {**base.extra, **changes["extra"]}
    return base.replace(**changes) if changes else base


class ChatClient:
    """A chat model with defaults for every request.

    ``ChatClient(model, system=..., tools=[...], advisors=[...], tool_context={...},
    context={...}, options=ChatOptions(...))``; then
    ``client.prompt().user("...").call().content()`` (or ``await ....acall()``, or
    ``.stream()``).

    Tools: functions, objects with ``@tool`` methods, ``ToolCallback``s and providers
    (providers are asked for their tools on each request). A request's ``.tools(...)``
    replaces these defaults; ``.add_tools(...)`` adds to them; duplicate names raise.

    The client adds ``tool_calling_advisor`` (default: a new ``ToolCallingAdvisor()``) to
    each request's advisors unless a tool advisor is already there, or
    ``auto_register_tool_advisor=False``, or the request context says
    ``{AUTO_REGISTER_TOOL_ADVISOR: False}``: then the model's tool calls come back to you
    unexecuted, and ``content()`` raises :class:`ToolCallsNotExecuted` instead of returning
    an empty answer. Two tool advisors in one chain are an error.

    Driving the loop yourself (auto-registration off): run each round with
    ``ToolCallingManager`` and send its history back; the history holds the assistant
    message and one tool result per call under the call's id, so ids stay aligned::

        client = ChatClient(model, tools=[add], auto_register_tool_advisor=False)
        manager = ToolCallingManager()
        options = ChatOptions(tool_callbacks=tuple(tool_callbacks(add)))
        messages = [UserMessage(text="2 + 3?")]
        response = client.prompt().messages(messages).call().chat_response()
        while response.has_tool_calls():
            result = manager.execute_tool_calls(Prompt(messages, options), response)
            messages = list(result.conversation_history)
            response = client.prompt().messages(messages).call().chat_response()
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        system: str | None = None,
        tools: Iterable[object] | object = (),
        advisors: Iterable[Advisor] = (),
        tool_context: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        options: ChatOptions | None = None,
        tool_calling_advisor: ToolCallingAdvisor | None = None,
        auto_register_tool_advisor: bool = True,
    ) -> None:
        if not isinstance(model, ChatModel):
            raise TypeError(
                f"ChatClient needs a chat model (call, acall, stream), got {type(model).__name__}"
            )
        if tool_calling_advisor is not None and not isinstance(tool_calling_advisor, ToolAdvisor):
            raise TypeError("tool_calling_advisor must be a ToolCallingAdvisor (or a ToolAdvisor)")
        self._model = model
        self._system = system
        self._system_message: SystemMessage | None = None  # built on the first request
        self._tools = ToolSources.of((tools,))
        self._advisors = _checked_advisors(advisors)
        self._tool_context = ToolContext(tool_context)
        self._context = dict(context or {})
        self._options = _model_options(options, "ChatClient(options=...)")
        self._tool_calling_advisor = tool_calling_advisor or ToolCallingAdvisor()
        self._auto_register = auto_register_tool_advisor
        # A request that changes none of the defaults has the same chain and (without tool
        # providers) the same options every time: build them once.
        self._default_chain = self._build_chain(self._advisors, self._auto_register)
        self._default_options = (
            None
            if self._tools.has_providers
            else self._options.replace(
                tool_callbacks=self._tools.callbacks(), tool_context=self._tool_context
            )
        )

    @property
    def model(self) -> ChatModel:
        return self._model

    def _system_first(self, system: str) -> SystemMessage:
        # ``system``: the client's. A message is frozen: one for every request that keeps
        # the client's system text, not one validated per request.
        if self._system_message is None:
            self._system_message = SystemMessage(text=system)
        return self._system_message

    def prompt(self, user: str | None = None) -> ChatClientRequestSpec:
        """A new request; ``user`` is a shortcut for ``.user(text)``."""
        spec = ChatClientRequestSpec(self)
        return spec if user is None else spec.user(user)

    # -- chains ----------------------------------------------------------------------------

    def _build_chain(
        self, advisors: tuple[Advisor, ...], auto_register: bool
    ) -> tuple[AdvisorChain, Advisor | None]:
        tool_advisors: list[Advisor] = [a for a in advisors if isinstance(a, ToolAdvisor)]
        if len(tool_advisors) > 1:
            listed = ", ".join(f"{a.name} (order={a.order})" for a in tool_advisors)
            raise ValueError(
                "At most one tool advisor is allowed in the advisor chain, but found "
                f"{len(tool_advisors)}: [{listed}]"
            )
        if not tool_advisors and auto_register:
            advisors = (*advisors, self._tool_calling_advisor)
            tool_advisors = [self._tool_calling_advisor]
        return AdvisorChain(advisors, self._model), (tool_advisors[0] if tool_advisors else None)

    def _chain(
        self, request_advisors: tuple[Advisor, ...], context: Mapping[str, Any]
    ) -> tuple[AdvisorChain, Advisor | None]:
        auto_register = context.get(AUTO_REGISTER_TOOL_ADVISOR, self._auto_register)
        if not isinstance(auto_register, bool):
            raise TypeError(
                f"The context entry {AUTO_REGISTER_TOOL_ADVISOR!r} must be True or False, got "
                f"{auto_register!r}"
            )
        if not request_advisors and auto_register == self._auto_register:
            return self._default_chain
        return self._build_chain(self._advisors + request_advisors, auto_register)

    def _prepare(
        self,
        messages: tuple[Message, ...],
        options: ChatOptions,
        context: dict[str, Any],
        request_advisors: tuple[Advisor, ...],
        response_format: Any,
    ) -> PreparedRequest:
        if not messages:
            raise ValueError("The request has no messages: add .user(...) or .messages(...)")
        chain, tool_advisor = self._chain(request_advisors, context)
        request = ChatClientRequest(Prompt(messages, options), dict(context))
        return PreparedRequest(request, chain, context, tool_advisor, response_format)

    # -- resume ----------------------------------------------------------------------------

    def _prepare_resume(
        self,
        state: RunState,
        decisions: Mapping[str, Decision],
        tools: Iterable[object] | object | None,
        tool_context: Mapping[str, Any] | None,
        advisors: Iterable[Advisor],
    ) -> PreparedRequest:
        if not isinstance(state, RunState):
            raise TypeError(f"resume needs the RunState of a paused run, got {state!r:.100}")
        if not isinstance(decisions, Mapping):
            raise TypeError("decisions must map each pending call id to Approve() or Deny(...)")
        sources = self._tools if tools is None else ToolSources.of((tools,))
        callbacks = sources.callbacks()
        attached = {callback.definition.name for callback in callbacks}
        unattached = [
            f"{call.name} ({call.id})"
            for call in state.pending_tool_calls
            if isinstance(decisions.get(call.id), Approve) and call.name not in attached
        ]
        if unattached:
            raise ValueError(
                f"Cannot resume: the approved calls {unattached} need tools that are not "
                "attached; pass them with resume(..., tools=[...])"
            )
        options = _override(self._options, options_from_parameters(state.options)).replace(
            tool_callbacks=callbacks,
            tool_context=self._tool_context.merged({**state.tool_context, **(tool_context or {})}),
        )
        context = dict(state.context)
        chain, tool_advisor = self._chain(_checked_advisors(advisors), context)
        if tool_advisor is None:
            raise ValueError(
                "Cannot resume without a tool advisor in the chain: auto-registration is off "
                "for this request and no ToolCallingAdvisor was given"
            )
        resume = LoopResume(state.history, dict(decisions), state.usage)
        request = ChatClientRequest(Prompt(state.messages, options), dict(context), resume)
        return PreparedRequest(request, chain, context, tool_advisor)

    def resume(
        self,
        state: RunState,
        decisions: Mapping[str, Decision],
        *,
        tools: Iterable[object] | object | None = None,
        tool_context: Mapping[str, Any] | None = None,
        advisors: Iterable[Advisor] = (),
    ) -> CallResponse:
        """Continue a paused run with a decision per pending call id: ``Approve()``,
        ``Approve(arguments={...})`` (edited arguments) or ``Deny("why")`` (the model gets
        the reason as the call's error result). Calls that already ran never run again.

        ``tools`` defaults to the client's tools; ``tool_context`` adds to (and overrides)
        the defaults and the state's tool context.
        """
        return run_sync(
            self.aresume(
                state, decisions, tools=tools, tool_context=tool_context, advisors=advisors
            ),
            sync_name="ChatClient.resume()",
            async_name="client.aresume(...)",
        )

    async def aresume(
        self,
        state: RunState,
        decisions: Mapping[str, Decision],
        *,
        tools: Iterable[object] | object | None = None,
        tool_context: Mapping[str, Any] | None = None,
        advisors: Iterable[Advisor] = (),
    ) -> CallResponse:
        """Async form of :meth:`resume`."""
        prepared = self._prepare_resume(state, decisions, tools, tool_context, advisors)
        return CallResponse(await prepared.call(), prepared)

    def resume_stream(
        self,
        state: RunState,
        decisions: Mapping[str, Decision],
        *,
        tools: Iterable[object] | object | None = None,
        tool_context: Mapping[str, Any] | None = None,
        advisors: Iterable[Advisor] = (),
    ) -> StreamResponse:
        """:meth:`resume`, streaming the rest of the run."""
        return StreamResponse(self._prepare_resume(state, decisions, tools, tool_context, advisors))


class ChatClientRequestSpec:
    """One request, built step by step; every method returns the same spec.

    Messages are sent in this order: the system text (the request's, else the client's), then
    ``.messages(...)``, then the ``.user(...)`` text.
    """

    __slots__ = (
        "_advisors",
        "_client",
        "_context",
        "_messages",
        "_parameters",
        "_response_format",
        "_system",
        "_tool_context",
        "_tools",
        "_user",
    )

    def __init__(self, client: ChatClient) -> None:
        self._client = client
        self._system: str | None = client._system
        self._user: str | None = None
        self._messages: list[Message] = []
        self._tools: ToolSources = client._tools
        self._tool_context: dict[str, Any] | None = None
        self._context: dict[str, Any] | None = None
        self._advisors: tuple[Advisor, ...] = ()
        self._parameters: dict[str, Any] = {}
        self._response_format: Any = None

    def system(self, text: str) -> ChatClientRequestSpec:
        """The system text of this request (replaces the client's)."""
        self._system = _text(text, "system")
        return self

    def user(self, text: str) -> ChatClientRequestSpec:
        self._user = _text(text, "user")
        return self

    def messages(self, *messages: Message | Iterable[Message]) -> ChatClientRequestSpec:
        """Messages to send (e.g. earlier turns), after the system text and before the user
        text; messages or iterables of them."""
        for item in messages:
            for message in (item,) if isinstance(item, _MESSAGE_TYPES) else item:
                if not isinstance(message, _MESSAGE_TYPES):
                    raise TypeError(f"messages() takes Message objects, got {message!r:.100}")
                self._messages.append(message)
        return self

    def tools(self, *sources: object) -> ChatClientRequestSpec:
        """The tools of this request, replacing the client's default tools."""
        self._tools = ToolSources.of(sources)
        return self

    def add_tools(self, *sources: object) -> ChatClientRequestSpec:
        """More tools for this request, next to the client's (duplicate names raise)."""
        self._tools = self._tools.merged(ToolSources.of(sources))
        return self

    def tool_context(self, values: Mapping[str, Any]) -> ChatClientRequestSpec:
        """Tool-context entries; they override the client's entries with the same keys."""
        self._tool_context = {**(self._tool_context or {}), **values}
        return self

    def context(self, values: Mapping[str, Any]) -> ChatClientRequestSpec:
        """Request-context entries that advisors read (e.g. the conversation id under
        ``chat_memory_conversation_id``); they override the client's entries."""
        self._context = {**(self._context or {}), **values}
        return self

    def advisors(self, *advisors: Advisor) -> ChatClientRequestSpec:
        """Advisors for this request, in addition to the client's."""
        self._advisors += _checked_advisors(advisors)
        return self

    def options(
        self, options: ChatOptions | None = None, **parameters: Any
    ) -> ChatClientRequestSpec:
        """Model parameters for this request, as a ``ChatOptions`` and/or keywords
        (``.options(temperature=0.2)``); the ones set override the client's and those of
        earlier ``options()`` calls (``extra`` is merged key by key)."""
        given: dict[str, Any] = {}
        if options is not None:
            checked = _model_options(options, "options()")
            given = {
                f.name: getattr(checked, f.name)
                for f in dataclasses.fields(ChatOptions)
                if f.name not in ("tool_callbacks", "tool_context")
            }
        if parameters:
            _model_options(ChatOptions(**parameters), "options()")
            given.update(parameters)
        for name, value in given.items():
            if value is None:
                continue  # not set: an earlier call's value (or the client's) stays
            if name == "extra":
                value = {**self._parameters.get("extra", {}), **value}
            self._parameters[name] = value
        return self

    def response_format(self, target: Any) -> ChatClientRequestSpec:
        """Ask for the answer as JSON valid for ``target`` (a pydantic model, dataclass,
        TypedDict, ``list[...]``...): the system message gets the format instructions and
        ``entity()`` reads the answer as ``target``."""
        format_instructions(target)  # an unsupported type fails here, not after the call
        self._response_format = target
        return self

    def _prepared(self) -> PreparedRequest:
        client = self._client
        system = self._system
        messages: list[Message] = []
        if self._response_format is not None:
            instructions = format_instructions(self._response_format)
            system = instructions if system is None else f"{system}\n\n{instructions}"
        if system and system is client._system:
            messages.append(client._system_first(system))
        elif system:
            messages.append(SystemMessage(text=system))
        messages += self._messages
        if self._user is not None:
            messages.append(UserMessage(text=self._user))
        options = client._default_options
        if (
            options is None
            or self._tools is not client._tools
            or self._tool_context is not None
            or self._parameters
        ):
            tool_context = (
                client._tool_context
                if self._tool_context is None
                else client._tool_context.merged(self._tool_context)
            )
            options = _override(client._options, self._parameters).replace(
                tool_callbacks=self._tools.callbacks(), tool_context=tool_context
            )
        context = client._context if self._context is None else {**client._context, **self._context}
        return client._prepare(
            tuple(messages), options, context, self._advisors, self._response_format
        )

    def call(self) -> CallResponse:
        """Run the request (tool rounds included) and wait for the answer."""
        return run_sync(
            self.acall(), sync_name="ChatClientRequestSpec.call()", async_name="....acall()"
        )

    async def acall(self) -> CallResponse:
        prepared = self._prepared()
        return CallResponse(await prepared.call(), prepared)

    def stream(self) -> StreamResponse:
        """Stream the request: iterate the result for chunks, or ``.content()`` for text."""
        return StreamResponse(self._prepared())


def _text(text: str, what: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{what}() takes a str, got {type(text).__name__}")
    return text
