"""Durable runs: a turn of the service survives the death of the worker that runs it.

A turn runs as a workflow of a durable-execution engine, behind one small port
(:class:`RunEngine`: begin a run, record a step, resume the runs of dead workers). Each
model call, each tool round and each write the turn makes (memory, a paused run, its display
record) is a step whose result the engine records when it completes: a run taken over by
another worker runs its body again from the start, and every step already recorded returns
its recorded result instead of running, so a tool call that completed never runs again and
the run goes on from its last completed step. The steps come in the same order on every run
of a body, the condition of any replaying engine: the turn's id is fixed when it begins, and
everything else the body decides comes from recorded steps.

:class:`DbosRunEngine` is the engine: DBOS (``pip install 'tooluse[durable]'``), whose
workflows and steps are rows in the service's own PostgreSQL (schema ``dbos``). DBOS has
no view of which workers are alive (its hosted Conductor does that); each worker here holds
a PostgreSQL advisory lock for as long as it lives, and the others take over the runs of a
worker whose lock is free (:meth:`DbosRunEngine.recover_dead_workers`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from tooluse._version import VERSION
from tooluse.calling import ToolCallingManager, ToolCallLimitExceeded, ToolExecutionResult
from tooluse.calling._approval import PendingToolCall
from tooluse.calling._audit_later import AUDIT_WRITES
from tooluse.memory import ChatMemory
from tooluse.messages import ChatResponse, Message, Prompt, ToolResponse, ToolResponseMessage, Usage
from tooluse.models import ChatModel
from tooluse.qa._ledger import FetchLedger, FetchRecord
from tooluse.streaming import StreamAggregator

if TYPE_CHECKING:
    import psycopg

    from tooluse.calling import Decision

__all__ = [
    "DbosRunEngine",
    "RecordedChatMemory",
    "RecordedChatModel",
    "RecordedToolCallingManager",
    "RunBody",
    "RunEngine",
    "RunOutcome",
    "executor_id",
]

logger = logging.getLogger("tooluse.service")

T = TypeVar("T")

RunBody = Callable[[dict[str, Any]], Awaitable[list[dict[str, Any]]]]
"""What a run does with its request (JSON-able): the events it ended with, which the engine
keeps as the run's outcome."""


@dataclasses.dataclass(frozen=True, slots=True)
class RunOutcome:
    """A run as the engine knows it: its ``request``; ``running`` (on some worker, or
    waiting to be taken over), ``done`` with the ``events`` its body returned, or ``failed``
    (``error``)."""

    run_id: str
    request: dict[str, Any]
    status: Literal["running", "done", "failed"]
    events: list[dict[str, Any]] | None = None
    error: str | None = None


class RunEngine(Protocol):
    """The port a durable-execution engine fills (DBOS here; Temporal would fit it too)."""

    async def begin(self, run_id: str, request: dict[str, Any]) -> None:
        """Start the run ``run_id`` of the body with ``request``, recorded before this
        returns: from then on the run finishes, on this worker or another."""

    async def step(self, name: str, compute: Callable[[], Awaitable[T]]) -> T:
        """Inside a run: the recorded result (or exception) of this step if a previous run
        of the body completed it, else ``compute()``'s, recorded. Outside a run:
        ``compute()``. ``name`` must be the same on every run of the body."""

    async def outcome(self, run_id: str) -> RunOutcome | None:
        """The run's status and, once it ended, its events; ``None``: no such run."""

    async def recover_dead_workers(self) -> list[str]:
        """Resume elsewhere the runs of workers that died; the ids of those workers."""


class RecordedChatModel:
    """``model`` whose calls are steps of the run they are made in: a replayed call answers
    with the recorded response (a stream, with it whole, in one chunk)."""

    def __init__(self, model: ChatModel, runs: RunEngine) -> None:
        self._model = model
        self._runs = runs

    @property
    def model(self) -> ChatModel:
        return self._model

    async def acall(self, prompt: Prompt) -> ChatResponse:
        return await self._runs.step("model.call", lambda: self._model.acall(prompt))

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        chunks: asyncio.Queue[ChatResponse | None] = asyncio.Queue()
        streamed = False

        async def compute() -> ChatResponse:
            nonlocal streamed
            streamed = True
            aggregator = StreamAggregator()
            try:
                async for chunk in self._model.stream(prompt):
                    aggregator.add(chunk)
                    chunks.put_nowait(chunk)
            finally:
                chunks.put_nowait(None)
            return aggregator.response()

        # The step runs in a task of its own, so that the chunks reach the caller as they
        # come while the step still records the whole response at its end. The task's end
        # also ends the queue: a replayed step streams nothing, and one that failed before
        # its first chunk ends it too; the reader waits on the queue alone, one get a chunk.
        task = asyncio.ensure_future(self._runs.step("model.stream", compute))
        task.add_done_callback(lambda _: chunks.put_nowait(None))
        try:
            while (chunk := await chunks.get()) is not None:
                yield chunk
            response = await task
            if not streamed:  # replayed: the recorded response, whole
                yield response
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait([task])


