"""Function -> JSON Schema -> validator: a ``FunctionSchema``, built once per tool function.

``function_schema(function, tool_name=...)`` reads the signature, type hints and docstring
(a function, bound method, ``functools.partial`` or callable object) and keeps, in one object:

- the parameters the model fills in, in declaration order, and the ``ToolContext`` ones it
  never sees (each gets the call's context);
- the input schema (``tooluse.schema`` generates each parameter's type, SPEC section 2);
- the pydantic validator of the model's argument JSON, and how validated values become a call;
- the messages for invalid arguments, written for the model that has to fix them: which
  tool, which field, what was expected, what was received.

A tool described by its signature gets one ``FunctionSchema`` per function, cached (held
weakly), so a request that attaches the same tools again builds nothing. ``input_type=`` (a
model, dataclass or TypedDict) and ``input_schema=`` (raw JSON Schema) describe the input
instead of the signature; the function then takes that one value.

Parameter rules: required unless the parameter has a default (its own or its ``Field``'s), is
``Optional``/``| None`` or says ``ToolParam(required=False)``; ``ToolParam(required=True)``
forces it. A pydantic ``Field`` on a parameter (``Annotated[str, Field(alias="q")]``,
``days: int = Field(5)``) names and defaults the argument as on a model field: validation
applies it as pydantic does, and the schema shows the alias as the property's name and the
default as ``default``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import json
import types
import typing
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Generic, NotRequired, Required, TypeVar, Union

from pydantic import (
    AliasChoices,
    AliasPath,
    ConfigDict,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticUndefined
from typing_extensions import TypedDict

from tooluse.errors import ToolArgumentsError
from tooluse.schema import ensure_valid_input_schema, generate_for_type
from tooluse.schema._generate import Property, generate_for_object
from tooluse.tools._definition import ToolContext

if TYPE_CHECKING:
    from pydantic import GetJsonSchemaHandler
    from pydantic.json_schema import JsonSchemaValue
    from pydantic_core import CoreSchema

    from tooluse.tools._definition import ToolDefinition

EMPTY = inspect.Parameter.empty
CallArguments = tuple[list[Any], dict[str, Any]]
_EMPTY_CONTEXT = ToolContext()
_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True, slots=True)
class ToolParam:
    """Describes one tool parameter: ``city: Annotated[str, ToolParam(description="...")]``.

    ``required=None`` (the default) applies the usual rule: required unless the parameter has a
    default or is ``Optional``. ``True`` or ``False`` overrides that rule for the tool's top-level
    parameters. Inside pydantic models, dataclasses and TypedDicts only the description applies
    (their own field rules decide what is required).
    """

    description: str | None = None
    required: bool | None = None

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # Makes the description work on fields of models, dataclasses and TypedDicts too.
        schema: dict[str, Any] = handler(core_schema)
        if self.description:
            schema["description"] = self.description
        return schema


@dataclasses.dataclass(frozen=True, slots=True)
class ToolParameter:
    """One parameter the model fills in.

    ``annotation`` is the declared type (``Any`` when missing), ``Annotated`` metadata kept.
    ``argument_name`` is what the model sends it as: the parameter's name, or the alias of its
    pydantic ``Field``. ``default`` is the function's default, else the ``Field``'s
    (``EMPTY``: none); ``field`` is that ``Field`` when it names or defaults the argument.
    """

    name: str
    annotation: Any
    default: Any
    required: bool
    description: str | None
    argument_name: str
    field: FieldInfo | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not EMPTY or self.has_field_default

    @property
    def has_field_default(self) -> bool:
        """Whether the default comes from the ``Field`` (a value or a factory): validation
        fills it in, the function has none of its own."""
        return self.field is not None and not self.field.is_required()


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class FunctionSchema:
    """What a tool function takes, with its input schema and validator.

    ``parameters`` are the model's (without the ``ToolContext`` ones, named in
    ``context_parameters``); ``positional_only`` are the leading positional-only parameter
    names (context included) that must be passed by position. ``json_schema`` is shared by
    every tool of the function: treat it as read-only.
    """

    parameters: tuple[ToolParameter, ...]
    context_parameters: tuple[str, ...]
    positional_only: tuple[str, ...]
    returns_none: bool
    is_async: bool
    description: str | None
    json_schema: dict[str, Any]
    validator: _SignatureValidator | _InputValidator
    positional_defaults: Mapping[str, Any]

    def bind(
        self, arguments: str, context: ToolContext | None, definition: ToolDefinition
    ) -> CallArguments:
        """``(args, kwargs)`` for the function from the model's argument JSON, the context
        added; ``ToolArgumentsError`` (naming ``definition``) when they do not validate."""
        values = self.validator.validate(arguments, definition)
        for name in self.context_parameters:
            values[name] = context if context is not None else _EMPTY_CONTEXT
        if not self.positional_only:
            return [], values
        args = [
            values.pop(name) if name in values else self.positional_defaults.get(name)
            for name in self.positional_only
        ]
        return args, values


def function_schema(
    function: Callable[..., Any],
    *,
    tool_name: str,
    input_type: Any = None,
    input_schema: Mapping[str, Any] | str | None = None,
) -> FunctionSchema:
    """The ``FunctionSchema`` of ``function``; cached per function unless ``input_type`` or
    ``input_schema`` (at most one of them) describes the input. Raises ``ValueError`` for what
    cannot be a tool: ``*args``/``**kwargs``, async generators, type hints that do not
    resolve, a parameter type with no JSON schema."""
    if input_type is None and input_schema is None:
        return _SCHEMAS.get(function, lambda: _build(function, tool_name, None, None))
    return _build(function, tool_name, input_type, input_schema)


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


def _is_async_callable(function: Callable[..., Any]) -> bool:
    """Coroutine functions, sync wrappers around them (``functools.wraps``), partials of them
    and objects whose ``__call__`` is one."""
    return (
        inspect.iscoroutinefunction(function)
        or inspect.iscoroutinefunction(inspect.unwrap(function))
        or inspect.iscoroutinefunction(type(function).__call__)
    )


class PerFunctionCache(Generic[_T]):
    """Values keyed by function identity, held weakly so closures made per request can go.

    Bound methods are keyed by their underlying function (the instance does not change the
    signature), separately from the function used on its own (then ``self`` is a parameter).
    Callables that cannot be weakly referenced or hashed are not cached. ``version`` is what
    else the value was built from (compared by identity): a value built for another one is
    built again, e.g. a callback after its function was decorated again with other options.
    """

    def __init__(self) -> None:
        self._functions: weakref.WeakKeyDictionary[Any, tuple[object, _T]] = (
            weakref.WeakKeyDictionary()
        )
        self._methods: weakref.WeakKeyDictionary[Any, tuple[object, _T]] = (
            weakref.WeakKeyDictionary()
        )

    def get(
        self, function: Callable[..., Any], build: Callable[[], _T], version: object = None
    ) -> _T:
        if inspect.ismethod(function):
            table, key = self._methods, function.__func__
        else:
            table, key = self._functions, function
        if not _cacheable(key):
            return build()
        entry = table.get(key)
        if entry is not None and entry[0] is version:
            return entry[1]
        value = build()
        table[key] = (version, value)
        return value


def _cacheable(key: object) -> bool:
    try:
        hash(key)
        weakref.ref(key)
    except TypeError:
        return False
    return True


_SCHEMAS: PerFunctionCache[FunctionSchema] = PerFunctionCache()


# --- reading the function ------------------------------------------------------------------


def _build(
    function: Callable[..., Any],
    tool_name: str,
    input_type: Any,
    input_schema: Mapping[str, Any] | str | None,
) -> FunctionSchema:
    if inspect.isasyncgenfunction(function) or inspect.isasyncgenfunction(inspect.unwrap(function)):
        raise ValueError(f"Tool '{tool_name}': async generator functions cannot be tools")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"Tool '{tool_name}': cannot read the signature: {exc}") from exc
    hints = _type_hints(function, tool_name)
    description, documented = _docstring(function)
    bound = _partial_keywords(function)

    parameters: list[ToolParameter] = []
    context_parameters: list[str] = []
    positional_only: list[str] = []
    for param in signature.parameters.values():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ValueError(
                f"Tool '{tool_name}': parameter '{param.name}' is *args or **kwargs; tools "
                "need named parameters (or pass input_type= / input_schema=)"
            )
        if param.name in bound:
            continue  # fixed by a functools.partial: not the model's to see or to override
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional_only.append(param.name)
        annotation = hints.get(param.name, Any)
        if isinstance(param.default, FieldInfo):
            # pydantic's `x: int = Field(...)` spelling (validate_call, FastAPI): the Field says
            # what it says in `Annotated[int, Field(...)]`; it is not a value to pass
            annotation = Annotated[annotation, param.default]
            param = param.replace(default=EMPTY)
        if _is_tool_context(annotation):
            context_parameters.append(param.name)
            continue
        parameters.append(_parameter(param, annotation, documented, tool_name))
    _check_argument_names(parameters, tool_name)

    validator: _SignatureValidator | _InputValidator
    if input_type is not None or input_schema is not None:
        json_schema, validator = _single_input(parameters, tool_name, input_type, input_schema)
    else:
        json_schema = generate_for_object(_property(param, tool_name) for param in parameters)
        validator = _SignatureValidator(parameters, tool_name, _arguments_type_name(function))
    return FunctionSchema(
        parameters=tuple(parameters),
        context_parameters=tuple(context_parameters),
        positional_only=tuple(positional_only),
        returns_none=hints.get("return", EMPTY) is type(None),
        is_async=_is_async_callable(function),
        description=description,
        json_schema=json_schema,
        validator=validator,
        positional_defaults={p.name: p.default for p in parameters if p.default is not EMPTY},
    )


def _parameter(
    param: inspect.Parameter, annotation: Any, documented: Mapping[str, str], tool_name: str
) -> ToolParameter:
    tool_param = _tool_param_of(annotation)
    where = f"Tool '{tool_name}', parameter '{param.name}'"
    field = _argument_field(annotation)
    argument_name = _argument_name(field, param.name, where) if field else param.name
    has_field_default = field is not None and not field.is_required()
    if field is None or not has_field_default:
        default = param.default
    elif param.default is not EMPTY:
        # pydantic would quietly prefer one of them; a tool's schema and call must agree on it
        raise ValueError(
            f"{where}: has two defaults, {param.default!r} in the signature and one in its "
            "pydantic Field; keep one"
        )
    else:  # the Field's value (EMPTY for a factory: it makes a new value per call)
        default = field.default if field.default_factory is None else EMPTY
    if tool_param is not None and tool_param.required is not None:
        if tool_param.required and has_field_default:
            # validation would fill in the Field's default while the schema says required
            raise ValueError(
                f"{where}: ToolParam(required=True) but its pydantic Field gives a default; "
                "drop one"
            )
        required = bool(tool_param.required)
    else:
        required = not (
            param.default is not EMPTY or has_field_default or _accepts_none(annotation)
        )
    return ToolParameter(
        name=param.name,
        annotation=annotation,
        default=default,
        required=required,
        description=(tool_param.description if tool_param else None) or documented.get(param.name),
        argument_name=argument_name,
        field=field,
    )


def _docstring(function: Callable[..., Any]) -> tuple[str | None, dict[str, str]]:
    """The docstring's free text (without its parameter and returns sections) and each
    documented parameter's description, from Google, NumPy and Sphinx docstrings."""
    text = inspect.getdoc(function)
    if not text or text.isspace():
        return None, {}
    import docstring_parser  # when the first tool is described, not at `import tooluse`

    parsed = docstring_parser.parse(text)
    parameters = {
        param.arg_name: " ".join(param.description.split())  # continuation lines are layout
        for param in parsed.params
        if param.description and param.description.strip()
    }
    return (parsed.description or "").strip() or None, parameters


