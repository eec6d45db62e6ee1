"""``ToolCoUsage``: which tools past turns called together, to lift a found tool's companions.

A turn that needs ``startEngine`` also needs ``pressBrakePedal`` first, and no text of the turn
names it: only usage links them. Counted from the tool names each past turn called (the audit
log's records of a tenant, a conversation memory's tool calls), a companion that follows a
tool often enough is moved up behind it when a search ranks that tool near the top.
"""

from __future__ import annotations

import heapq
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeAlias

from tooluse.calling import Caller
from tooluse.messages import AssistantMessage, Message, UserMessage
from tooluse.search._tool import TOOL_SEARCH_TOOL_NAME
from tooluse.search._types import ToolReference, check_count

__all__ = ["CoUsageSetting", "ToolCoUsage", "co_usage_by_caller"]

_FORMAT: Final = 1  # of to_dict()
# What a turn counts at most: a turn that called 200 tools (a script, a runaway loop) would add
# 20,000 pairs, and tells little about which two belong together.
_MAX_TURN_TOOLS: Final = 32
# Audit-record outcomes of calls that gave a result (as the audit logs' ``recent_calls``
# reads them): a refused or held call was not made, and a failed one (or one whose result is
# an error) may be the model's wrong guess, not what the turn went on to use.
_GAVE_RESULT: Final = frozenset({"ran", "repeat"})
_Z: Final = 1.645  # the normal quantile of a one-sided 95% confidence bound
_SETTINGS: Final = (
    "min_support",
    "min_confidence",
    "anchors",
    "per_tool",
    "max_tools",
    "max_companions",
)


