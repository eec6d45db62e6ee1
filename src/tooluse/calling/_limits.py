"""Per-turn tool call limits (Spring AI's ``ToolCallLimits``) and the identical-call guard.

A turn is the conversation since the last user message. Every tool response in it counts
(error and limit responses too), so history replayed from earlier turns does not. The
identical-call guard counts the turn's calls of a tool with the same arguments (compared as
JSON values, so key order and spacing do not matter). Both are read from the turn's history,
so they hold across a run paused for approval and resumed in another process.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from tooluse.messages import AssistantMessage, Message, ToolCall, ToolResponseMessage, UserMessage
from tooluse.tools._function_schema import normalise_arguments

__all__ = ["LimitBreach", "ToolCallLimits", "TurnTally", "call_identity"]


@dataclasses.dataclass(frozen=True, slots=True)
class LimitBreach:
    """A call over a limit: ``tool_name`` is ``None`` for the total limit."""

    tool_name: str | None
    limit: int
    message: str


class ToolCallLimits:
    """Limit settings. ``None`` means unlimited; a tool in ``excluded`` has no limit of its own
    but still counts toward the total."""

    __slots__ = (
        "excluded",
        "max_calls_per_tool",
        "max_identical_calls",
        "max_total_tool_calls",
        "per_tool",
        "repeatable",
    )

    def __init__(
        self,
        *,
        max_calls_per_tool: int | None,
        max_total_tool_calls: int | None,
        per_tool_limits: Mapping[str, int] | None,
        excluded_from_limits: Iterable[str],
        max_identical_calls: int | None = None,
        repeatable_tools: Iterable[str] = (),
    ) -> None:
        _check_positive("max_calls_per_tool", max_calls_per_tool)
        _check_positive("max_total_tool_calls", max_total_tool_calls)
        _check_positive("max_identical_calls", max_identical_calls)
        per_tool = dict(per_tool_limits or {})
        for name, limit in per_tool.items():
            _check_positive(f"per_tool_limits[{name!r}]", limit)
        excluded = frozenset(_names(excluded_from_limits))
        both = sorted(excluded & per_tool.keys())
        if both:
            raise ValueError(
                f"Tools {both} are both excluded from limits and given a per-tool limit; choose one"
            )
        self.max_identical_calls = max_identical_calls
        self.repeatable = frozenset(_names(repeatable_tools))
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
        identical: Counter[tuple[str, str]] = Counter()
        guarded = self.max_identical_calls is not None
        for message in messages[start:]:
            if isinstance(message, ToolResponseMessage):
                per_tool.update(response.name for response in message.responses)
            elif guarded and isinstance(message, AssistantMessage):
                identical.update(call_identity(call) for call in message.tool_calls)
        return TurnTally(self, per_tool, identical)


class TurnTally:
    """Running counts for one round; :meth:`count` adds a call and reports a breach."""

    __slots__ = ("_identical", "_limits", "_per_tool", "_total")

    def __init__(
        self,
        limits: ToolCallLimits,
        per_tool: Counter[str],
        identical: Counter[tuple[str, str]],
    ) -> None:
        self._limits = limits
        self._per_tool = per_tool
        self._total = per_tool.total()
        self._identical = identical

    def seen(self, call: ToolCall) -> int:
        """Count ``call`` (a call answered before, in its place); how many such calls the
        turn has now."""
        if self._limits.max_identical_calls is None:
            return 0
        identity = call_identity(call)
        self._identical[identity] += 1
        return self._identical[identity]

    def repeat(self, call: ToolCall, *, read_only: bool) -> str | None:
        """Count ``call`` among the turn's calls with its tool and arguments; the message for
        the model when it is one more than the guard allows, else ``None``. Read-only tools
        are exempt: a screenshot or a status poll is meant to be repeated, and their loops
        are bounded by the per-tool limit."""
        limit = self._limits.max_identical_calls
        if limit is None or read_only or call.name in self._limits.repeatable:
            return None
        if self.seen(call) <= limit:
            return None
        return (
            f"Tool '{call.name}' was already called {limit} times in this turn with these same "
            "arguments, so it was not run again: use the results you have, or call it with "
            "other arguments."
        )

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


def call_identity(call: ToolCall) -> tuple[str, str]:
    """The tool and its arguments as a canonical JSON text (the raw text when not JSON)."""
    arguments = call.arguments
    if len(arguments) <= _CACHED_ARGUMENTS:
        return call.name, _cached_canonical(arguments)
    return call.name, _canonical(arguments)


def _canonical(arguments: str) -> str:
    arguments = normalise_arguments(arguments)
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except ValueError:  # the tool will refuse it; the same bad text is still the same call
        return arguments


# Each round counts the turn's earlier calls again (a turn of five rounds of three calls:
# 45 identities of 15 calls): those of short arguments, almost all, are parsed once. Long
# ones are not kept (4,096 texts of at most 1,000 characters: a few MB at most).
_CACHED_ARGUMENTS: Final = 1_000
_cached_canonical = functools.lru_cache(maxsize=4096)(_canonical)


def _names(names: Iterable[str]) -> Iterable[str]:
    return [names] if isinstance(names, str) else names


def _check_positive(what: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} must be a positive integer or None (unlimited), got {value!r}")