def _partial_keywords(function: Callable[..., Any]) -> frozenset[str]:
    """The parameter names bound by keyword in ``functools.partial`` layers (the signature of a
    partial still lists them, as keyword-only parameters with the bound value as default)."""
    names: set[str] = set()
    target: Any = function
    while isinstance(target, functools.partial):
        names.update(target.keywords)
        target = target.func
    return frozenset(names)


def _type_hints(function: Callable[..., Any], tool_name: str) -> dict[str, Any]:
    # partials and callable objects: read the hints of what actually runs.
    target: Any = function
    while isinstance(target, functools.partial):
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        target = type(target).__call__
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception as exc:  # NameError, TypeError, ... from evaluating annotations
        raise ValueError(
            f"Tool '{tool_name}': cannot resolve the type hints ({type(exc).__name__}: {exc}); "
            "define the types at module level or import them at run time"
        ) from exc


def _metadata(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) is Annotated:
        return tuple(annotation.__metadata__)
    return ()


def _tool_param_of(annotation: Any) -> ToolParam | None:
    """The last ``ToolParam`` among the ``Annotated`` metadata, if any."""
    return next((m for m in reversed(_metadata(annotation)) if isinstance(m, ToolParam)), None)


def _union_members(annotation: Any) -> tuple[Any, ...]:
    base = annotation
    while typing.get_origin(base) is Annotated:
        base = base.__origin__
    if typing.get_origin(base) in (Union, types.UnionType):
        return typing.get_args(base)
    return (base,)


