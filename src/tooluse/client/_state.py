"""``RunState``: a run paused for human approval, in a form that survives JSON and restarts."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, ClassVar

import pydantic

from tooluse._json_state import dump_state, load_state
from tooluse.calling import PendingToolCall
from tooluse.messages import ChatOptions, DeferredTools, Message, StoredMessage, Usage

__all__ = ["RunState"]

_MESSAGES: pydantic.TypeAdapter[tuple[Message, ...]] = pydantic.TypeAdapter(
    tuple[StoredMessage, ...], config=pydantic.ConfigDict(defer_build=True)
)
_MODEL_PARAMETERS = tuple(
    field.name
    for field in dataclasses.fields(ChatOptions)
    if field.name not in ("tool_callbacks", "tool_context")
)


def model_parameters(options: ChatOptions) -> dict[str, Any]:
    """The options of a request minus its tools and tool context (which are re-attached on
    resume), with only the parameters that are set, as values JSON holds."""
    parameters: dict[str, Any] = {}
    for name in _MODEL_PARAMETERS:
        value = getattr(options, name)
        if value is None or (name == "extra" and not value):
            continue
        if name == "stop":
            value = list(value)
        elif isinstance(value, DeferredTools):
            value = {"names": sorted(value.names), "loaders": sorted(value.loaders)}
        parameters[name] = value
    return parameters


def options_from_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``ChatOptions`` from :func:`model_parameters`' output."""
    unknown = sorted(set(parameters) - set(_MODEL_PARAMETERS))
    if unknown:
        raise ValueError(f"RunState options has unknown model parameters {unknown}")
    values = dict(parameters)
    if values.get("stop") is not None:
        values["stop"] = tuple(values["stop"])
    if values.get("deferred_tools") is not None:
        values["deferred_tools"] = _deferred_tools(values["deferred_tools"])
    return values


def _deferred_tools(value: object) -> DeferredTools:
    if (
        isinstance(value, Mapping)
        and value.keys() == {"names", "loaders"}
        and all(
            isinstance(names, list) and all(isinstance(name, str) for name in names)
            for names in value.values()
        )
    ):
        return DeferredTools(value["names"], value["loaders"])
    raise ValueError(
        "RunState options 'deferred_tools' must be an object with the lists 'names' and "
        f"'loaders' of tool names, got {value!r:.100}"
    )


_STATE_KEYS = frozenset(
    {
        "version",
        "messages",
        "history",
        "pending_tool_calls",
        "usage",
        "context",
        "tool_context",
        "options",
    }
)


@dataclasses.dataclass(frozen=True, slots=True)
class RunState:
    """Everything needed to continue a run whose tool calls wait for approval.

    - ``messages``: the request as the client built it (before any advisor);
    - ``history``: the tool loop's conversation up to the held round (its assistant message,
      then the responses of the calls that already ran);
    - ``pending_tool_calls``: the held calls;
    - ``usage``: the tokens used so far;
    - ``context`` / ``tool_context``: the request context and tool context the caller set;
    - ``options``: the model parameters of the request.

    Tools are not part of the state: ``ChatClient.resume`` re-attaches the client's default
    tools, or the ones passed to it. ``to_json`` / ``from_json`` round-trip the state; a value
    in ``context`` or ``tool_context`` that JSON cannot hold is an error naming its key (keep
    such values out with :meth:`without_tool_context` and pass them to ``resume`` again).
    """

    VERSION: ClassVar[int] = 1

    messages: tuple[Message, ...]
    history: tuple[Message, ...]
    pending_tool_calls: tuple[PendingToolCall, ...]
    usage: Usage | None = None
    context: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    tool_context: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def conversation_history(self) -> tuple[Message, ...]:
        """The same as :attr:`history` (the name tool-call assertions read)."""
        return self.history

    def without_tool_context(self, *keys: str) -> RunState:
        """This state with these tool-context keys left out (e.g. objects that JSON cannot
        hold, to be given again as ``resume(..., tool_context=...)``)."""
        missing = [key for key in keys if key not in self.tool_context]
        if missing:
            raise KeyError(f"The tool context has no keys {missing}")
        kept = {k: v for k, v in self.tool_context.items() if k not in keys}
        return dataclasses.replace(self, tool_context=kept)

    def to_json(self) -> str:
        data = {
            "version": self.VERSION,
            "messages": _MESSAGES.dump_python(self.messages, mode="json"),
            "history": _MESSAGES.dump_python(self.history, mode="json"),
            "pending_tool_calls": [call.to_dict() for call in self.pending_tool_calls],
            "usage": None if self.usage is None else self.usage.model_dump(),
            "context": _json_values("context", self.context),
            "tool_context": _json_values("tool_context", self.tool_context),
            "options": _json_values("options", self.options),
        }
        return dump_state(data)

    @classmethod
    def from_json(cls, text: str | bytes) -> RunState:
        """The state :meth:`to_json` wrote; ``ValueError`` saying what is wrong otherwise."""
        data = load_state(text, kind="RunState", version=cls.VERSION, keys=_STATE_KEYS)
        for key in ("context", "tool_context", "options"):
            if not isinstance(data[key], dict):
                raise ValueError(f"RunState JSON '{key}' must be an object")
        pending = data["pending_tool_calls"]
        if not isinstance(pending, list) or not pending:
            raise ValueError("RunState JSON 'pending_tool_calls' must be a non-empty list")
        if not all(isinstance(item, dict) for item in pending):
            raise ValueError("RunState JSON 'pending_tool_calls' must hold objects")
        try:
            messages = _MESSAGES.validate_python(data["messages"])
            history = _MESSAGES.validate_python(data["history"])
            usage = None if data["usage"] is None else Usage.model_validate(data["usage"])
        except pydantic.ValidationError as exc:
            raise ValueError(f"RunState JSON holds invalid messages or usage: {exc}") from exc
        options_from_parameters(data["options"])
        return cls(
            messages=messages,
            history=history,
            pending_tool_calls=tuple(PendingToolCall.from_dict(item) for item in pending),
            usage=usage,
            context=data["context"],
            tool_context=data["tool_context"],
            options=data["options"],
        )


def _json_values(field: str, values: Mapping[str, Any]) -> dict[str, Any]:
    checked: dict[str, Any] = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise TypeError(f"RunState.{field} keys must be strings for JSON, got {key!r}")
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            hint = (
                " Leave it out with state.without_tool_context(key) and pass it to "
                "resume(..., tool_context=...) again."
                if field == "tool_context"
                else ""
            )
            raise TypeError(
                f"RunState.{field}[{key!r}] holds a {type(value).__name__}, which JSON cannot "
                f"hold: {exc}.{hint}"
            ) from exc
        checked[key] = value
    return checked
