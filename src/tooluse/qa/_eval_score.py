"""Scoring one run of ``tooluse eval`` against its labels, and summing runs up.

A run's *decision* is right when it called what its family expects (or nothing, for a family
that expects nothing); its *arguments* are right when the calls of each expected tool pass
the question's checks; a tool call whose result is an error fails the run; so does an answer
that claims a look-up the run never made (seed 001: "I checked the system" with no call)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from typing import Any, Final, Protocol

from tooluse.qa._eval_set import Question, QuestionFamily
from tooluse.search import TOOL_SEARCH_TOOL_NAME

__all__ = ["RunScore", "Tally", "TrajectoryStep", "claims_lookup", "score_run", "tally"]


@dataclasses.dataclass(frozen=True, slots=True)
class TrajectoryStep:
    """One tool call of a run; ``is_error`` is ``None`` when it never ran (held for
    approval)."""

    name: str
    arguments: str
    is_error: bool | None


_CLAIMS_EN: Final = re.compile(
    r"\b(?:i|we)(?:'ve| have| had| just| already)*\s+"
    r"(?:checked|looked\s+(?:it\s+)?up|queried|searched|verified|fetched|retrieved|consulted)\b"
    r"|\blet\s+me\s+(?:check|look\s+(?:it\s+)?up|query|search|verify|fetch)\b"
    r"|\b(?:after|upon)\s+(?:checking|looking\s+(?:it\s+)?up|querying|verifying)\b"
    r"|\baccording\s+to\s+(?:the\s+|our\s+|my\s+)?(?:system|records|database|"
    r"(?:latest|live|real-time|current)\s+data|search\s+results?|tools?)\b"
    r"|\b(?:the\s+|our\s+)?(?:system|database|records)\s+(?:shows?|indicates?|says)\b",
    re.IGNORECASE,
)
_FOR_YOU: Final = r"(?:为您|帮您|给您|替您|为你|帮你|给你)"
_CLAIMS_ZH: Final = re.compile(
    # 我查询了 / 我已为您核实: a subject, then at most an adverb and "for you", then the verb
    rf"(?:我|我们)(?:已经|已|刚刚|刚|这就)?{_FOR_YOU}?(?:查询|查了|查到|查看了|检索|核实|核查)"
    # 已为您查到, 帮您查了 (an offer, 可以帮您查询, is not a claim)
    rf"|已(?:经)?{_FOR_YOU}?(?:查询|查到|查明|核实|检索)"
    rf"|{_FOR_YOU}(?:查询到|查到|查了|查看了|找到了|检索到)"
    r"|经(?:过)?(?:查询|核实|检索|查看)|查询结果(?:显示|如下|为)"
    r"|根据(?:系统|查询结果|实时数据|最新数据|检索结果)|系统(?:显示|查询到|记录显示)"
)


def claims_lookup(text: str) -> bool:
    """Whether ``text`` says it queried, looked up or verified something, in English or
    Chinese ("I checked", "let me look it up", "according to the system", "我帮您查了",
    "经查询", "系统显示"); offers ("I can check that", "我可以帮您查询") are not claims."""
    return bool(_CLAIMS_EN.search(text) or _CLAIMS_ZH.search(text))


@dataclasses.dataclass(frozen=True, slots=True)
class RunScore:
    """What one run got right: the decision (the expected tools, or none), the arguments
    (``None``: the question checks none), a tool error result, a claimed look-up without a
    call, and how many calls repeated an earlier call of the run exactly."""

    decision_ok: bool
    arguments_ok: bool | None
    tool_error: bool
    claimed_lookup: bool
    repeated_calls: int

    @property
    def passed(self) -> bool:
        return (
            self.decision_ok
            and self.arguments_ok is not False
            and not self.tool_error
            and not self.claimed_lookup
        )


def _fetching(family: QuestionFamily, trajectory: Sequence[TrajectoryStep]) -> list[TrajectoryStep]:
    # Searching for tools (tool search) fetches no data: a knowledge question may search.
    return [
        step
        for step in trajectory
        if step.name != TOOL_SEARCH_TOOL_NAME or TOOL_SEARCH_TOOL_NAME in family.expected_tools
    ]


def _arguments(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return None


def _arguments_ok(question: Question, calls: Sequence[TrajectoryStep]) -> bool | None:
    if not question.arguments:
        return None
    for tool, checks in question.arguments.items():
        given = [_arguments(step.arguments) for step in calls if step.name == tool]
        if not any(
            isinstance(arguments, dict)
            and all(name in arguments and check(arguments[name]) for name, check in checks.items())
            for arguments in given
        ):
            return False
    return True


def _call_key(step: TrajectoryStep) -> tuple[str, str]:
    """A call as the same call however its JSON is written (spaces, key order)."""
    arguments = _arguments(step.arguments)
    canonical = step.arguments if arguments is None else json.dumps(arguments, sort_keys=True)
    return step.name, canonical


def score_run(
    family: QuestionFamily,
    question: Question,
    trajectory: Sequence[TrajectoryStep],
    answer: str,
) -> RunScore:
    """Score one run of ``question`` (of ``family``): its tool calls in order and the
    answer's text."""
    calls = _fetching(family, trajectory)
    called = {step.name for step in calls}
    if family.expected_tools:
        expected = set(family.expected_tools)
        decision_ok = expected <= called <= expected | set(family.allowed_tools)
        checked = _arguments_ok(question, calls)
        arguments_ok = checked if checked is None else checked and decision_ok
    else:
        decision_ok = not called
        arguments_ok = None
    seen: set[tuple[str, str]] = set()
    repeated = 0
    for step in calls:
        key = _call_key(step)
        repeated += key in seen
        seen.add(key)
    return RunScore(
        decision_ok=decision_ok,
        arguments_ok=arguments_ok,
        tool_error=any(step.is_error for step in calls),
        claimed_lookup=not calls and claims_lookup(answer),
        repeated_calls=repeated,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Tally:
    """Runs summed up: how many, how many decided right, how many of those whose arguments
    were checked had them right, of the runs due no call how many made none, claims of a
    look-up without a call, runs with a tool error result, runs that failed (an exception),
    calls repeating an earlier one, runs that passed everything, and the answer latencies
    in seconds (median and 90th percentile)."""

    runs: int
    decisions_ok: int
    arguments_checked: int
    arguments_ok: int
    no_call_due: int
    no_call_ok: int
    claims: int
    tool_errors: int
    errors: int
    repeated_calls: int
    passed: int
    latency_median: float | None
    latency_p90: float | None

    @property
    def decision_rate(self) -> float:
        return self.decisions_ok / self.runs if self.runs else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "decision_rate": self.decision_rate}