def _is_tool_context(annotation: Any) -> bool:
    members = [m for m in _union_members(annotation) if m is not type(None)]
    return bool(members) and all(
        isinstance(m, type) and issubclass(m, ToolContext) for m in members
    )


def _accepts_none(annotation: Any) -> bool:
    """``Optional[X]``, ``X | None``, ``None`` (and ``Annotated`` forms of them)."""
    return any(m is type(None) for m in _union_members(annotation))


def _check_argument_names(parameters: list[ToolParameter], tool_name: str) -> None:
    """Two parameters sent under one name (an alias that is another's name) cannot both be
    filled in."""
    seen: dict[str, str] = {}
    for param in parameters:
        other = seen.setdefault(param.argument_name, param.name)
        if other != param.name:
            raise ValueError(
                f"Tool '{tool_name}': parameters '{other}' and '{param.name}' are both sent as "
                f"'{param.argument_name}'; give them different aliases"
            )


# --- a parameter's pydantic Field: the attributes of the argument, not of its type ---------

# (attribute, its value when not given): pydantic applies these to a field only
_ARGUMENT_ATTRIBUTES = (
    ("alias", None),
    ("validation_alias", None),
    ("serialization_alias", None),
    ("default", PydanticUndefined),
    ("default_factory", None),
)


