"""Measuring tool-call reliability: labelled families of questions, asked N times each through
one or more pipelines, scored per run (seed 001 measured 0/3, 3/3 and 0/4 for one family on
one day: measure, don't guess).

Two pipelines are compared by ``tooluse eval``: :class:`PipelineTarget`, the two-stage
:class:`QaPipeline`, and :class:`SingleChain`, the seed's original chain (one ``ChatClient``
with memory, tools and RAG, retrieval inside the tool loop, a prompt that offers the
documents and the tools as equal sources)."""

from __future__ import annotations

import contextvars
import dataclasses
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Protocol

from tooluse._sync import run_sync
from tooluse.advisors import ToolCallingAdvisor
from tooluse.advisors._api import model_name
from tooluse.client import ChatClient
from tooluse.history import current_turn
from tooluse.memory import CONVERSATION_ID, ChatMemory, MessageChatMemoryAdvisor
from tooluse.messages import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    Prompt,
    ToolResponseMessage,
)
from tooluse.models import ChatModel
from tooluse.qa._eval_score import RunScore, Tally, TrajectoryStep, score_run, tally
from tooluse.qa._eval_set import Question, QuestionFamily
from tooluse.qa._events import (
    ApprovalRequiredEvent,
    DoneEvent,
    Route,
    ToolCallEvent,
    ToolResultEvent,
)
from tooluse.qa._pipeline import QaPipeline
from tooluse.rag import (
    ContextualQueryAugmenter,
    DocumentRetriever,
    QueryAugmenter,
    QueryTransformer,
    RetrievalAugmentationAdvisor,
)

__all__ = [
    "SINGLE_CHAIN_EMPTY_TEMPLATE",
    "SINGLE_CHAIN_SYSTEM",
    "SINGLE_CHAIN_TEMPLATE",
    "EvalRun",
    "EvalTarget",
    "FamilyReport",
    "PipelineTarget",
    "Reply",
    "SampledModel",
    "SingleChain",
    "Trajectory",
    "acompare",
    "aevaluate",
    "evaluate",
]

# The seed's original prompt (信息来源有【知识库资料】与【工具】两类，不是二选一 ...): the
# model may read it as "the documents have something, that is enough".
SINGLE_CHAIN_SYSTEM: Final = (
    "You answer the user's questions. Information comes from two sources: the knowledge-base "
    "documents given with the question, and the tools. It is not either-or: use the documents "
    "for what they contain, use a tool when one can handle the question, and when both are "
    "relevant use both and combine them into the most complete answer."
)
SINGLE_CHAIN_TEMPLATE: Final = """Knowledge-base documents (知识库资料):
---------------------
{context}
---------------------

Question: {query}"""
SINGLE_CHAIN_EMPTY_TEMPLATE: Final = """The knowledge base has nothing about this question.

Question: {query}"""
# Inside the tool loop (ToolCallingAdvisor is at +300), as Spring AI orders it by default:
# retrieval runs again every tool round.
_RAG_INSIDE_THE_LOOP: Final = ToolCallingAdvisor.DEFAULT_ORDER + 100

_RUN_NUMBER: contextvars.ContextVar[int] = contextvars.ContextVar("tooluse_eval_run", default=0)


class SampledModel:
    """``model`` with every request sent at ``temperature`` and, when ``seed`` is given,
    with the seed ``seed + n`` for the n-th question asked (``options.extra["seed"]``, which
    OpenAI-compatible servers such as llama.cpp and vLLM read): each run samples anew, and
    a run asked again with the same seed samples the same on an engine that honours it. The
    pipelines compared see the same seed for the same run."""

    def __init__(self, model: ChatModel, *, temperature: float | None, seed: int | None) -> None:
        if temperature is not None and not 0 <= temperature <= 2:
            raise ValueError(f"temperature must be between 0 and 2, got {temperature!r}")
        self._model = model
        self.temperature = temperature
        self.seed = seed

    @property
    def model(self) -> ChatModel:
        return self._model

    @property
    def model_name(self) -> str:
        return model_name(self._model)

    def _prompt(self, prompt: Prompt) -> Prompt:
        changes: dict[str, Any] = {}
        if self.temperature is not None:
            changes["temperature"] = self.temperature
        if self.seed is not None:
            changes["extra"] = {**prompt.options.extra, "seed": self.seed + _RUN_NUMBER.get()}
        return prompt.replace(options=prompt.options.replace(**changes)) if changes else prompt

    async def acall(self, prompt: Prompt) -> ChatResponse:
        return await self._model.acall(self._prompt(prompt))

    def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        return self._model.stream(self._prompt(prompt))


