"""A per-function cache: what is derived from a function's signature (its schema, its
validator) is computed once per function, not once per request that attaches the tool."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

_T = TypeVar("_T")


class PerFunctionCache(Generic[_T]):
    """Values keyed by function identity, held weakly so closures made per request can go.

    Bound methods are keyed by their underlying function (the instance does not change the
    signature), separately from the function used on its own (then ``self`` is a parameter).
    Callables that cannot be weakly referenced or hashed are not cached.
    """

    def __init__(self) -> None:
        self._functions: weakref.WeakKeyDictionary[Any, _T] = weakref.WeakKeyDictionary()
        self._methods: weakref.WeakKeyDictionary[Any, _T] = weakref.WeakKeyDictionary()

    def get(self, function: Callable[..., Any], build: Callable[[], _T]) -> _T:
        if inspect.ismethod(function):
            table, key = self._methods, function.__func__
        else:
            table, key = self._functions, function
        if not _cacheable(key):
            return build()
        value = table.get(key)
        if value is None:
            value = build()
            table[key] = value
        return value


def _cacheable(key: object) -> bool:
    try:
        hash(key)
        weakref.ref(key)
    except TypeError:
        return False
    return True