def _argument_field(annotation: Any) -> FieldInfo | None:
    """The merged ``Field`` of ``annotation`` when its metadata names or defaults the
    argument (``field.is_required()`` is false when it gives a default or a factory)."""
    if not any(_has_argument_attributes(item) for item in _metadata(annotation)):
        return None
    return FieldInfo.from_annotation(annotation)


def _without_argument_attributes(annotation: Any) -> Any:
    """``annotation`` with its ``Field`` metadata stripped of the argument attributes, for
    generating the type's schema, where pydantic ignores them (and warns); the rest of the
    ``Field``, e.g. ``ge`` or ``description``, stays."""
    metadata = _metadata(annotation)
    if not any(_has_argument_attributes(item) for item in metadata):
        return annotation
    stripped = tuple(_type_part(item) for item in metadata)
    return Annotated[(annotation.__origin__, *stripped)]


def _has_argument_attributes(item: Any) -> bool:
    return isinstance(item, FieldInfo) and any(
        getattr(item, name) is not unset for name, unset in _ARGUMENT_ATTRIBUTES
    )


def _type_part(item: Any) -> Any:
    if not _has_argument_attributes(item):
        return item
    # a copy: the user's Field stays as it is (outside a field only its attributes are read)
    part = copy.copy(item)
    for name, unset in _ARGUMENT_ATTRIBUTES:
        setattr(part, name, unset)
    return part


def _argument_name(field: FieldInfo, parameter: str, where: str) -> str:
    """The name the model sends the argument under. Raises ``ValueError`` for an alias the
    schema cannot name (an ``AliasPath`` picks a value out of another argument)."""
    alias = field.validation_alias if field.validation_alias is not None else field.alias
    if alias is None or isinstance(alias, str):
        return alias or parameter
    # AliasChoices: validation accepts each choice; the schema names the first plain one, as
    # pydantic's own schema does
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
    for choice in choices:
        name = _plain_name(choice)
        if name is not None:
            return name
    raise ValueError(
        f"{where}: validation_alias={alias!r} reads the value from inside another argument, "
        "which the tool's schema cannot say; use a plain alias (a str)"
    )