class Trajectory:
    """The tool calls of one run, in order, each with whether its result was an error
    (``None`` until a result comes: a call held for approval never gets one). Ids may repeat
    (``call_0`` in every round): a result answers the oldest call with its id still
    waiting, since results come in call order."""

    def __init__(self) -> None:
        self._steps: list[TrajectoryStep] = []
        self._waiting: dict[str, deque[int]] = {}

    def called(self, call_id: str, name: str, arguments: str) -> None:
        self._waiting.setdefault(call_id, deque()).append(len(self._steps))
        self._steps.append(TrajectoryStep(name, arguments, None))

    def answered(self, call_id: str, is_error: bool) -> None:
        waiting = self._waiting.get(call_id)
        if waiting:
            index = waiting.popleft()
            self._steps[index] = dataclasses.replace(self._steps[index], is_error=is_error)

    @property
    def steps(self) -> tuple[TrajectoryStep, ...]:
        return tuple(self._steps)


@dataclasses.dataclass(frozen=True, slots=True)
class Reply:
    """How a run ended: the answer's text (``""`` when paused), the route (the two-stage
    pipeline's; ``None`` otherwise) and whether it paused for approval."""

    answer: str
    route: Route | None = None
    paused: bool = False


class EvalTarget(Protocol):
    """A pipeline under measurement: asks ``question`` in the conversation
    ``conversation_id`` of its ``memory``, recording each tool call and result into
    ``trajectory`` as they happen (so a run that fails keeps the calls it made)."""

    @property
    def name(self) -> str: ...

    @property
    def memory(self) -> ChatMemory | None: ...

    async def ask(self, question: str, conversation_id: str, trajectory: Trajectory) -> Reply: ...


class PipelineTarget:
    """The two-stage :class:`QaPipeline` as an :class:`EvalTarget`."""

    def __init__(self, pipeline: QaPipeline, *, name: str = "two-stage") -> None:
        self.pipeline = pipeline
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def memory(self) -> ChatMemory | None:
        return self.pipeline.memory

    async def ask(self, question: str, conversation_id: str, trajectory: Trajectory) -> Reply:
        async for event in self.pipeline.stream(question, conversation_id=conversation_id):
            if isinstance(event, ToolCallEvent):
                trajectory.called(event.id, event.name, event.arguments)
            elif isinstance(event, ToolResultEvent):
                trajectory.answered(event.id, event.is_error)
            elif isinstance(event, ApprovalRequiredEvent):
                return Reply("", None, paused=True)  # the model chose the tool; not resumed
            elif isinstance(event, DoneEvent):
                return Reply(event.answer, event.route)
        raise RuntimeError("The QA run ended without an answer or a pause")


class SingleChain:
    """The seed's original chain as an :class:`EvalTarget`: one ``ChatClient`` with memory
    (outermost), the tool loop, and retrieval inside the loop (it runs again every tool
    round), under :data:`SINGLE_CHAIN_SYSTEM`, which offers the documents and the tools as
    equal sources. ``query_transformers`` rewrite the question for retrieval, as in the
    pipeline; ``tool_calling_advisor`` sets the loop's limits."""

    def __init__(
        self,
        model: ChatModel,
        *,
        retriever: DocumentRetriever,
        memory: ChatMemory,
        tools: Iterable[object] | object = (),
        query_transformers: Iterable[QueryTransformer] = (),
        system: str = SINGLE_CHAIN_SYSTEM,
        augmenter: QueryAugmenter | None = None,
        options: ChatOptions | None = None,
        tool_calling_advisor: ToolCallingAdvisor | None = None,
        name: str = "single chain",
    ) -> None:
        rag = RetrievalAugmentationAdvisor(
            retriever,
            query_transformers=query_transformers,
            augmenter=augmenter
            if augmenter is not None
            else ContextualQueryAugmenter(
                prompt_template=SINGLE_CHAIN_TEMPLATE,
                empty_context_template=SINGLE_CHAIN_EMPTY_TEMPLATE,
            ),
            order=_RAG_INSIDE_THE_LOOP,
        )
        self.client = ChatClient(
            model,
            system=system,
            tools=tools,
            advisors=[MessageChatMemoryAdvisor(memory), rag],
            options=options,
            tool_calling_advisor=tool_calling_advisor,
        )
        self._memory = memory
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def memory(self) -> ChatMemory:
        return self._memory

    async def ask(self, question: str, conversation_id: str, trajectory: Trajectory) -> Reply:
        spec = self.client.prompt().user(question).context({CONVERSATION_ID: conversation_id})
        response = await spec.acall()
        state = response.state
        for message in current_turn(state.history if state else response.conversation_history):
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls:
                    trajectory.called(call.id, call.name, call.arguments)
            elif isinstance(message, ToolResponseMessage):
                for result in message.responses:
                    trajectory.answered(result.id, result.is_error)
        if state is not None:
            return Reply("", None, paused=True)
        return Reply(response.chat_response().text)


