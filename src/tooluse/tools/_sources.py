"""``tool_callbacks(*sources)``: one list of tools from functions, objects with ``@tool``
methods, callbacks, providers and iterables of those."""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from tooluse.tools._callback import ToolCallback, is_tool_callback, is_tool_callback_provider
from tooluse.tools._decorator import tool_options
from tooluse.tools._function import FunctionToolCallback
from tooluse.tools._function_schema import PerFunctionCache

_Found = list[tuple[ToolCallback, object]]  # each tool with the source it came from
# Callbacks of plain functions are immutable and depend only on the function and its @tool
# options: a request that attaches the same functions again gets the same callbacks.
_FUNCTION_CALLBACKS: PerFunctionCache[FunctionToolCallback] = PerFunctionCache()
# Names of the @tool methods of each class, found once per class.
_TOOL_METHOD_NAMES: weakref.WeakKeyDictionary[type, tuple[str, ...]] = weakref.WeakKeyDictionary()


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
    # Cheap checks first: runtime protocol checks cost microseconds each.
    if inspect.isfunction(source) or isinstance(source, functools.partial):
        function_callback = _FUNCTION_CALLBACKS.get(
            source, lambda: FunctionToolCallback(source), version=tool_options(source)
        )
        found.append((function_callback, source))
    elif inspect.ismethod(source):
        found.append((FunctionToolCallback(source), source))
    elif isinstance(source, FunctionToolCallback) or is_tool_callback(source):
        found.append((source, source))
    elif is_tool_callback_provider(source):
        for callback in source.tool_callbacks():
            if not is_tool_callback(callback):
                raise TypeError(
                    f"Tool provider {source!r} returned {callback!r}, which is not a ToolCallback"
                )
            found.append((callback, source))
    elif isinstance(source, type):
        raise ValueError(
            f"Got the class {source.__qualname__}; pass an instance of it (its @tool methods "
            "are collected from the instance)"
        )
    elif isinstance(source, str | bytes | Mapping):
        raise TypeError(f"Cannot make tools from a {type(source).__name__}: {source!r:.80}")
    elif methods := _tool_methods(source):
        found.extend((FunctionToolCallback(method), source) for method in methods)
    elif isinstance(source, Iterable):
        for item in source:
            _collect(item, found)
    else:
        raise ValueError(
            f"No @tool methods found in {source!r}. Did you mean to pass a function, a "
            "ToolCallback or a ToolCallbackProvider?"
        )


def _tool_methods(instance: object) -> list[Any]:
    cls = type(instance)
    names = _TOOL_METHOD_NAMES.get(cls)
    if names is None:
        names = _TOOL_METHOD_NAMES[cls] = _tool_method_names(cls)
    return [getattr(instance, name) for name in names]


def _tool_method_names(cls: type) -> tuple[str, ...]:
    # Walk the class hierarchy from the base classes down, so a subclass's override replaces
    # its base's method in place (and an override without @tool is no tool).
    attributes: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        attributes.update(vars(klass))
    return tuple(
        name
        for name, raw in attributes.items()
        if tool_options(raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw)
    )


def _describe_source(source: object) -> str:
    if isinstance(source, functools.partial):
        return _describe_source(source.func)
    if inspect.isfunction(source) or inspect.ismethod(source):
        return f"function {source.__module__}.{source.__qualname__}"
    if is_tool_callback(source):
        return f"{type(source).__name__} '{source.definition.name}'"
    if is_tool_callback_provider(source):
        return f"provider {type(source).__name__}"
    return f"{type(source).__name__} instance"


def _check_duplicates(found: _Found) -> None:
    names = [callback.definition.name for callback, _ in found]
    if len(set(names)) == len(names):
        return
    sources_by_name: dict[str, list[str]] = {}
    for name, (_, source) in zip(names, found, strict=True):
        sources_by_name.setdefault(name, []).append(_describe_source(source))
    duplicates = {name: srcs for name, srcs in sources_by_name.items() if len(srcs) > 1}
    details = "; ".join(f"'{name}' from {', '.join(srcs)}" for name, srcs in duplicates.items())
    raise ValueError(
        f"Multiple tools with the same name ({', '.join(duplicates)}) found in sources: {details}"
    )