def _plain_name(choice: str | AliasPath) -> str | None:
    if isinstance(choice, str):
        return choice
    path = choice.path
    return path[0] if len(path) == 1 and isinstance(path[0], str) else None


def _property(param: ToolParameter, tool_name: str) -> Property:
    return Property(
        name=param.argument_name,
        annotation=_without_argument_attributes(param.annotation),  # shown by name, default
        required=param.required,
        description=param.description,
        default=param.default,
        where=f"Tool '{tool_name}', parameter '{param.name}'",
    )


# --- validating the model's argument JSON ----------------------------------------------------

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


class _SignatureValidator:
    """The arguments validated against the function's own parameters (the usual case): one
    ``validate_json`` plus a dict walk."""

    __slots__ = ("_adapter", "_fill_with_none", "_null_means_default", "_options")

    def __init__(self, parameters: Sequence[ToolParameter], tool_name: str, type_name: str) -> None:
        fields: dict[str, Any] = {}
        fill_with_none: list[str] = []
        null_means_default: list[ToolParameter] = []
        for param in parameters:
            # The declared annotation: a pydantic Field in it names (alias) and defaults the
            # field as it does on a model, as the schema says.
            annotation = param.annotation
            if not param.required:
                if not param.has_default:
                    fill_with_none.append(param.name)
                elif not _accepts_none(annotation):
                    # An optional parameter sent as null (OpenAI strict mode makes optional
                    # fields nullable) means "use the default". Marked by an outer validator,
                    # not by Optional[...]: a Field inside a union member would be ignored.
                    null_means_default.append(param)
                    annotation = Annotated[annotation, _NULL_MEANS_DEFAULT]
            fields[param.name] = Required[annotation] if param.required else NotRequired[annotation]
        arguments_type = _make_typed_dict(type_name, fields)
        arguments_type.__pydantic_config__ = _LENIENT
        try:
            self._adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(arguments_type)
        except Exception as exc:  # pydantic schema errors name the offending type
            raise ValueError(f"Tool '{tool_name}': cannot validate its parameters: {exc}") from exc
        self._options = _forbid_extra(self._adapter)
        self._fill_with_none = tuple(fill_with_none)
        self._null_means_default = tuple(null_means_default)

    def validate(self, arguments: str, definition: ToolDefinition) -> dict[str, Any]:
        try:
            values = self._adapter.validate_json(normalise_arguments(arguments), **self._options)
        except ValidationError as exc:
            raise arguments_error(definition, exc, arguments) from exc
        for param in self._null_means_default:
            if values.get(param.name) is _NULL:
                _use_default(values, param)
        for name in self._fill_with_none:
            values.setdefault(name, None)
        return values


class _InputValidator:
    """The whole argument object validated as one value for the function's single
    parameter: an ``input_type`` (model, dataclass, TypedDict) or, for a raw ``input_schema``,
    the parsed dict (its ``required`` fields checked)."""

    __slots__ = ("_adapter", "_input_name", "_options", "_required")

    def __init__(self, input_name: str, input_type: Any, required: tuple[str, ...]) -> None:
        self._adapter: TypeAdapter[Any] = TypeAdapter(input_type)
        self._options = _forbid_extra(self._adapter)
        self._required = required
        self._input_name = input_name

    def validate(self, arguments: str, definition: ToolDefinition) -> dict[str, Any]:
        try:
            value = self._adapter.validate_json(normalise_arguments(arguments), **self._options)
        except ValidationError as exc:
            raise arguments_error(definition, exc, arguments) from exc
        if self._required:
            missing = [name for name in self._required if name not in value]
            if missing:
                raise ToolArgumentsError(
                    describe_missing_fields(definition.name, missing, definition.input_schema),
                    definition=definition,
                )
        return {self._input_name: value}


def _arguments_type_name(function: Callable[..., Any]) -> str:
    """The validated arguments' type name (in pydantic's error titles): the function's, not
    the tool's, since one schema serves the function under every tool name."""
    target = function.func if isinstance(function, functools.partial) else function
    return f"{getattr(target, '__qualname__', type(target).__name__)}_arguments"


