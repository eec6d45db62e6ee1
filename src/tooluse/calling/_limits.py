"""Per-turn tool call limits (Spring AI's ``ToolCallLimits``).

A turn is the conversation since the last user message. Every tool response in it counts
(error and limit responses too), so history replayed from earlier turns does not.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from tooluse.messages import Message, ToolResponseMessage, UserMessage

__all__ = ["LimitBreach", "ToolCallLimits", "TurnTally"]


@dataclasses.dataclass(frozen=True, slots=True)
class LimitBreach:
    """A call over a limit: ``tool_name`` is ``None`` for the total limit."""

    tool_name: str | None
    limit: int
    message: str


class ToolCallLimits:
    """Limit settings. ``None`` means unlimited; a tool in ``excluded`` has no limit of its own
    but still counts toward the total."""

    __slots__ = ("excluded", "max_calls_per_tool", "max_total_tool_calls", "per_tool")

    def __init__(
        self,
        *,
        max_calls_per_tool: int | None,
        max_total_tool_calls: int | None,
        per_tool_limits: Mapping[str, int] | None,
        excluded_from_limits: Iterable[str],
    ) -> None:
        _check_positive("max_calls_per_tool", max_calls_per_tool)
        _check_positive("max_total_tool_calls", max_total_tool_calls)
        per_tool = dict(per_tool_limits or {})
        for name, limit in per_tool.items():
            _check_positive(f"per_tool_limits[{name!r}]", limit)
        excluded = frozenset(
            [excluded_from_limits]
            if isinstance(excluded_from_limits, str)
            else excluded_from_limits
        )
        both = sorted(excluded & per_tool.keys())
        if both:
            raise ValueError(
                f"Tools {both} are both excluded from limits and given a per-tool limit; choose one"
            )
        self.max_calls_per_tool = max_calls_per_tool
        self.max_total_tool_calls = max_total_tool_calls
        self.per_tool = per_tool
        self.excluded = excluded

    def limit_for(self, tool_name: str) -> int | None:
        if tool_name in self.excluded:
            return None
        return self.per_tool.get(tool_name, self.max_calls_per_tool)

    def tally(self, messages: Sequence[Message]) -> TurnTally:
        """Counts of the calls already answered in the current turn of ``messages``."""
        start = 0
        for index in range(len(messages) - 1, -1, -1):
            if isinstance(messages[index], UserMessage):
                start = index
                break
        per_tool: Counter[str] = Counter()
        for message in messages[start:]:
            if isinstance(message, ToolResponseMessage):
                per_tool.update(response.name for response in message.responses)
        return TurnTally(self, per_tool)


class TurnTally:
    """Running counts for one round; :meth:`count` adds a call and reports a breach."""

    __slots__ = ("_limits", "_per_tool", "_total")

    def __init__(self, limits: ToolCallLimits, per_tool: Counter[str]) -> None:
        self._limits = limits
        self._per_tool = per_tool
        self._total = per_tool.total()

    def count(self, tool_name: str) -> LimitBreach | None:
        """Count one call to ``tool_name``; the per-tool limit is checked before the total."""
        self._total += 1
        self._per_tool[tool_name] += 1
        limit = self._limits.limit_for(tool_name)
        if limit is not None and self._per_tool[tool_name] > limit:
            return LimitBreach(
                tool_name,
                limit,
                f"Tool call limit ({limit}) exceeded for tool '{tool_name}'. "
                "No further calls to this tool are allowed in this turn.",
            )
        total = self._limits.max_total_tool_calls
        if total is not None and self._total > total:
            return LimitBreach(
                None,
                total,
                f"Total tool call limit ({total}) exceeded for this turn. "
                "No further tool calls are allowed.",
            )
        return None


def _check_positive(what: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} must be a positive integer or None (unlimited), got {value!r}")
