"""Parsing and validating the model's argument JSON, and binding it to a function call.

Each tool gets one parser, built once with its pydantic validator; the call path is one
``validate_json`` plus a dict walk. Every failure becomes a ``ToolExecutionException`` whose
message tells the model what to fix.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Annotated, Any, NotRequired, Required

from pydantic import (
    ConfigDict,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from typing_extensions import TypedDict

from tooluse.errors import ToolArgumentsError
from tooluse.tools._argument_errors import describe_missing_fields, describe_validation_error
from tooluse.tools._context import ToolContext
from tooluse.tools._definition import ToolDefinition
from tooluse.tools._signature import EMPTY, ToolParameter, ToolSignature, accepts_none

CallArguments = tuple[list[Any], dict[str, Any]]
EMPTY_CONTEXT = ToolContext()
# Lax validation ("3" -> 3) plus numbers accepted where text is expected (a zip code sent as
# 12345): models get these wrong often and the intent is unambiguous.
_LENIENT = ConfigDict(extra="forbid", coerce_numbers_to_str=True)
_make_typed_dict: Any = TypedDict  # called with a computed field mapping
# newer pydantic versions can forbid extra fields at validation time, in nested models too
_RUNTIME_EXTRA = "extra" in inspect.signature(TypeAdapter.validate_json).parameters
_NULL = object()  # an optional argument sent as null: "use the default"


def _null_to_marker(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    return _NULL if value is None else handler(value)


_NULL_MEANS_DEFAULT = WrapValidator(_null_to_marker)


def normalise_arguments(arguments: str | None) -> str:
    """Empty, blank or ``null`` arguments mean no arguments: ``{}``."""
    # (isspace stops at the first other character; only short text is stripped and compared)
    if (
        not arguments
        or arguments.isspace()
        or (len(arguments) < 32 and arguments.strip() == "null")
    ):
        return "{}"
    return arguments


class _Binder:
    """Puts validated values into ``(args, kwargs)`` for the function, adding the context."""

    def __init__(self, signature: ToolSignature) -> None:
        self._context_names = signature.context_parameters
        self._positional = signature.positional_only
        self._defaults = {p.name: p.default for p in signature.parameters if p.default is not EMPTY}

    def bind(self, values: dict[str, Any], context: ToolContext | None) -> CallArguments:
        for name in self._context_names:
            values[name] = context if context is not None else EMPTY_CONTEXT
        if not self._positional:
            return [], values
        args = [
            values.pop(name) if name in values else self._defaults.get(name)
            for name in self._positional
        ]
        return args, values


class SignatureArguments:
    """Arguments validated against the function's own parameters (the usual case)."""

    def __init__(self, signature: ToolSignature, *, tool_name: str) -> None:
        fields: dict[str, Any] = {}
        fill_with_none: list[str] = []
        null_means_default: list[ToolParameter] = []
        for param in signature.parameters:
            # The declared annotation: a pydantic Field in it names (alias) and defaults the
            # field as it does on a model, as the schema says.
            annotation = param.annotation
            if not param.required:
                if not param.has_default:
                    fill_with_none.append(param.name)
                elif not accepts_none(annotation):
                    # An optional parameter sent as null (OpenAI strict mode makes optional
                    # fields nullable) means "use the default". Marked by an outer validator,
                    # not by Optional[...]: a Field inside a union member would be ignored.
                    null_means_default.append(param)
                    annotation = Annotated[annotation, _NULL_MEANS_DEFAULT]
            fields[param.name] = Required[annotation] if param.required else NotRequired[annotation]
        arguments_type = _make_typed_dict(f"{tool_name}_arguments", fields)
        arguments_type.__pydantic_config__ = _LENIENT
        try:
            self._adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(arguments_type)
        except Exception as exc:  # pydantic schema errors name the offending type
            raise ValueError(f"Tool '{tool_name}': cannot validate its parameters: {exc}") from exc
        self._options = _forbid_extra(self._adapter)
        self._fill_with_none = tuple(fill_with_none)
        self._null_means_default = tuple(null_means_default)
        self._binder = _Binder(signature)

    def bind(
        self, arguments: str, context: ToolContext | None, definition: ToolDefinition
    ) -> CallArguments:
        try:
            values = self._adapter.validate_json(normalise_arguments(arguments), **self._options)
        except ValidationError as exc:
            raise _invalid(definition, exc, arguments) from exc
        for param in self._null_means_default:
            if values.get(param.name) is _NULL:
                _use_default(values, param)
        for name in self._fill_with_none:
            values.setdefault(name, None)
        return self._binder.bind(values, context)


