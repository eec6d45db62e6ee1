"""Measuring the router: families of questions, run N times each, and how often the expected
tools were called (seed 001 measured 0/3, 3/3 and 0/4 for one family on one day: measure,
don't guess)."""

from __future__ import annotations

import dataclasses
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from tooluse._sync import run_sync
from tooluse.qa._events import (
    ApprovalRequiredEvent,
    DoneEvent,
    Route,
    ToolCallEvent,
    ToolResultEvent,
)
from tooluse.qa._pipeline import QaPipeline
from tooluse.search import TOOL_SEARCH_TOOL_NAME

__all__ = ["EvalRun", "FamilyReport", "QuestionFamily", "TrajectoryStep", "aevaluate", "evaluate"]


@dataclasses.dataclass(frozen=True, slots=True)
class QuestionFamily:
    """Questions asked in different words that should call the same tools:
    ``expected_tools`` (all of them, in any order), or none for a knowledge question. Calls of
    ``toolSearchTool`` (tool search) count only when it is expected: it fetches no data."""

    name: str
    questions: tuple[str, ...]
    expected_tools: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "family") -> QuestionFamily:
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: a family is an object, got {type(data).__name__}")
        unknown = sorted(set(data) - {"name", "questions", "expected_tools"})
        if unknown:
            raise ValueError(f"{where}: unknown keys {unknown}")
        name = data.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{where}: 'name' must be a non-blank string")
        questions = data.get("questions")
        if (
            not isinstance(questions, list)
            or not questions
            or not all(isinstance(q, str) and q.strip() for q in questions)
        ):
            raise ValueError(f"{where} {name!r}: 'questions' must be a non-empty list of texts")
        expected = data.get("expected_tools", [])
        if not isinstance(expected, list) or not all(isinstance(t, str) for t in expected):
            raise ValueError(f"{where} {name!r}: 'expected_tools' must be a list of tool names")
        return cls(name, tuple(questions), tuple(expected))


@dataclasses.dataclass(frozen=True, slots=True)
class TrajectoryStep:
    """One tool call of a run; ``is_error`` is ``None`` when it never ran (held for
    approval)."""

    name: str
    arguments: str
    is_error: bool | None


@dataclasses.dataclass(frozen=True, slots=True)
class EvalRun:
    """One question asked once: the tool calls in order, the route, whether it paused for
    approval, the error that ended it, and whether it called what the family expects."""

    family: str
    question: str
    attempt: int
    trajectory: tuple[TrajectoryStep, ...]
    route: Route | None
    paused: bool
    error: str | None
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class FamilyReport:
    family: QuestionFamily
    runs: tuple[EvalRun, ...]

    @property
    def passed(self) -> int:
        return sum(run.passed for run in self.runs)

    @property
    def rate(self) -> float:
        return self.passed / len(self.runs) if self.runs else 0.0


def _passed(family: QuestionFamily, called: Sequence[str]) -> bool:
    # Searching for tools (tool search) fetches no data: a knowledge question may search.
    called = [
        name
        for name in called
        if name != TOOL_SEARCH_TOOL_NAME or TOOL_SEARCH_TOOL_NAME in family.expected_tools
    ]
    if not family.expected_tools:
        return not called
    return set(family.expected_tools) <= set(called)


async def _run_once(
    pipeline: QaPipeline, family: QuestionFamily, question: str, attempt: int, conversation: str
) -> EvalRun:
    calls: list[ToolCallEvent] = []
    errors: list[bool | None] = []
    unanswered: dict[str, deque[int]] = {}  # per id: its calls without a result, in order
    route: Route | None = None
    paused = False
    error: str | None = None
    try:
        async for event in pipeline.stream(question, conversation_id=conversation):
            if isinstance(event, ToolCallEvent):
                # Ids may repeat (call_0 in every round): a result answers the oldest call
                # with its id still waiting, since results come in call order.
                unanswered.setdefault(event.id, deque()).append(len(calls))
                calls.append(event)
                errors.append(None)
            elif isinstance(event, ToolResultEvent):
                waiting = unanswered.get(event.id)
                if waiting:
                    errors[waiting.popleft()] = event.is_error
            elif isinstance(event, ApprovalRequiredEvent):
                paused = True  # the model chose the tool; the run is not resumed
            elif isinstance(event, DoneEvent):
                route = event.route
    except Exception as exc:  # one failed run is a result, not the end of the evaluation
        error = f"{type(exc).__name__}: {exc}"
    trajectory = tuple(
        TrajectoryStep(call.name, call.arguments, is_error)
        for call, is_error in zip(calls, errors, strict=True)
    )
    called = [step.name for step in trajectory]
    passed = error is None and _passed(family, called)
    return EvalRun(family.name, question, attempt, trajectory, route, paused, error, passed)


def evaluate(
    pipeline: QaPipeline,
    families: Sequence[QuestionFamily],
    *,
    runs: int = 3,
    same_conversation: bool = False,
) -> list[FamilyReport]:
    """Sync form of :func:`aevaluate` (not from inside a running event loop)."""
    return run_sync(
        aevaluate(pipeline, families, runs=runs, same_conversation=same_conversation),
        sync_name="evaluate()",
        async_name="aevaluate(...)",
    )


async def aevaluate(
    pipeline: QaPipeline,
    families: Sequence[QuestionFamily],
    *,
    runs: int = 3,
    same_conversation: bool = False,
) -> list[FamilyReport]:
    """Ask every question of every family ``runs`` times, one after the other.

    Each run has a new conversation, unless ``same_conversation``: then all runs of a family
    share one, so earlier answers sit in the history the router reads (the regression seed
    001 hit: "it was asked before" became a reason not to call the tool). The pipeline needs
    a memory; runs paused for approval count the held calls as called and are not resumed.
    """
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be a positive int, got {runs!r}")
    if pipeline.memory is None:
        # Every run would fail alike; a configuration error is not a result of the model.
        raise ValueError(
            "evaluate needs a QaPipeline with memory= (each run asks in a conversation of "
            "its own, or of its family with same_conversation=True)"
        )
    reports = []
    for family in families:
        shared = f"eval-{uuid.uuid4().hex}"
        results = []
        for attempt in range(1, runs + 1):
            for question in family.questions:
                conversation = shared if same_conversation else f"eval-{uuid.uuid4().hex}"
                results.append(await _run_once(pipeline, family, question, attempt, conversation))
        reports.append(FamilyReport(family, tuple(results)))
    return reports
