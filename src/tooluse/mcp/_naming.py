"""The names the model sees for MCP tools, unique across servers.

Strategies:

- ``"alt"`` (the default, Spring AI's ``DefaultMcpToolNamePrefixGenerator``): a tool keeps
  its own name unless another tool already has it; then it is ``alt_<n>_<name>``, ``n``
  counting up across the provider. Unlike Spring AI, a name once given is remembered per
  (server, tool), so a re-listing never swaps names between tools, and a name is never
  handed to a different tool later.
- ``"prefix"``: always ``<server>_<tool>``; two tools given one name that way (server ``a``
  with ``b_c``, server ``a_b`` with ``c``) are an error.
- ``"none"``: the server's names as they are; two tools with one name are an error.
- a function ``(server_name, tool) -> str``; duplicates are an error.

Names are not rewritten to a provider's character set here (Spring AI deletes characters it
does not like): the model adapters map unsafe names to aliases and back, and tool search
matches the real names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal, TypeAlias

from mcp.types import Tool

from tooluse._fork import ProcessLock

__all__ = ["NamingStrategy", "ToolNamer"]

logger = logging.getLogger("tooluse.mcp")

NamingStrategy: TypeAlias = Literal["alt", "prefix", "none"] | Callable[[str, Tool], str]
_STRATEGIES = ("alt", "prefix", "none")


class ToolNamer:
    """Gives each (server, tool) its name once and remembers it (thread-safe)."""

    def __init__(self, strategy: NamingStrategy = "alt") -> None:
        if not callable(strategy) and strategy not in _STRATEGIES:
            raise ValueError(
                f"naming must be one of {', '.join(_STRATEGIES)} or a function "
                f"(server_name, tool) -> str, got {strategy!r}"
            )
        self.strategy = strategy
        self._assigned: dict[tuple[str, str], str] = {}
        self._taken: set[str] = set()
        self._alternatives = 0
        self._lock = ProcessLock()

    @property
    def unique(self) -> bool:
        """Whether the strategy itself guarantees unique names. ``"prefix"`` does not: server
        ``a`` with tool ``b_c`` and server ``a_b`` with tool ``c`` are both ``a_b_c``."""
        return self.strategy == "alt"

    def name(self, server_name: str, tool: Tool) -> str:
        key = (server_name, tool.name)
        with self._lock:
            name = self._assigned.get(key)
            if name is None:
                name = self._new_name(server_name, tool)
                self._assigned[key] = name
                self._taken.add(name)
            return name

    def _new_name(self, server_name: str, tool: Tool) -> str:
        strategy = self.strategy
        if strategy == "prefix":
            return f"{server_name}_{tool.name}"
        if strategy == "none":
            return tool.name
        if callable(strategy):
            name = strategy(server_name, tool)
            if not isinstance(name, str) or not name.strip():
                raise ValueError(
                    f"The naming function gave {name!r} for tool '{tool.name}' of MCP server "
                    f"'{server_name}'; it must return a non-blank string"
                )
            return name
        name = tool.name
        while name in self._taken:
            self._alternatives += 1
            name = f"alt_{self._alternatives}_{tool.name}"
        if name != tool.name:
            logger.warning(
                "MCP tool '%s' of server '%s' is named '%s': another tool already has its name",
                tool.name,
                server_name,
                name,
            )
        return name
