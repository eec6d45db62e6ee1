"""``ToolSearchTool``: the meta-tool ``toolSearchTool`` the model calls to discover tools."""

from __future__ import annotations

from typing import Annotated, Final

from tooluse.search._types import ToolIndex, ToolSearchRequest, check_count
from tooluse.tools import FunctionToolCallback, ToolCallback, ToolContext, ToolParam

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
    else the index's default (10).
    """

    def __init__(
        self,
        tool_index: ToolIndex,
        *,
        max_results: int | None = None,
        description: str = DEFAULT_DESCRIPTION,
    ) -> None:
        check_count("max_results", max_results, optional=True)
        if not description.strip():
            raise ValueError("description must not be blank")
        self.tool_index = tool_index
        self.max_results = max_results
        self._callback = FunctionToolCallback(
            self.search, name=TOOL_SEARCH_TOOL_NAME, description=description
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
            int | None, ToolParam(description="How many tools to return (default 10).")
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
        request = ToolSearchRequest(
            str(session_id),
            query,
            max_results if max_results is not None else self.max_results,
            category_filter,
        )
        return self.tool_index.search(request).tool_names