@dataclasses.dataclass(frozen=True, slots=True)
class EvalRun:
    """One question asked once through one target: the tool calls in order, the route,
    whether it paused for approval, the error that ended it, the answer, how long it took,
    and its :class:`RunScore`. ``passed``: no error and every check of the score passed."""

    family: str
    question: str
    attempt: int
    trajectory: tuple[TrajectoryStep, ...]
    route: Route | None
    paused: bool
    error: str | None
    target: str
    answer: str
    latency_seconds: float
    score: RunScore
    no_call_due: bool

    @property
    def passed(self) -> bool:
        return self.error is None and self.score.passed

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "passed": self.passed}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalRun:
        """The run :meth:`to_dict` wrote (``KeyError`` / ``TypeError`` when it is not one)."""
        fields = {field.name for field in dataclasses.fields(cls)}
        values = {name: data[name] for name in fields}
        values["trajectory"] = tuple(TrajectoryStep(**step) for step in data["trajectory"])
        values["score"] = RunScore(**data["score"])
        return cls(**values)


@dataclasses.dataclass(frozen=True, slots=True)
class FamilyReport:
    """The runs of one family through one target."""

    family: QuestionFamily
    runs: tuple[EvalRun, ...]
    target: str = "two-stage"

    @property
    def passed(self) -> int:
        return sum(run.passed for run in self.runs)

    @property
    def rate(self) -> float:
        return self.passed / len(self.runs) if self.runs else 0.0

    @property
    def tally(self) -> Tally:
        return tally(self.runs)


async def _run_once(
    target: EvalTarget, family: QuestionFamily, question: Question, attempt: int, conversation: str
) -> EvalRun:
    trajectory = Trajectory()
    reply = Reply("")
    error: str | None = None
    started = time.perf_counter()
    try:
        reply = await target.ask(question.text, conversation, trajectory)
    except Exception as exc:  # one failed run is a result, not the end of the evaluation
        error = f"{type(exc).__name__}: {exc}"
    latency = time.perf_counter() - started
    steps = trajectory.steps
    return EvalRun(
        family=family.name,
        question=question.text,
        attempt=attempt,
        trajectory=steps,
        route=reply.route,
        paused=reply.paused,
        error=error,
        target=target.name,
        answer=reply.answer,
        latency_seconds=latency,
        score=score_run(family, question, steps, reply.answer),
        no_call_due=not family.expected_tools,
    )


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
    """:func:`acompare` with the one pipeline: a :class:`FamilyReport` per family."""
    return await acompare(
        [PipelineTarget(pipeline)], families, runs=runs, same_conversation=same_conversation
    )


async def acompare(
    targets: Sequence[EvalTarget],
    families: Sequence[QuestionFamily],
    *,
    runs: int = 3,
    same_conversation: bool = False,
    on_run: Callable[[EvalRun], object] | None = None,
) -> list[FamilyReport]:
    """Ask every question of every family ``runs`` times through every target, one run
    after the other: first each question once through each target, then each again, so
    that an evaluation stopped half way has as many runs of every question and target.
    ``on_run`` is called with each run as it ends. Returns a :class:`FamilyReport` per
    target and family, target by target.

    Each run has a new conversation, starting from the family's ``history``, unless
    ``same_conversation``: then all runs of a family share one (per target), so earlier
    answers sit in the history the router reads (the regression seed 001 hit: "it was asked
    before" became a reason not to call the tool). Every target needs a memory; runs paused
    for approval count the held calls as called and are not resumed. :class:`SampledModel`
    seeds the n-th question asked with ``seed + n``, the same for every target.
    """
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be a positive int, got {runs!r}")
    for target in targets:
        if target.memory is None:
            # Every run would fail alike; a configuration error is not a result of the model.
            raise ValueError(
                f"evaluate needs a QaPipeline with memory= ({target.name}: each run asks in a "
                "conversation of its own, or of its family with same_conversation=True)"
            )
    pairs = [(t, f) for t in range(len(targets)) for f in range(len(families))]
    shared = {pair: f"eval-{uuid.uuid4().hex}" for pair in pairs}
    started: set[str] = set()
    results: dict[tuple[int, int], list[EvalRun]] = {key: [] for key in shared}
    number = 0
    for attempt in range(1, runs + 1):
        for f, family in enumerate(families):
            for question in family.questions:
                number += 1
                for t, target in enumerate(targets):
                    conversation = shared[t, f] if same_conversation else f"eval-{uuid.uuid4().hex}"
                    memory = target.memory
                    assert memory is not None  # checked above
                    if family.history and conversation not in started:
                        await memory.aadd(conversation, list(family.history))
                    started.add(conversation)
                    token = _RUN_NUMBER.set(number)
                    try:
                        run = await _run_once(target, family, question, attempt, conversation)
                    finally:
                        _RUN_NUMBER.reset(token)
                    results[t, f].append(run)
                    if on_run is not None:
                        on_run(run)
    return [
        FamilyReport(family, tuple(results[t, f]), target.name)
        for t, target in enumerate(targets)
        for f, family in enumerate(families)
    ]