@dataclasses.dataclass(frozen=True, slots=True)
class _RecordedRound:
    """What a tool round added: the messages after the prompt's, and the ledger's records;
    for a round that broke a call limit, the limit broken (``ToolCallLimitExceeded`` is
    recorded as data: its keyword-only constructor does not survive pickling)."""

    added: tuple[Message, ...]
    return_direct: bool
    pending: tuple[PendingToolCall, ...]
    fetched: tuple[FetchRecord, ...]
    breach: tuple[str | None, int, int] | None = None  # tool, limit, the breach's position
    usage: Usage | None = None  # the tools' own model calls (ToolExecutionResult.usage)


class RecordedToolCallingManager(ToolCallingManager):
    """A :class:`~tooluse.calling.ToolCallingManager` whose rounds are steps of the run
    they are made in: a replayed round runs no tool and gives the recorded results, and
    the data its tools fetched goes into the turn's ledger again."""

    def __init__(self, runs: RunEngine, **options: Any) -> None:
        super().__init__(**options)
        self._runs = runs

    async def aexecute_tool_calls(
        self, prompt: Prompt, response: ChatResponse
    ) -> ToolExecutionResult:
        return await self._recorded(
            "tools.round",
            prompt,
            lambda: ToolCallingManager.aexecute_tool_calls(self, prompt, response),
        )

    async def aresume_tool_calls(
        self, prompt: Prompt, decisions: Mapping[str, Decision]
    ) -> ToolExecutionResult:
        return await self._recorded(
            "tools.resumed_round",
            prompt,
            lambda: ToolCallingManager.aresume_tool_calls(self, prompt, decisions),
        )

    async def _recorded(
        self,
        name: str,
        prompt: Prompt,
        run: Callable[[], Awaitable[ToolExecutionResult]],
    ) -> ToolExecutionResult:
        ledger = FetchLedger.of(prompt.options.tool_context)
        known = len(ledger.records) if ledger is not None else 0
        ran = False

        def recorded_round(
            result: ToolExecutionResult, breach: tuple[str | None, int, int] | None = None
        ) -> _RecordedRound:
            return _RecordedRound(
                added=tuple(result.conversation_history[len(prompt.messages) :]),
                return_direct=result.return_direct,
                pending=tuple(result.pending_tool_calls),
                fetched=ledger.records[known:] if ledger is not None else (),
                breach=breach,
                usage=result.usage,
            )

        async def compute() -> _RecordedRound:
            nonlocal ran
            ran = True
            # The round's audit write is part of its step (a replayed round runs no write):
            # waited for here, not when the turn ends.
            awaited_here = AUDIT_WRITES.set(None)
            try:
                return recorded_round(await run())
            except ToolCallLimitExceeded as exc:
                responses = _last_responses(exc.partial_result)
                position = next(i for i, r in enumerate(responses) if r is exc.breach_response)
                return recorded_round(exc.partial_result, (exc.tool_name, exc.limit, position))
            finally:
                AUDIT_WRITES.reset(awaited_here)

        recorded = await self._runs.step(name, compute)
        if not ran and ledger is not None:
            for record in recorded.fetched:
                ledger.add(record.tool, record.arguments, record.result)
        result = ToolExecutionResult(
            (*prompt.messages, *recorded.added),
            return_direct=recorded.return_direct,
            pending_tool_calls=recorded.pending,
            # A round recorded before rounds kept their usage unpickles without it.
            usage=getattr(recorded, "usage", None),
        )
        if recorded.breach is not None:
            tool_name, limit, position = recorded.breach
            raise ToolCallLimitExceeded(
                tool_name=tool_name,
                limit=limit,
                partial_result=result,
                breach_response=_last_responses(result)[position],
            )
        return result


def _last_responses(result: ToolExecutionResult) -> tuple[ToolResponse, ...]:
    last = result.conversation_history[-1]
    return tuple(last.responses) if isinstance(last, ToolResponseMessage) else ()


