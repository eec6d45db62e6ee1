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
- :func:`evaluate` (:func:`aevaluate`) asks :class:`QuestionFamily` questions N times and
  reports how often the expected tools were called (``tooluse eval``).
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
    EvalRun,
    FamilyReport,
    QuestionFamily,
    TrajectoryStep,
    aevaluate,
    evaluate,
)
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
from tooluse.qa._pipeline import ANSWER_SYSTEM, ROUTER_SYSTEM, QaPipeline, QaResult

__all__ = [
    "ANSWER_SYSTEM",
    "DATA_TEMPLATE",
    "DOCUMENTS_TEMPLATE",
    "EMPTY_TEMPLATE",
    "LEDGER_KEY",
    "PAUSED_TURN_NOTE",
    "RESUMING_TURN_NOTE",
    "ROUTER_SYSTEM",
    "STOPPED_TURN_NOTE",
    "ApprovalRequiredEvent",
    "DeltaEvent",
    "DoneEvent",
    "EvalRun",
    "FamilyReport",
    "FetchGateQueryTransformer",
    "FetchGateRetriever",
    "FetchLedger",
    "FetchRecord",
    "LedgerToolCallback",
    "LedgerToolCallbackProvider",
    "QaEvent",
    "QaPause",
    "QaPipeline",
    "QaResult",
    "QuestionFamily",
    "Route",
    "RouteEvent",
    "StalePauseError",
    "ToolCallEvent",
    "ToolResultEvent",
    "TrajectoryStep",
    "TwoSourceAugmenter",
    "aevaluate",
    "evaluate",
    "format_documents",
    "format_records",
    "ledger_tool_callbacks",
]
