"""What a tool function takes and returns, read once from its signature, type hints and
docstring. Both the schema generator and the argument binder work from this."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Union

from pydantic.fields import FieldInfo

from tooluse.tools._context import ToolContext
from tooluse.tools._docstrings import parse_docstring
from tooluse.tools._fields import ArgumentField, read_argument_field
from tooluse.tools._param import find_tool_param

EMPTY = inspect.Parameter.empty


@dataclasses.dataclass(frozen=True, slots=True)
class ToolParameter:
    """One parameter the model fills in.

    ``annotation`` is the declared type (``Any`` when missing), ``Annotated`` metadata kept.
    ``argument_name`` is what the model sends it as: the parameter's name, or the alias of its
    pydantic ``Field``. ``default`` is the function's default, else the ``Field``'s
    (``EMPTY``: none); ``field`` is that ``Field`` when it names or defaults the argument.
    ``required`` follows SPEC: required unless it has a default, is ``Optional``/``| None``,
    or is marked ``ToolParam(required=False)``; ``ToolParam(required=True)`` forces it.
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


@dataclasses.dataclass(frozen=True, slots=True)
class ToolSignature:
    """Parameters for the model (in declaration order, without the ``ToolContext`` ones), the
    names of the ``ToolContext`` parameters (each gets the context), the leading
    positional-only parameter names (context included) that must be passed by position, and
    facts about the function."""

    parameters: tuple[ToolParameter, ...]
    context_parameters: tuple[str, ...]
    positional_only: tuple[str, ...]
    returns_none: bool
    is_async: bool
    description: str | None


def read_signature(function: Callable[..., Any], *, tool_name: str) -> ToolSignature:
    """Read ``function`` (a function, bound method, ``functools.partial`` or callable object).

    Raises ``ValueError`` for what cannot be a tool: ``*args``/``**kwargs``, async generators,
    type hints that do not resolve.
    """
    if inspect.isasyncgenfunction(function) or inspect.isasyncgenfunction(inspect.unwrap(function)):
        raise ValueError(f"Tool '{tool_name}': async generator functions cannot be tools")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"Tool '{tool_name}': cannot read the signature: {exc}") from exc
    hints = _type_hints(function, tool_name)
    docstring = parse_docstring(function)
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
        tool_param = _tool_param_of(annotation)
        description = (tool_param.description if tool_param else None) or (
            docstring.parameters.get(param.name)
        )
        where = f"Tool '{tool_name}', parameter '{param.name}'"
        argument = read_argument_field(annotation, parameter=param.name, where=where)
        default = _default(param, argument, where)
        parameters.append(
            ToolParameter(
                name=param.name,
                annotation=annotation,
                default=default,
                required=_is_required(annotation, param, tool_param, argument, where),
                description=description,
                argument_name=argument.argument_name if argument else param.name,
                field=argument.field if argument else None,
            )
        )
    _check_argument_names(parameters, tool_name)
    return ToolSignature(
        parameters=tuple(parameters),
        context_parameters=tuple(context_parameters),
        positional_only=tuple(positional_only),
        returns_none=hints.get("return", EMPTY) is type(None),
        is_async=is_async_callable(function),
        description=docstring.description,
    )


def is_async_callable(function: Callable[..., Any]) -> bool:
    """Coroutine functions, sync wrappers around them (``functools.wraps``), partials of them
    and objects whose ``__call__`` is one."""
    return (
        inspect.iscoroutinefunction(function)
        or inspect.iscoroutinefunction(inspect.unwrap(function))
        or inspect.iscoroutinefunction(type(function).__call__)
    )


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


def _strip_annotated(annotation: Any) -> Any:
    while typing.get_origin(annotation) is Annotated:
        annotation = annotation.__origin__
    return annotation


def _tool_param_of(annotation: Any) -> Any:
    if typing.get_origin(annotation) is Annotated:
        return find_tool_param(annotation.__metadata__)
    return None


def _union_members(annotation: Any) -> tuple[Any, ...]:
    base = _strip_annotated(annotation)
    if typing.get_origin(base) in (Union, types.UnionType):
        return typing.get_args(base)
    return (base,)


def _is_tool_context(annotation: Any) -> bool:
    members = [m for m in _union_members(annotation) if m is not type(None)]
    return bool(members) and all(
        isinstance(m, type) and issubclass(m, ToolContext) for m in members
    )


def accepts_none(annotation: Any) -> bool:
    """``Optional[X]``, ``X | None``, ``None`` (and ``Annotated`` forms of them)."""
    return any(m is type(None) for m in _union_members(annotation))


def _default(param: inspect.Parameter, argument: ArgumentField | None, where: str) -> Any:
    """The function's default, else the ``Field``'s value (``EMPTY`` for a factory: it makes a
    new value per call)."""
    if argument is None or not argument.has_default:
        return param.default
    if param.default is not EMPTY:
        # pydantic would quietly prefer one of them; a tool's schema and call must agree on it
        raise ValueError(
            f"{where}: has two defaults, {param.default!r} in the signature and one in its "
            "pydantic Field; keep one"
        )
    return argument.field.default if argument.field.default_factory is None else EMPTY


def _is_required(
    annotation: Any,
    param: inspect.Parameter,
    tool_param: Any,
    argument: ArgumentField | None,
    where: str,
) -> bool:
    has_field_default = argument is not None and argument.has_default
    if tool_param is not None and tool_param.required is not None:
        if tool_param.required and has_field_default:
            # validation would fill in the Field's default while the schema says required
            raise ValueError(
                f"{where}: ToolParam(required=True) but its pydantic Field gives a default; "
                "drop one"
            )
        return bool(tool_param.required)
    return param.default is EMPTY and not has_field_default and not accepts_none(annotation)


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