class RecordedChatMemory:
    """``memory`` whose writes are steps of the run they are made in: a replayed turn does
    not store its messages twice. Reads are not steps (a turn of a conversation runs alone,
    so it reads what its first run read)."""

    def __init__(self, memory: ChatMemory, runs: RunEngine) -> None:
        self._memory = memory
        self._runs = runs

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        self._memory.add(conversation_id, messages)

    def get(self, conversation_id: str) -> list[Message]:
        return self._memory.get(conversation_id)

    def clear(self, conversation_id: str) -> None:
        self._memory.clear(conversation_id)

    async def aadd(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        await self._runs.step("memory.add", lambda: self._memory.aadd(conversation_id, messages))

    async def aget(self, conversation_id: str) -> list[Message]:
        return await self._memory.aget(conversation_id)

    async def aclear(self, conversation_id: str) -> None:
        await self._memory.aclear(conversation_id)


# -- DBOS --------------------------------------------------------------------------------

# Advisory-lock namespace of the workers' liveness locks (the first key of the two-key form).
_LIVENESS_LOCKS = 0x746F6F6C  # "tool"

_WORKFLOW_NAME = "tooluse.service.turn"
_TAKEOVER_TIMEOUT = 30.0  # seconds on_takeover may take before the runs are resumed anyway
_EXECUTOR_THREADS = min(32, (os.cpu_count() or 1) + 4)
_Workflow = Callable[[dict[str, Any]], Coroutine[Any, Any, list[dict[str, Any]]]]
_workflow: _Workflow | None = None
_active: DbosRunEngine | None = None  # DBOS runs one instance per process


def _turn_workflow() -> _Workflow:
    """The one DBOS workflow, registered once per process (before DBOS launches, as its
    recovery requires): the body of the engine that is running."""
    global _workflow
    if _workflow is None:
        from dbos import DBOS

        @DBOS.workflow(name=_WORKFLOW_NAME)
        async def turn(request: dict[str, Any]) -> list[dict[str, Any]]:
            if _active is None:
                raise RuntimeError("A durable run started with no DbosRunEngine running")
            return await _active.body(request)

        _workflow = turn
    return _workflow


def executor_id() -> str:
    """This worker's name among the executors: host, process and a random part, so that a
    worker started again is another executor (its predecessor's runs are taken over)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class DbosRunEngine:
    """:class:`RunEngine` on DBOS, its workflows in the PostgreSQL database ``url``.

    One per process (DBOS keeps its state in the process): :meth:`start` launches DBOS on
    the running event loop, where the runs it resumes run too, and takes this worker's
    liveness lock; every ``recovery_interval`` seconds the worker looks for runs of workers
    whose lock is free (dead: PostgreSQL frees a session's locks when its connection ends)
    and hands them to DBOS, which queues each once and runs it on one live worker.
    Recovered runs are those of the same tooluse version only (DBOS's application
    version): a replay needs the same code. ``executor``: this worker's executor id
    (default a new :func:`executor_id`); ``on_takeover(executor)`` is awaited, on the
    loop of :meth:`start`, for each dead worker before its runs are resumed (the service
    frees the conversations it held, which its runs would otherwise wait for)."""

    def __init__(
        self,
        url: str,
        body: RunBody,
        *,
        recovery_interval: float = 2.0,
        executor: str | None = None,
        on_takeover: Callable[[str], Coroutine[Any, Any, object]] | None = None,
    ) -> None:
        try:
            import dbos  # noqa: F401
        except ImportError as exc:  # the durable extra is optional
            raise ImportError("Durable runs need DBOS: pip install 'tooluse[durable]'") from exc
        if not recovery_interval > 0:
            raise ValueError(f"recovery_interval must be > 0 seconds, got {recovery_interval}")
        self._url = url
        self.body = body
        self.executor_id = executor_id() if executor is None else executor
        self._recovery_interval = recovery_interval
        self._on_takeover = on_takeover
        self._loop: asyncio.AbstractEventLoop | None = None
        self._liveness: psycopg.Connection[Any] | None = None
        self._watcher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        global _active
        from dbos import DBOS

        if _active is not None:
            raise RuntimeError(
                "Another service with durable runs is running in this process: DBOS runs one "
                "per process (run each service in a process of its own)"
            )
        _turn_workflow()  # registered before DBOS launches
        _active = self
        self._loop = asyncio.get_running_loop()
        try:
            self._liveness = await asyncio.to_thread(self._hold_liveness_lock)
            DBOS(
                config={
                    "name": "tooluse",
                    "system_database_url": self._url,
                    "executor_id": self.executor_id,
                    "application_version": VERSION,
                    "log_level": "WARNING",
                    # DBOS makes its pool the loop's default executor (asyncio.to_thread),
                    # unbounded unless told: as many threads as asyncio's own default.
                    "max_executor_threads": _EXECUTOR_THREADS,
                    # Its notifier thread wakes this often to send what workflows' events
                    # and streams wrote (DBOS's default, 10 ms: 100 wake-ups a second at
                    # rest); the runs here write neither, so once a second.
                    "notification_coalesce_sec": 1.0,
                }
            )
            # On this thread, with its loop running: DBOS then runs the workflows it resumes
            # on this loop, beside the service's own.
            DBOS.launch()
        except BaseException:
            await self.aclose()
            raise
        self._watcher = asyncio.create_task(self._watch())
        logger.info("durable runs: DBOS, executor %s", self.executor_id)

    def _hold_liveness_lock(self) -> psycopg.Connection[Any]:
        import psycopg

        connection = psycopg.connect(self._url, autocommit=True)
        connection.execute(
            "SELECT pg_advisory_lock(%s, hashtext(%s))", (_LIVENESS_LOCKS, self.executor_id)
        )
        return connection

    async def aclose(self) -> None:
        global _active
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        if _active is self:
            from dbos import DBOS

            with contextlib.suppress(Exception):  # not constructed when the launch failed
                DBOS.destroy(workflow_completion_timeout_sec=0)
            _active = None
            # Its pool, the loop's default executor since the first step, is shut down.
            asyncio.get_running_loop().set_default_executor(
                concurrent.futures.ThreadPoolExecutor(thread_name_prefix="asyncio")
            )
        if self._liveness is not None:
            await asyncio.to_thread(self._liveness.close)
            self._liveness = None

    async def begin(self, run_id: str, request: dict[str, Any]) -> None:
        from dbos import DBOS, SetWorkflowID

        with SetWorkflowID(run_id):
            await DBOS.start_workflow_async(_turn_workflow(), request)

    async def step(self, name: str, compute: Callable[[], Awaitable[T]]) -> T:
        from dbos import DBOS, StepOptions

        async def run() -> T:  # a coroutine function: DBOS runs it on this loop, not a thread
            return await compute()

        options: StepOptions = {"name": name}
        result: T = await DBOS.run_step_async(options, run)
        return result

    async def outcome(self, run_id: str) -> RunOutcome | None:
        from dbos import DBOS

        status = await DBOS.get_workflow_status_async(run_id)
        if status is None or status.input is None:
            return None
        (request,) = status.input["args"]
        if status.status == "SUCCESS":
            return RunOutcome(run_id, request, "done", events=status.output)
        if status.status in ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
            return RunOutcome(run_id, request, "failed", error=str(status.error or status.status))
        return RunOutcome(run_id, request, "running")

    async def recover_dead_workers(self) -> list[str]:
        return await asyncio.to_thread(self._recover_dead_workers)

    def _recover_dead_workers(self) -> list[str]:
        assert self._liveness is not None  # held from start() on
        # One statement on the connection this worker holds anyway, over DBOS's table of
        # workflows (its system table dbos.workflow_status): the other executors with runs
        # of this version pending, instead of every pending run through DBOS.list_workflows.
        rows = self._liveness.execute(
            "SELECT DISTINCT executor_id FROM dbos.workflow_status WHERE status = 'PENDING' "
            "AND name = %s AND application_version = %s AND executor_id <> %s "
            "ORDER BY executor_id",
            (_WORKFLOW_NAME, VERSION, self.executor_id),
        ).fetchall()
        return [other for (other,) in rows if self._take_over(other)]

    def _take_over(self, other: str) -> bool:
        """Resume ``other``'s runs if it is dead (its liveness lock is free); the lock is held
        meanwhile, so the live workers hand its runs to DBOS once, not each."""
        from dbos import DBOS

        assert self._liveness is not None
        key = (_LIVENESS_LOCKS, other)
        free = self._liveness.execute(
            "SELECT pg_try_advisory_lock(%s, hashtext(%s))", key
        ).fetchone()
        if not (free and free[0]):
            return False
        try:
            if self._on_takeover is not None:
                assert self._loop is not None  # set by start(), which starts the watch
                freeing: concurrent.futures.Future[object] = asyncio.run_coroutine_threadsafe(
                    self._on_takeover(other), self._loop
                )
                try:  # bounded: a loop that stops meanwhile never runs it
                    freeing.result(timeout=_TAKEOVER_TIMEOUT)
                except Exception:  # its runs go on all the same, later
                    logger.exception("Freeing what worker %s held failed", other)
            # Its runs are queued again, each for one live worker: DBOS's dequeue admits one
            # runner, and a run another worker took meanwhile is not its any more.
            handles = DBOS._recover_pending_workflows([other])
        finally:
            # This session holds this worker's own lock too: only the dead one's is let go.
            self._liveness.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", key)
        logger.warning(
            "worker %s died: its %d run(s) go on from their last completed step",
            other,
            len(handles),
        )
        return True

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._recovery_interval)
            try:
                await self.recover_dead_workers()
            except Exception:  # the next round tries again
                logger.exception("Looking for the runs of dead workers failed")
