"""The two-stage router/answer QA pipeline (seed 001, SPEC section 10).

- :class:`QaPipeline` runs a router stage (tools only, each recording into the turn's
  :class:`FetchLedger`) and then an answer stage (RAG and memory, no tools), streaming the
  answer and the tool trace as :mod:`events <tooluse.qa._events>`.
- :class:`FetchGateRetriever` returns nothing, without retrieving, once tools fetched data;
  :class:`FetchGateQueryTransformer` then leaves the question as it is, without a model call.
- :class:`TwoSourceAugmenter` renders either the fetched data or the retrieved documents,
  the information block before the rules.
- :class:`LedgerToolCallback` / :func:`ledger_tool_callbacks` record each tool result.
- :class:`QaPause` is a run waiting for approval, storable as JSON; memory keeps its turn as
  text (:data:`PAUSED_TURN_NOTE`) until it is resumed, which it can be only while it is its
  conversation's last turn (:class:`StalePauseError`).
- :func:`acompare` asks labelled :class:`QuestionFamily` questions N times through
  pipelines (:class:`PipelineTarget`, :class:`SingleChain`: the seed's original chain) and
  scores each run (:func:`score_run`: decision, arguments, tool errors, claimed look-ups,
  latency); :func:`report_markdown` / :func:`report_json` sum them up (``tooluse eval``);
  :func:`evaluate` (:func:`aevaluate`) measures one pipeline.
"""

from tooluse.qa._augmenter import (
    DATA_TEMPLATE,
    DOCUMENTS_TEMPLATE,
    EMPTY_TEMPLATE,
    TwoSourceAugmenter,
    format_documents,
    format_records,
)
from tooluse.qa._callbacks import (
    LedgerToolCallback,
    LedgerToolCallbackProvider,
    ledger_tool_callbacks,
)
from tooluse.qa._eval import (
    SINGLE_CHAIN_EMPTY_TEMPLATE,
    SINGLE_CHAIN_SYSTEM,
    SINGLE_CHAIN_TEMPLATE,
    EvalRun,
    EvalTarget,
    FamilyReport,
    PipelineTarget,
    Reply,
    SampledModel,
    SingleChain,
    Trajectory,
    acompare,
    aevaluate,
    evaluate,
)
from tooluse.qa._eval_report import report_json, report_markdown, reports_from_json
from tooluse.qa._eval_score import RunScore, Tally, TrajectoryStep, claims_lookup, score_run, tally
from tooluse.qa._eval_set import ArgumentCheck, Question, QuestionFamily, normalised
from tooluse.qa._events import (
    ApprovalRequiredEvent,
    DeltaEvent,
    DoneEvent,
    QaEvent,
    Route,
    RouteEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from tooluse.qa._gate import FetchGateQueryTransformer, FetchGateRetriever
from tooluse.qa._ledger import LEDGER_KEY, FetchLedger, FetchRecord
from tooluse.qa._pause import QaPause, StalePauseError
from tooluse.qa._paused_turn import PAUSED_TURN_NOTE, RESUMING_TURN_NOTE, STOPPED_TURN_NOTE
from tooluse.qa._pipeline import ANSWER_SYSTEM, ROUTER_REMINDER, ROUTER_SYSTEM, QaPipeline, QaResult

__all__ = [
    "ANSWER_SYSTEM",
    "DATA_TEMPLATE",
    "DOCUMENTS_TEMPLATE",
    "EMPTY_TEMPLATE",
    "LEDGER_KEY",
    "PAUSED_TURN_NOTE",
    "RESUMING_TURN_NOTE",
    "ROUTER_REMINDER",
    "ROUTER_SYSTEM",
    "SINGLE_CHAIN_EMPTY_TEMPLATE",
    "SINGLE_CHAIN_SYSTEM",
    "SINGLE_CHAIN_TEMPLATE",
    "STOPPED_TURN_NOTE",
    "ApprovalRequiredEvent",
    "ArgumentCheck",
    "DeltaEvent",
    "DoneEvent",
    "EvalRun",
    "EvalTarget",
    "FamilyReport",
    "FetchGateQueryTransformer",
    "FetchGateRetriever",
    "FetchLedger",
    "FetchRecord",
    "LedgerToolCallback",
    "LedgerToolCallbackProvider",
    "PipelineTarget",
    "QaEvent",
    "QaPause",
    "QaPipeline",
    "QaResult",
    "Question",
    "QuestionFamily",
    "Reply",
    "Route",
    "RouteEvent",
    "RunScore",
    "SampledModel",
    "SingleChain",
    "StalePauseError",
    "Tally",
    "ToolCallEvent",
    "ToolResultEvent",
    "Trajectory",
    "TrajectoryStep",
    "TwoSourceAugmenter",
    "acompare",
    "aevaluate",
    "claims_lookup",
    "evaluate",
    "format_documents",
    "format_records",
    "ledger_tool_callbacks",
    "normalised",
    "report_json",
    "report_markdown",
    "reports_from_json",
    "score_run",
    "tally",
]
