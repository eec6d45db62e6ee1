"""The values tool search passes around and the ``ToolIndex`` protocol every index implements."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from tooluse.search._cousage import ToolCoUsage
    from tooluse.tools import ToolCallback

__all__ = [
    "ReplaceableToolIndex",
    "ToolIndex",
    "ToolReference",
    "ToolSearchRequest",
    "ToolSearchResponse",
    "check_count",
    "check_instance",
]


def check_count(name: str, value: object, *, minimum: int = 1, optional: bool = False) -> None:
    """Refuse a setting that is not an integer of at least ``minimum`` (``None`` too when
    ``optional``): ``2.5``, ``5.0``, ``True`` or ``"5"`` would otherwise fail later, on every
    request."""
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(
            f"{name} must be an integer of at least {minimum}{' or None' if optional else ''}, "
            f"got {value!r}"
        )


def check_instance(name: str, value: object, kind: type, what: str) -> None:
    """Refuse a setting that is not an instance of ``kind`` (``what``: "a ToolIndex"): a
    class passes a protocol's check, and either would fail only on the first request."""
    if isinstance(value, type):
        raise TypeError(
            f"{name} must be {what}; got the class {value.__name__}, not an instance "
            f"({value.__name__}())"
        )
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}")


@dataclasses.dataclass(frozen=True, slots=True)
class ToolReference:
    """A tool as an index sees it, and as a search returns it.

    ``summary`` is the tool's description. ``parameters`` is the tool's JSON Schema input (the
    advisor fills it); indexes search its property names and descriptions. ``category`` is
    optional and used by ``ToolSearchRequest.category_filter``. ``relevance_score`` is set on
    search results (higher is better; its scale depends on the index).
    """

    tool_name: str
    relevance_score: float | None = None
    summary: str = ""
    parameters: Mapping[str, Any] | None = None
    category: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tool_name, str) or not self.tool_name.strip():
            raise ValueError(f"tool_name must be a non-blank string, got {self.tool_name!r}")
        # Named: the advisor indexes thousands of tools and one bad one fails the request.
        if not isinstance(self.summary, str):
            raise TypeError(
                f"tool {self.tool_name!r}: summary must be a string, "
                f"got {type(self.summary).__name__}"
            )
        if self.parameters is not None and not isinstance(self.parameters, Mapping):
            raise TypeError(
                f"tool {self.tool_name!r}: parameters must be a JSON Schema mapping or None, "
                f"got {type(self.parameters).__name__}"
            )
        if self.category is not None and not isinstance(self.category, str):
            raise TypeError(
                f"tool {self.tool_name!r}: category must be a string or None, "
                f"got {type(self.category).__name__}"
            )

    @classmethod
    def from_callback(cls, callback: ToolCallback, category: str | None = None) -> ToolReference:
        """The reference an index needs for ``callback``: its name, description and input
        schema (what the search advisor indexes), under ``category``."""
        definition = callback.definition
        return cls(definition.name, None, definition.description, definition.input_schema, category)

    def scored(self, relevance_score: float) -> ToolReference:
        return dataclasses.replace(self, relevance_score=relevance_score)


@dataclasses.dataclass(frozen=True, slots=True)
class ToolSearchRequest:
    """One search in one session's index. ``max_results=None`` lets the index decide (10);
    ``category_filter`` keeps only tools whose ``category`` equals it (case-insensitive);
    ``co_usage``: the usage whose companions this search lifts instead of the index's own
    (:class:`~tooluse.search.ToolCoUsage`, e.g. the caller's tenant's; ``None``: the
    index's own, if any). An index that does not lift companions ignores it."""

    session_id: str
    query: str
    max_results: int | None = None
    category_filter: str | None = None
    co_usage: ToolCoUsage | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.session_id, str) or not self.session_id.strip():
            raise ValueError(f"session_id must be a non-blank string, got {self.session_id!r}")
        if not isinstance(self.query, str):
            raise TypeError(f"query must be a string, got {type(self.query).__name__}")
        if self.max_results is not None and (
            isinstance(self.max_results, bool)
            or not isinstance(self.max_results, int)
            or self.max_results < 1
        ):
            raise ValueError(f"max_results must be a positive integer, got {self.max_results!r}")
        if self.category_filter is not None and not isinstance(self.category_filter, str):
            raise TypeError(
                "category_filter must be a string or None, "
                f"got {type(self.category_filter).__name__}"
            )
        if self.co_usage is not None:
            from tooluse.search._cousage import ToolCoUsage  # it imports this module

            if not isinstance(self.co_usage, ToolCoUsage):
                raise TypeError(
                    f"co_usage must be a ToolCoUsage or None, got {type(self.co_usage).__name__}"
                )


@dataclasses.dataclass(frozen=True, slots=True)
class ToolSearchResponse:
    """The references found, best first. ``search_type`` names the index class."""

    tool_references: tuple[ToolReference, ...] = ()
    search_type: str | None = None
    search_time_ms: float | None = None

    @property
    def total_matches(self) -> int:
        """How many references were returned (after the limit), as in Spring AI."""
        return len(self.tool_references)

    @property
    def tool_names(self) -> list[str]:
        return [reference.tool_name for reference in self.tool_references]


@runtime_checkable
class ToolIndex(Protocol):
    """A searchable set of tools per session. Implementations are thread-safe; sessions never
    see each other's tools. Indexing a tool whose name is already in the session replaces it."""

    def index_tool(self, session_id: str, reference: ToolReference) -> None: ...

    def index_tools(self, session_id: str, references: Sequence[ToolReference]) -> None: ...

    def search(self, request: ToolSearchRequest) -> ToolSearchResponse: ...

    def clear_index(self, session_id: str) -> None: ...


@runtime_checkable
class InlineSearchToolIndex(ToolIndex, Protocol):
    """A :class:`ToolIndex` that says when a search of a session has nothing to wait for: pure
    CPU work of a fraction of a millisecond (no query to embed, nothing to build).
    :class:`ToolSearchTool` runs such a search on the event loop's thread instead of handing
    it to the tool thread pool, whose hand-off costs more than a BM25 search of thousands of
    tools. :class:`BM25ToolIndex` is one; the indexes that embed the query are not."""

    def searches_inline(self, session_id: str) -> bool: ...


@runtime_checkable
class ReplaceableToolIndex(ToolIndex, Protocol):
    """A :class:`ToolIndex` that can swap a session's tools for others in one step (the
    built-in indexes can); :class:`ToolSearchToolCallingAdvisor` re-indexes through it, so a
    search of the session running meanwhile never finds it empty."""

    def replace_tools(self, session_id: str, references: Sequence[ToolReference]) -> None: ...