class _Scored(Protocol):
    """What :func:`tally` reads of a run (an ``EvalRun``)."""

    @property
    def score(self) -> RunScore: ...
    @property
    def error(self) -> str | None: ...
    @property
    def latency_seconds(self) -> float: ...
    @property
    def no_call_due(self) -> bool: ...


def tally(runs: Iterable[_Scored]) -> Tally:
    """Sum up ``runs`` (``EvalRun`` s)."""
    runs = list(runs)
    latencies = sorted(run.latency_seconds for run in runs)
    checked = [run for run in runs if run.score.arguments_ok is not None]
    due_none = [run for run in runs if run.no_call_due]
    return Tally(
        runs=len(runs),
        decisions_ok=sum(run.score.decision_ok and run.error is None for run in runs),
        arguments_checked=len(checked),
        arguments_ok=sum(bool(run.score.arguments_ok) and run.error is None for run in checked),
        no_call_due=len(due_none),
        no_call_ok=sum(run.score.decision_ok and run.error is None for run in due_none),
        claims=sum(run.score.claimed_lookup for run in runs),
        tool_errors=sum(run.score.tool_error for run in runs),
        errors=sum(run.error is not None for run in runs),
        repeated_calls=sum(run.score.repeated_calls for run in runs),
        passed=sum(run.score.passed and run.error is None for run in runs),
        latency_median=statistics.median(latencies) if latencies else None,
        # nearest rank: the smallest latency at least 90% of the runs do not exceed
        latency_p90=latencies[math.ceil(0.9 * len(latencies)) - 1] if latencies else None,
    )
