"""``tool_callbacks(*sources)``: one list of tools from functions, objects with ``@tool``
methods, callbacks, providers and iterables of those."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from tooluse.tools._callback import ToolCallback, ToolCallbackProvider
from tooluse.tools._decorator import tool_options
from tooluse.tools._function import FunctionToolCallback

_Found = list[tuple[ToolCallback, str]]


def tool_callbacks(*sources: object) -> list[ToolCallback]:
    """Collect tools, in the order given:

    - a function, bound method or ``functools.partial`` (``@tool``-decorated or not) becomes
      a ``FunctionToolCallback``;
    - a ``ToolCallback`` is taken as is; a ``ToolCallbackProvider`` is asked for its tools now;
    - an object contributes its ``@tool`` methods (inherited ones too, base-class methods
      first); an object with none raises ``ValueError`` naming it;
    - lists, tuples, sets, generators ... are walked.

    Two tools with the same name raise ``ValueError`` naming the duplicates and their sources.
    """
    found: _Found = []
    for source in sources:
        _collect(source, found)
    _check_duplicates(found)
    return [callback for callback, _ in found]


def _collect(source: object, found: _Found) -> None:
    if isinstance(source, ToolCallback):
        found.append((source, f"{type(source).__name__} '{source.definition.name}'"))
    elif isinstance(source, ToolCallbackProvider):
        for callback in source.tool_callbacks():
            if not isinstance(callback, ToolCallback):
                raise TypeError(
                    f"Tool provider {source!r} returned {callback!r}, which is not a ToolCallback"
                )
            found.append((callback, f"provider {type(source).__name__}"))
    elif isinstance(source, type):
        raise ValueError(
            f"Got the class {source.__qualname__}; pass an instance of it (its @tool methods "
            "are collected from the instance)"
        )
    elif (
        inspect.isfunction(source)
        or inspect.ismethod(source)
        or (isinstance(source, functools.partial))
    ):
        found.append((FunctionToolCallback(source), _describe_function(source)))
    elif isinstance(source, str | bytes | Mapping):
        raise TypeError(f"Cannot make tools from a {type(source).__name__}: {source!r:.80}")
    elif methods := _tool_methods(source):
        where = f"{type(source).__name__} instance"
        found.extend((FunctionToolCallback(method), where) for method in methods)
    elif isinstance(source, Iterable):
        for item in source:
            _collect(item, found)
    else:
        raise ValueError(
            f"No @tool methods found in {source!r}. Did you mean to pass a function, a "
            "ToolCallback or a ToolCallbackProvider?"
        )


def _tool_methods(instance: object) -> list[Any]:
    # Walk the class hierarchy from the base classes down, so a subclass's override replaces
    # its base's method in place (and an override without @tool is no tool).
    attributes: dict[str, Any] = {}
    for cls in reversed(type(instance).__mro__):
        attributes.update(vars(cls))
    names = [
        name
        for name, raw in attributes.items()
        if tool_options(raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw)
    ]
    return [getattr(instance, name) for name in names]


def _describe_function(function: Any) -> str:
    target = function
    while isinstance(target, functools.partial):
        target = target.func
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", repr(target))
    return f"function {module}.{qualname}" if module else f"function {qualname}"


def _check_duplicates(found: _Found) -> None:
    sources_by_name: dict[str, list[str]] = {}
    for callback, source in found:
        sources_by_name.setdefault(callback.definition.name, []).append(source)
    duplicates = {name: srcs for name, srcs in sources_by_name.items() if len(srcs) > 1}
    if duplicates:
        details = "; ".join(f"'{name}' from {', '.join(srcs)}" for name, srcs in duplicates.items())
        raise ValueError(
            f"Multiple tools with the same name ({', '.join(duplicates)}) found in sources: "
            f"{details}"
        )