def _single_input(
    parameters: Sequence[ToolParameter],
    tool_name: str,
    input_type: Any,
    input_schema: Mapping[str, Any] | str | None,
) -> tuple[dict[str, Any], _InputValidator]:
    if input_type is not None:
        schema = generate_for_type(input_type)
        if schema.get("type") != "object":
            raise ValueError(
                f"Tool '{tool_name}': input_type must describe a JSON object (a pydantic model, "
                f"dataclass or TypedDict), got {input_type!r}"
            )
    else:
        assert input_schema is not None
        schema = _as_object_schema(input_schema, tool_name)
    if len(parameters) != 1:
        names = ", ".join(p.name for p in parameters) or "none"
        raise ValueError(
            f"Tool '{tool_name}': with input_type= or input_schema= the function must take "
            f"exactly one input parameter (plus an optional ToolContext); it takes: {names}"
        )
    if input_type is not None:
        return schema, _InputValidator(parameters[0].name, input_type, ())
    return schema, _InputValidator(parameters[0].name, dict[str, Any], _required_names(schema))


def _as_object_schema(schema: Mapping[str, Any] | str, tool_name: str) -> dict[str, Any]:
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise ValueError(f"Tool '{tool_name}': input_schema is not valid JSON: {exc}") from exc
    if not isinstance(schema, Mapping):
        raise ValueError(f"Tool '{tool_name}': input_schema must be a JSON object")
    repaired = ensure_valid_input_schema(schema)
    if repaired.get("type") != "object":
        raise ValueError(
            f"Tool '{tool_name}': input_schema must describe a JSON object, "
            f"got type {repaired.get('type')!r}"
        )
    return repaired


def _required_names(schema: Mapping[str, Any]) -> tuple[str, ...]:
    required = schema.get("required")
    if not isinstance(required, list):
        return ()
    return tuple(name for name in required if isinstance(name, str))


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


# --- messages for invalid arguments ----------------------------------------------------------

MAX_LISTED_ERRORS = 5
_PREVIEW_CHARS = 60
_SIGNATURE_CHARS = 400
_NOT_AN_OBJECT = frozenset(
    {"dict_type", "model_type", "typed_dict_type", "model_attributes_type", "dataclass_type"}
)
_NOT_PARSED = object()


def arguments_error(
    definition: ToolDefinition, error: ValidationError, arguments: str
) -> ToolArgumentsError:
    """The ``ToolArgumentsError`` for arguments of the tool ``definition`` that failed
    ``error``, its message written for the model."""
    message = describe_validation_error(
        definition.name, error, definition.input_schema, normalise_arguments(arguments)
    )
    return ToolArgumentsError(message, definition=definition, cause=error)


def describe_validation_error(
    tool_name: str,
    error: ValidationError,
    schema: Mapping[str, Any],
    arguments: str | None = None,
) -> str:
    """The model's message for ``error``; ``arguments`` (the JSON text that failed) tells
    the fields it sent from the union members pydantic names in an error's location."""
    details = error.errors(include_url=False)
    root = [d for d in details if not d["loc"]]
    if root:
        return f"Invalid arguments for tool '{tool_name}': {_describe_root(root[0], schema)}"
    received = _parsed(arguments)
    lines = [_describe_field(d, schema, received) for d in details[:MAX_LISTED_ERRORS]]
    if len(details) > MAX_LISTED_ERRORS:
        lines.append(f"- and {len(details) - MAX_LISTED_ERRORS} more problems")
    return "\n".join(
        [
            f"Invalid arguments for tool '{tool_name}':",
            *lines,
            f"Expected arguments: {signature_hint(schema)}",
        ]
    )


def describe_missing_fields(
    tool_name: str, missing: Sequence[str], schema: Mapping[str, Any]
) -> str:
    properties = schema.get("properties") or {}
    lines = [
        f"- '{name}': required but missing (expected {type_hint(properties.get(name))})"
        for name in missing
    ]
    return "\n".join(
        [
            f"Invalid arguments for tool '{tool_name}':",
            *lines,
            f"Expected arguments: {signature_hint(schema)}",
        ]
    )