class SingleInputArguments:
    """The whole argument object validated as one value passed to the function's single
    parameter: an ``input_type`` (model, dataclass, TypedDict) or, for a raw ``input_schema``,
    the parsed dict (its ``required`` fields checked)."""

    def __init__(
        self,
        signature: ToolSignature,
        *,
        tool_name: str,
        input_type: Any,
        required: tuple[str, ...] = (),
    ) -> None:
        if len(signature.parameters) != 1:
            names = ", ".join(p.name for p in signature.parameters) or "none"
            raise ValueError(
                f"Tool '{tool_name}': with input_type= or input_schema= the function must take "
                f"exactly one input parameter (plus an optional ToolContext); it takes: {names}"
            )
        self._adapter: TypeAdapter[Any] = TypeAdapter(input_type)
        self._options = _forbid_extra(self._adapter)
        self._required = required
        self._input_name = signature.parameters[0].name
        self._binder = _Binder(signature)

    def bind(
        self, arguments: str, context: ToolContext | None, definition: ToolDefinition
    ) -> CallArguments:
        try:
            value = self._adapter.validate_json(normalise_arguments(arguments), **self._options)
        except ValidationError as exc:
            raise _invalid(definition, exc, arguments) from exc
        if self._required:
            missing = [name for name in self._required if name not in value]
            if missing:
                raise ToolArgumentsError(
                    describe_missing_fields(definition.name, missing, definition.input_schema),
                    definition=definition,
                )
        return self._binder.bind({self._input_name: value}, context)


def _use_default(values: dict[str, Any], param: ToolParameter) -> None:
    if param.has_field_default and param.field is not None:
        # the function has no default of its own: validation's (a fresh one, as pydantic's)
        values[param.name] = param.field.get_default(call_default_factory=True)
    else:
        del values[param.name]  # the function's own default applies


def _forbid_extra(adapter: TypeAdapter[Any]) -> dict[str, Any]:
    """``validate_json`` options that reject unknown fields of nested pydantic models as the
    schema says (``additionalProperties: false``; a model ignores them by default, so a
    misspelt optional field would silently become its default). Not when a model in the type
    allows extra fields (its schema says so), nor on a pydantic that cannot."""
    if not _RUNTIME_EXTRA or _allows_extra(adapter.core_schema):
        return {}
    return {"extra": "forbid"}


def _allows_extra(core_schema: Any) -> bool:
    if isinstance(core_schema, Mapping):
        if "allow" in (core_schema.get("extra_behavior"), core_schema.get("extra_fields_behavior")):
            return True
        return any(_allows_extra(value) for value in core_schema.values())
    if isinstance(core_schema, list | tuple):
        return any(_allows_extra(value) for value in core_schema)
    return False


def _invalid(
    definition: ToolDefinition, error: ValidationError, arguments: str
) -> ToolArgumentsError:
    message = describe_validation_error(
        definition.name, error, definition.input_schema, normalise_arguments(arguments)
    )
    return ToolArgumentsError(message, definition=definition, cause=error)


def required_names(schema: Mapping[str, Any]) -> tuple[str, ...]:
    required = schema.get("required")
    if not isinstance(required, list):
        return ()
    return tuple(name for name in required if isinstance(name, str))
