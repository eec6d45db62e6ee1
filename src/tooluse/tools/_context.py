"""``ToolContext``: data the application hands to tools that the model never sees."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any


class ToolContext(Mapping[str, Any]):
    """A read-only mapping injected into tool parameters annotated ``ToolContext``.

    Built as ``ToolContext({"user_id": "42"})``. It is copied on construction, so later changes
    to the source dict do not leak into a running tool, and it cannot be modified by a tool.
    Use :meth:`merged` to derive a new context with extra keys.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None, /) -> None:
        self._data: Mapping[str, Any] = MappingProxyType(dict(data or {}))

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"ToolContext({dict(self._data)!r})"

    def merged(self, other: Mapping[str, Any]) -> ToolContext:
        """A new context with ``other``'s keys overriding this one's."""
        return ToolContext({**self._data, **other})
