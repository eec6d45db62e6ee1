"""``QaPipeline``: the two-stage router/answer pipeline of seed 001.

One client with tools and RAG in one loop has two faults: the retrieved documents give the
model a reason not to call tools ("the documents already answer it"), and retrieval re-runs
on every tool round. The pipeline splits the work into two clients run in order:

1. router: tools only (each wrapped to record into the turn's :class:`FetchLedger`), no
   documents, the conversation read but never written, a short rule "tools only for live
   data"; it ends when the model calls no more tools, repeats a call, or (an option)
   after its fetching round (:class:`~tooluse.qa._router_guard.RouterGuardAdvisor`);
2. answer: RAG and memory, no tools. The retrieval gate skips retrieval when the ledger has
   data (and the query transformers with it, e.g. the rewriting of a follow-up question into
   a standalone one); the two-source augmenter renders the fetched data or the documents;
   memory is written here only (once per turn). The answer streams.

A turn that pauses for approval has no answer to store: the pipeline stores its question
and a plain-text account of what ran and what waits (:mod:`tooluse.qa._paused_turn`), which
the resumed turn replaces.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any, Final

from tooluse._sync import run_sync
from tooluse.advisors import ToolCallingAdvisor
from tooluse.calling import CONVERSATION_ID_KEY, Approve, Decision, Deny, PendingToolCall
from tooluse.calling._audit_later import AUDIT_WRITES, AuditWrites
from tooluse.client import CallResponse, ChatClient, RunState
from tooluse.history import paused_turn_of
from tooluse.memory import CONVERSATION_ID, ChatMemory, MessageChatMemoryAdvisor
from tooluse.memory._api import validate_conversation_id
from tooluse.messages import (
    AssistantMessage,
    ChatOptions,
    Message,
    ToolCall,
    Usage,
    UserMessage,
    sum_usage,
)
from tooluse.models import ChatModel
from tooluse.qa._augmenter import TwoSourceAugmenter
from tooluse.qa._callbacks import ledger_tool_callbacks
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
from tooluse.qa._ledger import LEDGER_KEY, FetchLedger
from tooluse.qa._pause import QaPause, StalePauseError
from tooluse.qa._paused_turn import (
    PAUSED_TURN_NOTE,
    RESUMING_TURN_NOTE,
    STOPPED_TURN_NOTE,
    turn_record,
)
from tooluse.qa._router_guard import RouterGuardAdvisor
from tooluse.qa._text_history import TextOnlyHistoryAdvisor
from tooluse.qa._trace import CURRENT_TRACE, ToolTrace, ToolTraceAdvisor
from tooluse.rag import (
    DOCUMENT_CONTEXT,
    Document,
    DocumentRetriever,
    QueryAugmenter,
    QueryTransformer,
    RetrievalAugmentationAdvisor,
)

__all__ = ["ANSWER_SYSTEM", "ROUTER_REMINDER", "ROUTER_SYSTEM", "QaPipeline", "QaResult"]

logger = logging.getLogger(__name__)

# Deliberately short and without a list of what the tools do: the model sees the tools'
# names and descriptions, and a hand-written list goes stale as tools are added. The "no
# tool" exit is narrowed to knowledge questions: a history that already holds an answer
# must not become a reason to skip fetching.
ROUTER_SYSTEM: Final = (
    "You are the routing step of a question-answering service. Tools are only for live "
    "data: call the tools that provide the current facts the question needs, taking the "
    "arguments from the question and the conversation. Answers earlier in the conversation "
    "are not live data: fetch again. Call no tool only for a pure knowledge question; then "
    "reply with an empty message. Never answer the question yourself."
)
# For small models, which follow the system message less the further the question is from
# it: the rule again, after the question (RouterGuardAdvisor's reminder).
ROUTER_REMINDER: Final = (
    "(Route it: call a tool only if answering needs current data that the tool returns. If "
    "the question asks what something is or means, why, or how something works, reply with "
    "an empty message.)"
)
ANSWER_SYSTEM: Final = (
    "You answer the user's questions using only the information given with each question. "
    "Be concise and accurate."
)


@dataclasses.dataclass(frozen=True, slots=True)
class QaResult:
    """A whole run: the answer (``""`` when paused), the route (``None`` when paused), the
    router's tool trace, the documents the answer was given, the tokens used, and the
    ``pause`` to resume from when tool calls wait for approval."""

    answer: str
    route: Route | None
    tool_calls: tuple[ToolCallEvent, ...]
    tool_results: tuple[ToolResultEvent, ...]
    documents: tuple[Document, ...]
    usage: Usage | None
    pause: QaPause | None


_Router = Callable[[ChatClient], Awaitable[CallResponse]]


@dataclasses.dataclass(frozen=True, slots=True)
class _Turn:
    """One run of the pipeline: the question, where it is asked (a conversation, or a
    history given with it), the turn's id (its record's ``paused_turn`` mark) and
    whether it resumes a pause."""

    question: str
    conversation_id: str | None
    history: tuple[Message, ...]
    id: str
    resumed: bool
    approved: tuple[ToolCall, ...] = ()  # a resumed turn's approved calls, as they run
    live_tool_events: bool = True  # reported while the router runs, or once it has ended


class QaPipeline:
    """Router stage then answer stage (see the module docs).

    ``model`` answers; ``router_model`` (default: ``model``) routes, e.g. a cheaper one.
    ``tools``: anything ``tool_callbacks`` takes, providers included. ``retriever`` finds
    the documents (it is wrapped in a :class:`FetchGateRetriever`); ``query_transformers``
    rewrite the question for retrieval, in order (each wrapped in a
    :class:`FetchGateQueryTransformer`), e.g. ``[CompressionQueryTransformer(model)]`` so that
    a follow-up question retrieves for what it refers to; the answer is still asked the
    question as asked. ``memory``: the
    conversations, used when a run names a ``conversation_id`` (read by the router, written
    by the answer stage, or at a pause for approval with an account of the paused turn that
    its resumption replaces). ``router_advisor`` configures the router's tool loop (limits,
    approval rules: a ``ToolCallingAdvisor(tool_calling_manager=ToolCallingManager(...))``).
    ``router_fetch_rounds``: the router ends after this many rounds that fetched data,
    without sending the results back to the model (``1``: fetch, then answer, what small
    models need: sent the results, they call again; a round of tool search or of failed
    calls does not count, so the model searches, or corrects its arguments, first);
    ``None`` (default) lets the model chain calls until it calls no more. A response that
    only repeats calls of this turn ends the router either way.
    ``router_grounded_arguments``: a call whose required arguments (texts, numbers, the
    items of lists and objects; not choices) appear nowhere in the conversation is made up
    (small models fill them from the tool's examples when asked a knowledge question): it
    is not run, the model is told why and decides once more, and a second made-up call
    ends the router; asked what a term is or means ("什么是 UTC 时间？"), a call whose
    arguments are all in that term is not run either (the 1.5B fetched the term's current
    value: ``get_current_time(timezone="UTC")``); off by default, as a model that
    translates arguments (东京 -> ``"Tokyo"``) would lose such calls.
    ``router_history_as_text``: the router gets the earlier turns as a note before the
    question rather than as messages (a small model shown answers in words answers in
    words too, instead of calling a tool).
    ``router_reminder``: a text the router's request adds after the question, e.g.
    :data:`ROUTER_REMINDER`, the routing rule again where a small model heeds it (``None``,
    default: none).
    Run a conversation's turns one at a time: a turn reads the memory as it starts, so one
    started while another runs (a resumed run's approved call, say) reads it as it was.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        retriever: DocumentRetriever,
        query_transformers: Iterable[QueryTransformer] = (),
        tools: Iterable[object] | object = (),
        memory: ChatMemory | None = None,
        router_model: ChatModel | None = None,
        router_system: str = ROUTER_SYSTEM,
        answer_system: str = ANSWER_SYSTEM,
        augmenter: QueryAugmenter | None = None,
        router_options: ChatOptions | None = None,
        answer_options: ChatOptions | None = None,
        router_advisor: ToolCallingAdvisor | None = None,
        router_fetch_rounds: int | None = None,
        router_grounded_arguments: bool = False,
        router_history_as_text: bool = False,
        router_reminder: str | None = None,
    ) -> None:
        guard = RouterGuardAdvisor(
            router_fetch_rounds,
            grounded_arguments=router_grounded_arguments,
            history_as_text=router_history_as_text,
            reminder=router_reminder,
        )
        sources = list(tools) if isinstance(tools, list | tuple | set | frozenset) else [tools]
        recording_tools = ledger_tool_callbacks(*sources)
        trace = ToolTraceAdvisor()
        text_only = TextOnlyHistoryAdvisor()  # the answer stage has no tools
        rag = RetrievalAugmentationAdvisor(
            FetchGateRetriever(retriever),
            query_transformers=[FetchGateQueryTransformer(t) for t in query_transformers],
            augmenter=augmenter if augmenter is not None else TwoSourceAugmenter(),
        )

        def router(*memory: MessageChatMemoryAdvisor) -> ChatClient:
            return ChatClient(
                router_model if router_model is not None else model,
                system=router_system,
                tools=recording_tools,
                advisors=[trace, guard, *memory],
                options=router_options,
                tool_calling_advisor=router_advisor,
            )

        def answer(*memory: MessageChatMemoryAdvisor) -> ChatClient:
            return ChatClient(
                model,
                system=answer_system,
                advisors=[rag, *memory, text_only],
                options=answer_options,
                auto_register_tool_advisor=False,  # the answer stage has no tools
            )

        # A client per stage and per kind of run (with a conversation or not), so that no
        # request rebuilds its advisor chain.
        self._memory = memory
        self._router, self._answer = router(), answer()
        self._conversation_router: ChatClient | None = None
        self._conversation_answer: ChatClient | None = None
        if memory is not None:
            self._conversation_router = router(MessageChatMemoryAdvisor(memory, read_only=True))
            self._conversation_answer = answer(MessageChatMemoryAdvisor(memory))

    @property
    def memory(self) -> ChatMemory | None:
        """The conversations' memory (``None``: runs take their history with the question)."""
        return self._memory

    # -- runs --------------------------------------------------------------------------------

    def stream(
        self,
        question: str,
        *,
        conversation_id: str | None = None,
        history: Sequence[Message] = (),
        tool_context: Mapping[str, Any] | None = None,
        turn_id: str | None = None,
        live_tool_events: bool = True,
    ) -> AsyncGenerator[QaEvent, None]:
        """Run both stages, reporting as they go: ``ToolCallEvent`` / ``ToolResultEvent``
        while the router works, then ``RouteEvent``, ``DeltaEvent``s of the answer and
        ``DoneEvent``; or, when tool calls need approval, ``ApprovalRequiredEvent`` last.
        ``live_tool_events=False``: the tool events come all at once when the router has
        ended, in the same order (for a consumer that does not show them as they happen: the
        router then runs in the consumer's task, without a task of its own).

        ``conversation_id`` selects the conversation in ``memory``; ``history`` gives earlier
        messages with the question instead (e.g. an OpenAI-style request). ``tool_context``:
        entries for the router's tools, such as the caller
        (:meth:`tooluse.calling.Caller.tool_context`), which the audit log records and the
        manager's ``tool_visibility`` reads; a paused run keeps them. ``turn_id``: the
        turn's id (its pause's ``turn_id``), default a new one; a durable run fixes it, so
        that the turn replayed is the same turn.
        """
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"The question must be a non-blank string, got {question!r:.100}")
        self._check_conversation(conversation_id)
        history = tuple(history)
        ledger = FetchLedger()

        def route(router: ChatClient) -> Awaitable[CallResponse]:
            spec = router.prompt().messages(history).user(question)
            spec.tool_context({**(tool_context or {}), LEDGER_KEY: ledger})
            if conversation_id is not None:
                spec.context({CONVERSATION_ID: conversation_id})
                # the tools' (and the audit log's) conversation, from the request
                spec.tool_context({CONVERSATION_ID_KEY: conversation_id})
            return spec.acall()

        turn_id = turn_id if turn_id is not None else secrets.token_hex(16)  # as uuid4().hex
        turn = _Turn(
            question,
            conversation_id,
            history,
            turn_id,
            resumed=False,
            live_tool_events=live_tool_events,
        )
        return self._run(turn, ledger, route, ToolTrace)

    def resume_stream(
        self,
        pause: QaPause,
        decisions: Mapping[str, Decision],
        *,
        tool_context: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[QaEvent, None]:
        """Continue a paused run with a decision per pending call id (``Approve()``,
        ``Approve(arguments={...})``, ``Deny("why")``); reports as :meth:`stream` does. Calls
        that already ran never run again; resume a pause once. ``tool_context`` entries
        replace those the run paused with (the caller's roles as they are now).

        A pause in a conversation is resumed only while it is the conversation's last turn:
        once a later question was asked (or the paused turn is no longer in memory), the
        stream raises :class:`StalePauseError` before anything runs."""
        if not isinstance(pause, QaPause):
            raise TypeError(f"resume_stream needs a QaPause, got {type(pause).__name__}")
        _check_decisions(pause, decisions)
        self._check_conversation(pause.conversation_id)
        ledger = FetchLedger(pause.fetched)
        # A pause of an older tooluse left no record in memory: nothing to replace.
        turn_id = pause.turn_id if pause.turn_id is not None else secrets.token_hex(16)
        approved = tuple(
            ToolCall(
                id=call.id,
                name=call.name,
                arguments=decision.encoded_arguments(call.id) or call.arguments,
            )
            for call in pause.pending_tool_calls
            if isinstance(decision := decisions[call.id], Approve)
        )
        turn = _Turn(pause.question, pause.conversation_id, pause.history, turn_id, True, approved)

        async def route(router: ChatClient) -> CallResponse:
            await self._check_current(pause)
            if approved:
                # Before they run: should the process die while they do (kill -9, a crash),
                # memory must not go on saying they wait, or asked for again and approved,
                # they would run twice.
                await self._remember(turn, RESUMING_TURN_NOTE, ledger, (), approved)
            state = pause.router_state
            context = {**(tool_context or {}), LEDGER_KEY: ledger}
            return await router.aresume(state, decisions, tool_context=context)

        def trace(emit: Callable[[QaEvent], None]) -> ToolTrace:
            return ToolTrace.resuming(emit, pause.router_state.history)

        return self._run(turn, ledger, route, trace)

    async def acall(
        self,
        question: str,
        *,
        conversation_id: str | None = None,
        history: Sequence[Message] = (),
        tool_context: Mapping[str, Any] | None = None,
    ) -> QaResult:
        """:meth:`stream` run to its end."""
        return await _collect(
            self.stream(
                question,
                conversation_id=conversation_id,
                history=history,
                tool_context=tool_context,
            )
        )

    def call(
        self,
        question: str,
        *,
        conversation_id: str | None = None,
        history: Sequence[Message] = (),
        tool_context: Mapping[str, Any] | None = None,
    ) -> QaResult:
        """Sync form of :meth:`acall` (not from inside a running event loop)."""
        return run_sync(
            self.acall(
                question,
                conversation_id=conversation_id,
                history=history,
                tool_context=tool_context,
            ),
            sync_name="QaPipeline.call()",
            async_name="await pipeline.acall(...)",
        )

    async def aresume(
        self,
        pause: QaPause,
        decisions: Mapping[str, Decision],
        *,
        tool_context: Mapping[str, Any] | None = None,
    ) -> QaResult:
        """:meth:`resume_stream` run to its end."""
        return await _collect(self.resume_stream(pause, decisions, tool_context=tool_context))

    def resume(
        self,
        pause: QaPause,
        decisions: Mapping[str, Decision],
        *,
        tool_context: Mapping[str, Any] | None = None,
    ) -> QaResult:
        """Sync form of :meth:`aresume` (not from inside a running event loop)."""
        return run_sync(
            self.aresume(pause, decisions, tool_context=tool_context),
            sync_name="QaPipeline.resume()",
            async_name="await pipeline.aresume(...)",
        )

    # -- the two stages ----------------------------------------------------------------------

    def _check_conversation(self, conversation_id: str | None) -> None:
        if conversation_id is None:
            return
        if not isinstance(conversation_id, str) or not conversation_id.strip():
            raise ValueError(
                f"conversation_id must be a non-blank string or None, got {conversation_id!r:.100}"
            )
        validate_conversation_id(conversation_id)  # e.g. a NUL no repository can store
        if self._memory is None:
            raise ValueError(
                "This QaPipeline has no memory: pass memory= to use conversation ids, or give "
                "earlier messages with history="
            )

    async def _check_current(self, pause: QaPause) -> None:
        """:class:`StalePauseError` unless the conversation's last turn is the pause, still
        waiting for the decisions on its calls."""
        if pause.conversation_id is None or pause.turn_id is None or self._memory is None:
            return
        stored = await self._memory.aget(pause.conversation_id)
        held = tuple(call.id for call in pause.pending_tool_calls)
        record = next(
            (
                index
                for index, message in enumerate(stored)
                if isinstance(message, AssistantMessage)
                and paused_turn_of(message) == pause.turn_id
                and message.held_for_approval == held
            ),
            None,
        )
        if record is None:
            raise StalePauseError(
                f"The run paused in conversation {pause.conversation_id!r} on "
                f"{pause.question!r:.100} is no longer waiting for these decisions: the "
                "conversation's memory has no record of it waiting (resumed already, cleared, "
                "or cut by the memory window)"
            )
        if any(isinstance(message, UserMessage) for message in stored[record + 1 :]):
            raise StalePauseError(
                f"The conversation {pause.conversation_id!r} went on after the run paused on "
                f"{pause.question!r:.100}: a later question withdrew its approval; ask again"
            )

    async def _remember(
        self,
        turn: _Turn,
        note: str,
        ledger: FetchLedger,
        held: Sequence[PendingToolCall],
        approved: Sequence[ToolCall] = (),
    ) -> None:
        """Store the turn's record (:func:`turn_record`) in its conversation, if it has one."""
        if turn.conversation_id is None or self._memory is None:
            return
        record = turn_record(turn.question, turn.id, note, ledger.records, held, approved)
        await self._memory.aadd(turn.conversation_id, record)

    def _run(
        self,
        turn: _Turn,
        ledger: FetchLedger,
        route: _Router,
        make_trace: Callable[[Callable[[QaEvent], None]], ToolTrace],
    ) -> AsyncGenerator[QaEvent, None]:
        stages = self._stages(turn, ledger, route, make_trace)
        # A new turn has nothing to record when it stops early: its stages as they are, not
        # behind one more generator that every event would pass through.
        return self._resumed_run(turn, ledger, stages) if turn.resumed else stages

    async def _resumed_run(
        self, turn: _Turn, ledger: FetchLedger, stages: AsyncGenerator[QaEvent, None]
    ) -> AsyncGenerator[QaEvent, None]:
        answered = False
        try:
            # Closed here, so that a consumer leaving early stops the router before the
            # turn is recorded.
            async with contextlib.aclosing(stages):
                async for event in stages:
                    answered = isinstance(event, ApprovalRequiredEvent | DoneEvent)
                    yield event
        except StalePauseError:
            raise  # nothing ran: the record stays as it was
        except BaseException:
            # A resumed turn that stops before its answer was stored (a failure, the consumer
            # leaving) may have run approved calls: the record must no longer say they
            # wait. Its data goes in too.
            if not answered:
                try:
                    await self._remember(turn, STOPPED_TURN_NOTE, ledger, (), turn.approved)
                except Exception:
                    logger.exception("Could not record the stopped turn %s in memory", turn.id)
            raise

    async def _stages(
        self,
        turn: _Turn,
        ledger: FetchLedger,
        route: _Router,
        make_trace: Callable[[Callable[[QaEvent], None]], ToolTrace],
    ) -> AsyncGenerator[QaEvent, None]:
        question, conversation_id, history = turn.question, turn.conversation_id, turn.history
        router, answerer = self._router, self._answer
        if conversation_id is not None:
            assert self._conversation_router is not None and self._conversation_answer is not None
            router, answerer = self._conversation_router, self._conversation_answer

        queue: asyncio.Queue[QaEvent | None] = asyncio.Queue()
        trace = make_trace(queue.put_nowait)
        # The router's rounds start their audit writes and go on; the turn waits for them
        # before it reports its end (the answer's model call runs meanwhile).
        audits = AuditWrites()
        try:
            if turn.live_tool_events:
                # The router runs in a task of its own, whose context carries the run's trace, so
                # the tool events are reported while it runs. None marks the end of the task
                # (queued after everything it reported).
                async def run_router() -> CallResponse:
                    CURRENT_TRACE.set(trace)  # in this task's copy of the context only
                    AUDIT_WRITES.set(audits)
                    return await route(router)

                task = asyncio.ensure_future(run_router())
                task.add_done_callback(lambda _: queue.put_nowait(None))
                try:
                    while (event := await queue.get()) is not None:
                        yield event
                    response = task.result()
                finally:
                    if not task.done():  # the consumer stopped early: stop the router too
                        task.cancel()
                        await asyncio.wait([task])
                        if not task.cancelled() and task.exception() is not None:
                            logger.warning(
                                "The router stage failed after its consumer stopped: %r",
                                task.exception(),
                            )
            else:
                # In the consumer's task, its events queued until it ends: no task of its own,
                # nor a wake-up of the consumer per event. Nothing is yielded meanwhile, so the
                # trace is the run's only while the router runs.
                token, audited = CURRENT_TRACE.set(trace), AUDIT_WRITES.set(audits)
                try:
                    response = await route(router)
                finally:
                    CURRENT_TRACE.reset(token)
                    AUDIT_WRITES.reset(audited)

            state = response.state
            if state is not None:
                trace.report_results(state.history)
                for event in _drain(queue):
                    yield event
                pause = QaPause(
                    question=question,
                    conversation_id=conversation_id,
                    history=history,
                    router_state=_storable(state),
                    fetched=ledger.records,
                    turn_id=turn.id,
                )
                # A pause that is never resumed leaves the turn in memory all the same.
                await self._remember(turn, PAUSED_TURN_NOTE, ledger, state.pending_tool_calls)
                await audits.wait()
                yield ApprovalRequiredEvent(state.pending_tool_calls, pause)
                return
            trace.report_results(response.conversation_history)
            for event in _drain(queue):
                yield event

            chosen: Route = "tools" if ledger else "knowledge"
            yield RouteEvent(chosen, len(ledger))
            context: dict[str, Any] = {LEDGER_KEY: ledger}
            if conversation_id is not None:
                context[CONVERSATION_ID] = conversation_id
            # A resumed turn's question carries its id: memory leaves the record out of the
            # history and replaces it with this turn.
            asked = UserMessage(text=question, paused_turn=turn.id if turn.resumed else None)
            answer = answerer.prompt().messages([*history, asked]).context(context).stream()
            pieces: list[str] = []
            async for text in answer.content():
                pieces.append(text)
                yield DeltaEvent(text)
            documents = tuple(answer.context.get(DOCUMENT_CONTEXT) or ())
            usage = sum_usage(response.chat_response().usage, answer.chat_response().usage)
            await audits.wait()
            yield DoneEvent("".join(pieces), chosen, documents, usage)
        finally:
            audits.abandon()  # not waited for: the turn stopped before its end


def _drain(queue: asyncio.Queue[QaEvent | None]) -> list[QaEvent]:
    """What was reported after the router task ended."""
    events: list[QaEvent] = []
    while not queue.empty():
        item = queue.get_nowait()
        if item is not None:
            events.append(item)
    return events


def _storable(state: RunState) -> RunState:
    """The router's state without the live ledger (it is stored as records in the pause)."""
    return state.without_tool_context(LEDGER_KEY) if LEDGER_KEY in state.tool_context else state


def _check_decisions(pause: QaPause, decisions: Mapping[str, Decision]) -> None:
    if not isinstance(decisions, Mapping):
        raise TypeError("decisions must map each pending call id to Approve() or Deny(...)")
    pending = [call.id for call in pause.pending_tool_calls]
    missing = [call_id for call_id in pending if call_id not in decisions]
    unknown = [call_id for call_id in decisions if call_id not in pending]
    if missing or unknown:
        raise ValueError(
            f"Give one decision per pending tool call: pending {pending}; missing {missing}; "
            f"not pending {unknown}"
        )
    for call_id, decision in decisions.items():
        if not isinstance(decision, Approve | Deny):
            raise TypeError(
                f"The decision for {call_id!r} must be Approve(...) or Deny(...), got "
                f"{decision!r:.100}"
            )


async def _collect(events: AsyncIterator[QaEvent]) -> QaResult:
    calls: list[ToolCallEvent] = []
    results: list[ToolResultEvent] = []
    async for event in events:
        if isinstance(event, ToolCallEvent):
            calls.append(event)
        elif isinstance(event, ToolResultEvent):
            results.append(event)
        elif isinstance(event, ApprovalRequiredEvent):
            return QaResult("", None, tuple(calls), tuple(results), (), None, event.pause)
        elif isinstance(event, DoneEvent):
            return QaResult(
                event.answer,
                event.route,
                tuple(calls),
                tuple(results),
                event.documents,
                event.usage,
                None,
            )
    raise RuntimeError("The QA run ended without an answer or a pause")