class ToolCoUsage:
    """Counts of the tools past turns called, and of each pair called in one turn.

    ``companions(tool)``: the tools called in at least ``min_support`` of the turns that called
    ``tool``, and in at least ``min_confidence`` of them (the conditional frequency
    P(companion | tool)), best first, at most ``per_tool``; or in fewer of them (2 at least)
    that agree so well that P's 95% lower confidence bound (Wilson's) reaches
    ``min_confidence`` (at the defaults: both of the tool's only 2 turns). One turn that
    happened to call two tools is no rule.

    An index given one (``co_usage=``) lifts, after ranking, each companion of the tools it
    ranked (its first ``anchors``; None: all of them) that the session can see (its
    catalogue, within the request's category) to just behind that tool, scored the tool's
    score x the conditional frequency, unless it already ranks above; the first tool stays
    first. A companion never moves above the tool that brought it, so a tool ranked 8th
    lifts its companions to 9th and 10th, not into the top 5.

    Memory is bounded: at most ``max_tools`` tools (beyond, the less called half is
    forgotten) and ``max_companions`` companions per tool (beyond, the half seen with it
    least); a turn counts its first 32 distinct tools. ``observe`` and searches may run in
    different threads. Picklable, and ``to_dict``/``from_dict`` give JSON.
    """

    __slots__ = (
        "_anchors",
        "_cache",
        "_counts",
        "_lock",
        "_max_companions",
        "_max_tools",
        "_min_confidence",
        "_min_support",
        "_pairs",
        "_per_tool",
        "_turns",
    )

    def __init__(
        self,
        turns: Iterable[Iterable[str]] = (),
        *,
        min_support: int = 3,
        min_confidence: float = 0.3,
        anchors: int | None = None,
        per_tool: int = 2,
        max_tools: int = 10_000,
        max_companions: int = 32,
    ) -> None:
        check_count("min_support", min_support)
        check_count("anchors", anchors, optional=True)
        check_count("per_tool", per_tool)
        check_count("max_tools", max_tools, minimum=2)
        check_count("max_companions", max_companions, minimum=2)
        if (
            isinstance(min_confidence, bool)
            or not isinstance(min_confidence, int | float)
            or not 0.0 < min_confidence <= 1.0
        ):
            raise ValueError(f"min_confidence must be in (0, 1], got {min_confidence!r}")
        self._min_support = min_support
        self._min_confidence = float(min_confidence)
        self._anchors = anchors
        self._per_tool = per_tool
        self._max_tools = max_tools
        self._max_companions = max_companions
        self._turns = 0
        self._counts: dict[str, int] = {}  # turns that called the tool
        self._pairs: dict[str, dict[str, int]] = {}  # tool -> companion -> turns with both
        self._cache: dict[str, tuple[tuple[str, float], ...]] = {}  # companions() by tool
        self._lock = threading.Lock()
        if isinstance(turns, str | bytes):
            raise TypeError("turns must be an iterable of turns (each an iterable of tool names)")
        for names in turns:
            self.observe(names)

    # -- learning ----------------------------------------------------------------------------

    def observe(self, names: Iterable[str]) -> None:
        """Count one turn that called the tools ``names`` (repeats count once)."""
        if isinstance(names, str | bytes):
            raise TypeError(
                f"names must be an iterable of tool names, not one string ({names!r}); "
                "pass [name] for a turn that called one tool"
            )
        called: dict[str, None] = {}
        for name in names:
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"a tool name must be a non-blank string, got {name!r}")
            called[name] = None
        tools = list(called)[:_MAX_TURN_TOOLS]
        with self._lock:
            self._turns += 1
            for tool in tools:
                self._counts[tool] = self._counts.get(tool, 0) + 1
                self._cache.pop(tool, None)
                if len(tools) > 1:
                    companions = self._pairs.setdefault(tool, {})
                    for other in tools:
                        if other != tool:
                            companions[other] = companions.get(other, 0) + 1
                    if len(companions) > self._max_companions:
                        self._pairs[tool] = _most(companions, self._max_companions // 2)
            if len(self._counts) > self._max_tools:
                self._forget(self._max_tools // 2)

    def _forget(self, keep: int) -> None:
        """Keep the ``keep`` most called tools (and their pairs among themselves)."""
        self._counts = _most(self._counts, keep)
        self._pairs = {
            tool: {other: n for other, n in companions.items() if other in self._counts}
            for tool, companions in self._pairs.items()
            if tool in self._counts
        }
        self._cache.clear()

    @classmethod
    def from_audit_records(
        cls,
        records: Iterable[Any],
        *,
        tenant: str | None = None,
        gap: float = 300.0,
        ignore: Iterable[str] = (TOOL_SEARCH_TOOL_NAME,),
        **settings: Any,
    ) -> ToolCoUsage:
        """Learned from audit records (:class:`~tooluse.calling.AuditRecord`, e.g. a
        ``SqliteAuditLog.query(tenant=...)``, in any order): a turn is a conversation's calls
        each at most ``gap`` seconds after the one before; a record without a conversation is
        a turn of its own. Only ``tenant``'s records when given (one tenant's usage is not
        another's to learn from); only calls that gave a result count (not those refused,
        held or failed, nor a result that is an error), and not the ``ignore`` tools (the
        search tool is called in every turn). ``settings``: those of the
        constructor."""
        skipped = frozenset(ignore)
        calls: list[tuple[float, str, str | None]] = []
        for record in records:
            for field in ("at", "tool", "outcome", "is_error", "tenant", "conversation"):
                if not hasattr(record, field):
                    raise TypeError(
                        f"expected audit records (AuditRecord), got {type(record).__name__} "
                        f"without {field!r}"
                    )
            if tenant is not None and record.tenant != tenant:
                continue
            if record.outcome not in _GAVE_RESULT or record.is_error or record.tool in skipped:
                continue
            calls.append((record.at, record.tool, record.conversation))
        return cls.from_calls(calls, gap=gap, **settings)

    @classmethod
    def from_calls(
        cls,
        calls: Iterable[tuple[float, str, str | None]],
        *,
        gap: float = 300.0,
        **settings: Any,
    ) -> ToolCoUsage:
        """Learned from calls made, each ``(at, tool, conversation)`` (e.g. an audit log's
        ``recent_calls``, in any order), made into turns as :meth:`from_audit_records`
        makes them. ``settings``: those of the constructor."""
        if not gap > 0:
            raise ValueError(f"gap must be > 0 seconds, got {gap!r}")
        by_conversation: dict[str | None, list[tuple[float, str]]] = {}
        for at, tool, conversation in calls:
            by_conversation.setdefault(conversation, []).append((at, tool))
        turns: list[list[str]] = []
        for conversation, made in by_conversation.items():
            made.sort()
            if conversation is None:
                turns.extend([tool] for _, tool in made)
                continue
            last = -math.inf
            for at, tool in made:
                if at - last > gap:
                    turns.append([])
                turns[-1].append(tool)
                last = at
        return cls(turns, **settings)

    @classmethod
    def from_conversations(
        cls,
        conversations: Iterable[Sequence[Message]],
        *,
        ignore: Iterable[str] = (TOOL_SEARCH_TOOL_NAME,),
        **settings: Any,
    ) -> ToolCoUsage:
        """Learned from conversations' messages (e.g. a ``ChatMemory``'s ``get(id)`` of each
        of a tenant's conversations, when it keeps the tool loop's messages): a turn is the
        tools the assistant messages after a user message called, up to the next user
        message. ``ignore`` and ``settings`` as for :meth:`from_audit_records`."""
        skipped = frozenset(ignore)
        turns: list[list[str]] = []
        for messages in conversations:
            if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
                raise TypeError(
                    "conversations must be an iterable of message lists, got "
                    f"{type(messages).__name__} for one"
                )
            turn: list[str] = []
            for message in messages:
                if isinstance(message, UserMessage):
                    turns.append(turn)
                    turn = []
                elif isinstance(message, AssistantMessage):
                    turn.extend(c.name for c in message.tool_calls if c.name not in skipped)
            turns.append(turn)
        return cls((turn for turn in turns if turn), **settings)

    # -- reading -----------------------------------------------------------------------------

    @property
    def turns(self) -> int:
        """How many turns were observed."""
        return self._turns

    def count(self, tool: str) -> int:
        """How many observed turns called ``tool``."""
        return self._counts.get(tool, 0)

    def companions(self, tool: str) -> tuple[tuple[str, float], ...]:
        """``(companion, P(companion | tool))`` of the companions that meet ``min_support``
        and ``min_confidence`` (or the confidence bound, above), most frequent first (ties
        by name), at most ``per_tool``."""
        cached = self._cache.get(tool)
        if cached is not None:
            return cached
        if tool not in self._pairs:
            # Not cached: every tool a search ranks is asked about, and the cache holds
            # the tools with pairs only (at most max_tools), not every name ever ranked.
            return ()
        with self._lock:
            total = self._counts.get(tool, 0)
            found = (
                sorted(
                    (
                        (other, n / total)
                        for other, n in self._pairs.get(tool, {}).items()
                        if self._is_companion(n, total)
                    ),
                    key=lambda pair: (-pair[1], pair[0]),
                )[: self._per_tool]
                if total
                else []
            )
            companions = tuple(found)
            self._cache[tool] = companions
        return companions

    def _is_companion(self, together: int, total: int) -> bool:
        """Whether a tool called in ``together`` of another's ``total`` turns is its companion."""
        if together >= self._min_support and together / total >= self._min_confidence:
            return True
        # A young log (a new tenant's) has few turns of each tool: two that agree suffice
        # when even P's pessimistic estimate clears the threshold.
        return together >= 2 and _lower_bound(together, total) >= self._min_confidence

    def lift(
        self,
        ranked: Sequence[tuple[int, float]],
        references: Sequence[ToolReference],
        positions: Callable[[], Mapping[str, int]],
        allowed: set[int] | None,
        limit: int,
    ) -> list[tuple[int, float]]:
        """``ranked`` (``(position, score)`` best first, positions into ``references``) with the
        companions of its first ``anchors`` tools (None: of every one) moved up behind them:
        only tools of ``positions()`` (the session's catalogue, name -> position) and
        ``allowed`` (the request's category; None: any), each once, at most ``limit``.
        ``positions`` is called only once a companion is found: a new session's search whose
        tools have none makes no map of its catalogue."""
        if not self._turns or not ranked:
            return list(ranked[:limit])
        by_name: Mapping[str, int] | None = None
        placed: dict[int, float] = {}
        anchors = len(ranked) if self._anchors is None else self._anchors
        paired = self._pairs  # a tool never called with another is passed over without a call
        for number, (position, score) in enumerate(ranked):
            if len(placed) >= limit:
                break
            placed.setdefault(position, score)
            tool = references[position].tool_name
            if number >= anchors or tool not in paired:
                continue
            for name, frequency in self.companions(tool):
                if by_name is None:
                    by_name = positions()
                companion = by_name.get(name)
                if companion is None or (allowed is not None and companion not in allowed):
                    continue  # not in this session's tools: never shown
                placed.setdefault(companion, score * frequency)
        return list(placed.items())[:limit]

    # -- keeping -----------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """The constructor's settings, by name."""
        return {name: getattr(self, f"_{name}") for name in _SETTINGS}

    def to_dict(self) -> dict[str, Any]:
        """The counts and settings as JSON-ready values (``from_dict`` reads them back)."""
        with self._lock:
            return {
                "format": _FORMAT,
                "settings": self.settings(),
                "turns": self._turns,
                "tools": dict(self._counts),
                "pairs": {tool: dict(companions) for tool, companions in self._pairs.items()},
            }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCoUsage:
        if not isinstance(data, Mapping) or data.get("format") != _FORMAT:
            raise ValueError(
                f"not a ToolCoUsage of format {_FORMAT}: expected a mapping with "
                f"'format': {_FORMAT}"
            )
        settings = data.get("settings")
        if not isinstance(settings, Mapping):
            raise ValueError("ToolCoUsage data: 'settings' must be a mapping")
        unknown = set(settings) - set(_SETTINGS)
        if unknown:
            raise ValueError(
                f"ToolCoUsage data: unknown settings {sorted(map(str, unknown))}; "
                f"the settings are {list(_SETTINGS)}"
            )
        usage = cls(**settings)
        turns, tools, pairs = data.get("turns"), data.get("tools"), data.get("pairs")
        if isinstance(turns, bool) or not isinstance(turns, int) or turns < 0:
            raise ValueError(f"ToolCoUsage data: 'turns' must be an integer >= 0, got {turns!r}")
        if not isinstance(tools, Mapping) or not isinstance(pairs, Mapping):
            raise ValueError("ToolCoUsage data: 'tools' and 'pairs' must be mappings")
        usage._counts = _counts("tools", tools)
        usage._pairs = {}
        for tool, companions in pairs.items():
            if tool not in usage._counts or not isinstance(companions, Mapping):
                raise ValueError(
                    f"ToolCoUsage data: pairs of {tool!r} must be a mapping, of a tool in 'tools'"
                )
            usage._pairs[tool] = _counts(f"pairs of {tool!r}", companions)
        usage._turns = turns
        return usage

    def __getstate__(self) -> dict[str, Any]:
        return self.to_dict()

    def __setstate__(self, state: dict[str, Any]) -> None:
        restored = ToolCoUsage.from_dict(state)
        for slot in ToolCoUsage.__slots__:
            object.__setattr__(self, slot, getattr(restored, slot))

    def __repr__(self) -> str:
        return f"ToolCoUsage({self._turns} turns, {len(self._counts)} tools)"


CoUsageSetting: TypeAlias = "ToolCoUsage | Callable[[Caller], ToolCoUsage | None]"
"""Which usage searches lift companions of: one for every search, or the caller's (from
the tool context: user and tenant as the application's authentication put them there)."""


def co_usage_by_caller(
    setting: CoUsageSetting | None, owner: str
) -> Callable[[Mapping[str, Any]], ToolCoUsage | None] | None:
    """``setting`` as a function of a search's tool context (``None``: none given); a
    ``TypeError`` naming ``owner`` for anything else, now or when the function returns
    something that is not a ``ToolCoUsage`` or ``None``."""
    if setting is None:
        return None
    if isinstance(setting, ToolCoUsage):
        usage = setting
        return lambda context: usage
    if isinstance(setting, type) or not callable(setting):
        raise TypeError(
            f"{owner}: co_usage must be a ToolCoUsage or a function (Caller) -> ToolCoUsage | "
            f"None, got {setting!r}"
        )
    choose = setting

    def of_caller(context: Mapping[str, Any]) -> ToolCoUsage | None:
        usage = choose(Caller.of(context))
        if usage is not None and not isinstance(usage, ToolCoUsage):
            raise TypeError(
                f"{owner}: the co_usage function {choose!r} returned "
                f"{type(usage).__name__}, not a ToolCoUsage or None"
            )
        return usage

    return of_caller


def _lower_bound(successes: int, trials: int) -> float:
    """Wilson's lower bound of a proportion, one-sided 95% (z = 1.645)."""
    z2 = _Z * _Z
    p = successes / trials
    centre = p + z2 / (2 * trials)
    spread = _Z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials))
    return (centre - spread) / (1 + z2 / trials)


def _most(counts: dict[str, int], keep: int) -> dict[str, int]:
    """The ``keep`` largest counts (ties by name)."""
    kept = heapq.nsmallest(keep, counts.items(), key=lambda item: (-item[1], item[0]))
    return dict(kept)


def _counts(what: str, values: Mapping[Any, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, n in values.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"ToolCoUsage data: {what}: a tool name must be a non-blank string")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(
                f"ToolCoUsage data: {what}: the count of {name!r} must be an integer >= 1, "
                f"got {n!r}"
            )
        counts[name] = n
    return counts
