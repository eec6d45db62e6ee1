"""``ToolSearchTool``: the meta-tool ``toolSearchTool`` the model calls to discover tools."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Final

from tooluse.search._types import (
    InlineSearchToolIndex,
    ToolIndex,
    ToolSearchRequest,
    check_count,
)
from tooluse.tools import (
    BaseToolCallback,
    FunctionToolCallback,
    ToolCallback,
    ToolContext,
    ToolDefinition,
    ToolMetadata,
    ToolParam,
    ToolResult,
)

if TYPE_CHECKING:
    from tooluse.search._cousage import ToolCoUsage

__all__ = ["SESSION_ID_CONTEXT_KEY", "TOOL_SEARCH_TOOL_NAME", "ToolSearchTool"]

TOOL_SEARCH_TOOL_NAME: Final = "toolSearchTool"
SESSION_ID_CONTEXT_KEY: Final = "toolSearchToolSessionId"
"""The tool-context key that names the index session to search."""

DEFAULT_DESCRIPTION: Final = (
    "Search the tool registry to discover tools you do not currently have. The query is "
    "matched against tool names, descriptions and parameters. Returns the names of the "
    "matching tools, best first; they become available to call in your next step."
)


class ToolSearchTool:
    """Searches a :class:`ToolIndex` for the model and returns the names found.

    The session is read from the tool context key ``toolSearchToolSessionId``. How many
    results: the model's ``max_results`` if it gives one, else this tool's ``max_results``,
    else the index's default (10), and never more than ``max_results_limit`` (the model's
    value is lowered to it: ``ToolSearchToolCallingAdvisor`` sets it to how many found tools
    it offers, so no name in a result is one the model cannot call). The ``max_results``
    parameter's description tells the model the default and the limit.

    The search runs in the tool thread pool (a vector index embeds the query), or on the event
    loop's thread when the index says the session's search has nothing to wait for
    (:class:`InlineSearchToolIndex`, e.g. :class:`BM25ToolIndex` once built).

    ``co_usage(context)`` (from the tool context) gives each search its request's
    ``co_usage`` (``ToolSearchToolCallingAdvisor`` makes it from its own ``co_usage``);
    ``None``: the index's own.
    """

    def __init__(
        self,
        tool_index: ToolIndex,
        *,
        max_results: int | None = None,
        max_results_limit: int | None = None,
        description: str = DEFAULT_DESCRIPTION,
        co_usage: Callable[[Mapping[str, Any]], ToolCoUsage | None] | None = None,
    ) -> None:
        check_count("max_results", max_results, optional=True)
        if co_usage is not None and not callable(co_usage):
            raise TypeError(
                "co_usage must be a function (tool context) -> ToolCoUsage | None, "
                f"got {type(co_usage).__name__}"
            )
        check_count("max_results_limit", max_results_limit, optional=True)
        if max_results and max_results_limit and max_results > max_results_limit:
            raise ValueError(
                f"max_results ({max_results}) must not exceed max_results_limit "
                f"({max_results_limit})"
            )
        if not description.strip():
            raise ValueError("description must not be blank")
        self.tool_index = tool_index
        self.max_results = max_results
        self.max_results_limit = max_results_limit
        self.co_usage = co_usage
        searching, inline = (
            FunctionToolCallback(
                self.search,
                name=TOOL_SEARCH_TOOL_NAME,
                description=description,
                read_only=True,
                inline=on_loop,
            )
            for on_loop in (False, True)
        )
        default = max_results or getattr(tool_index, "default_max_results", None)
        self._callback = _Described(
            searching,
            _max_results_text(default, max_results_limit),
            (inline, tool_index.searches_inline)
            if isinstance(tool_index, InlineSearchToolIndex)
            else None,
        )

    @property
    def callback(self) -> ToolCallback:
        """The tool to attach to a request."""
        return self._callback

    def search(
        self,
        query: Annotated[
            str,
            ToolParam(
                description="What the tool must do, in natural language; be specific and "
                "include keywords (service, object, action)."
            ),
        ],
        context: ToolContext,
        max_results: Annotated[
            int | None, ToolParam(description="How many tools to return.")
        ] = None,
        category_filter: Annotated[
            str | None, ToolParam(description="Only tools of this category.")
        ] = None,
    ) -> list[str]:
        session_id = context.get(SESSION_ID_CONTEXT_KEY)
        if session_id is None or not str(session_id).strip():
            raise ValueError(
                f"{TOOL_SEARCH_TOOL_NAME} needs the index session in the tool context key "
                f"{SESSION_ID_CONTEXT_KEY!r} (ToolSearchToolCallingAdvisor sets it)"
            )
        if max_results is not None and max_results < 1:
            raise ValueError(f"max_results must be at least 1, got {max_results}")
        count = max_results if max_results is not None else self.max_results
        limit = self.max_results_limit
        if count is not None and limit is not None:
            count = min(count, limit)
        request = ToolSearchRequest(
            str(session_id), query, count, category_filter, self.co_usage_for(context)
        )
        # Sliced too: with no count given, the index's own default may exceed the limit.
        return self.tool_index.search(request).tool_names[:limit]

    def co_usage_for(self, context: Mapping[str, Any]) -> ToolCoUsage | None:
        """The usage a search made with the tool context ``context`` lifts companions of."""
        return None if self.co_usage is None else self.co_usage(context)


def _max_results_text(default: int | None, limit: int | None) -> str:
    settings = [f"default {min(default, limit or default)}"] if default is not None else []
    if limit is not None:
        settings.append(f"at most {limit}")
    return "How many tools to return" + (f" ({', '.join(settings)})." if settings else ".")


class _Described(BaseToolCallback):
    """``toolSearchTool`` with the ``max_results`` description of its settings (the schema
    made from the signature is shared by every instance: copied, not changed); ``inline``:
    the same search declared inline, and the index's answer whether a session's search may
    run on the loop."""

    __slots__ = ("_definition", "_inline", "_searching")
    fixed_definition = True

    def __init__(
        self,
        searching: FunctionToolCallback,
        max_results_text: str,
        inline: tuple[FunctionToolCallback, Callable[[str], bool]] | None,
    ) -> None:
        schema = copy.deepcopy(searching.definition.input_schema)
        schema["properties"]["max_results"]["description"] = max_results_text
        self._searching = searching
        self._inline = inline
        self._definition = dataclasses.replace(searching.definition, input_schema=schema)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def metadata(self) -> ToolMetadata:
        return self._searching.metadata

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str | ToolResult:
        if self._inline is not None and context is not None:
            session_id = context.get(SESSION_ID_CONTEXT_KEY)
            inline, searches_inline = self._inline
            if session_id is not None and searches_inline(str(session_id)):
                return await inline.acall(arguments, context)
        return await self._searching.acall(arguments, context)