def signature_hint(schema: Mapping[str, Any]) -> str:
    """``{city: string, days?: integer}`` from an object schema: the shape the model should
    send (``?`` marks optional fields). Cut short for tools with many parameters."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return "a JSON object"
    required = set(schema.get("required") or ())
    parts = [
        f"{name}{'' if name in required else '?'}: {type_hint(sub)}"
        for name, sub in properties.items()
    ]
    text = "{" + ", ".join(parts) + "}"
    return text if len(text) <= _SIGNATURE_CHARS else text[: _SIGNATURE_CHARS - 2] + "…}"


def type_hint(schema: Any) -> str:
    """A short type description of a property schema: ``string``, ``integer | null``,
    ``one of "a", "b"``, ``Address``, ``any``."""
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        values = ", ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"][:8])
        return f"one of {values}" + (", …" if len(schema["enum"]) > 8 else "")
    json_type = schema.get("type")
    if isinstance(json_type, str):
        if json_type == "array" and isinstance(schema.get("items"), Mapping):
            return f"array of {type_hint(schema['items'])}"
        return json_type
    if isinstance(json_type, list):
        return " | ".join(str(t) for t in json_type)
    for combinator in ("anyOf", "oneOf"):
        options = schema.get(combinator)
        if isinstance(options, list):
            return " | ".join(type_hint(option) for option in options)
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref.rsplit("/", 1)[-1]
    return "any"


def _describe_root(detail: ErrorDetails, schema: Mapping[str, Any]) -> str:
    expected = signature_hint(schema)
    kind = detail["type"]
    if kind == "json_invalid":
        reason = (detail.get("ctx") or {}).get("error", detail["msg"])
        return f"the arguments are not valid JSON ({reason}). Send one JSON object: {expected}"
    if kind == "string_unicode":
        return f"the arguments are not valid Unicode text. Send one JSON object: {expected}"
    if kind in _NOT_AN_OBJECT:
        got = _json_kind(detail["input"])
        return f"the arguments must be a JSON object, got {got}. Send: {expected}"
    return f"{detail['msg']}. Send one JSON object: {expected}"


def _describe_field(detail: ErrorDetails, schema: Mapping[str, Any], received: Any) -> str:
    kind = detail["type"]
    loc, members = _split_union_members(detail["loc"], kind, received)
    where = _location(loc) + (f" (as {', '.join(members)})" if members else "")
    properties = schema.get("properties") or {}
    top_level = len(loc) == 1 and isinstance(loc[0], str)
    if kind == "missing":
        expected = f" (expected {type_hint(properties.get(loc[0]))})" if top_level else ""
        return f"- {where}: required but missing{expected}"
    if kind == "extra_forbidden":
        if top_level:
            known = ", ".join(properties) or "none"
            return f"- {where}: not a parameter of this tool (parameters: {known})"
        return f"- {where}: unexpected field"
    return f"- {where}: {detail['msg']}; got {_preview(detail['input'])}"


def _parsed(arguments: str | None) -> Any:
    if arguments is None:
        return _NOT_PARSED
    try:
        return json.loads(arguments)
    except ValueError:  # e.g. a lone surrogate pydantic reported at a field
        return _NOT_PARSED


def _split_union_members(
    loc: tuple[int | str, ...], kind: str, received: Any
) -> tuple[tuple[int | str, ...], list[str]]:
    """``loc`` without the union members pydantic puts in it (``pet.Cat.name`` for
    ``pet: Cat | Dog``, ``a.int`` for ``a: int | str``), which read as fields the model
    should nest, and those members. A part is a member when the arguments have no such field
    there; only a missing field is absent itself."""
    if received is _NOT_PARSED:
        return loc, []
    path: list[int | str] = []
    members: list[str] = []
    value = received
    last = len(loc) - 1
    for position, part in enumerate(loc):
        if _holds(value, part):
            value = value[part]
        # (not the missing field itself, nor pydantic's mark of a dict key that failed)
        elif isinstance(part, str) and part != "[key]" and (kind, position) != ("missing", last):
            members.append(part)
            continue
        path.append(part)
    return tuple(path), members


def _holds(value: Any, part: int | str) -> bool:
    if isinstance(value, dict):
        return part in value
    return isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value)


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return f"'{text}'"


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, str):
        return "a JSON string"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, int | float):
        return "a JSON number"
    if value is None:
        return "null"
    return type(value).__name__


def _preview(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"
