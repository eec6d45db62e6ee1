"""``ToolCallingManager``: executes one round of tool calls (SPEC section 3)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, TypeVar

from tooluse import _tracing
from tooluse._sync import run_sync
from tooluse.calling._access import Caller, ToolVisibility
from tooluse.calling._approval import (
    WRITE_APPROVALS,
    ApprovalPredicate,
    Approve,
    Decision,
    Deny,
    PendingToolCall,
    WriteApproval,
    approval_reason,
)
from tooluse.calling._audit import (
    Approval,
    AuditRecord,
    AuditSink,
    Outcome,
    caller_of,
    identity_attributes,
    roles_of,
)
from tooluse.calling._audit_later import AUDIT_WRITES
from tooluse.calling._exceptions import (
    DefaultToolExecutionExceptionProcessor,
    ToolCallLimitExceeded,
    ToolExecutionExceptionProcessor,
    UnknownToolError,
)
from tooluse.calling._images import DEFAULT_MAX_IMAGE_BYTES, image_response
from tooluse.calling._journal import ToolCallJournal, idempotency_key_of, repeat_text
from tooluse.calling._limits import LimitBreach, ToolCallLimits, TurnTally
from tooluse.calling._rate_limits import InMemoryRateLimitStore, RateLimit, RateLimitStore
from tooluse.calling._resolvers import ToolCallbackResolver
from tooluse.calling._result import ToolExecutionResult
from tooluse.calling._usage import collected_usage
from tooluse.messages import (
    AssistantMessage,
    ChatOptions,
    ChatResponse,
    Message,
    Prompt,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    sum_usage,
)
from tooluse.tools import (
    ToolCallback,
    ToolContext,
    ToolDefinition,
    ToolResult,
    is_tool_callback,
)
from tooluse.tools._function_schema import normalise_arguments

__all__ = [
    "DEFAULT_MAX_ARGUMENT_CHARS",
    "DEFAULT_MAX_IDENTICAL_CALLS",
    "DEFAULT_MAX_IMAGE_BYTES",
    "ToolCallingManager",
]

logger = logging.getLogger("tooluse.calling")

DEFAULT_MAX_ARGUMENT_CHARS: Final = 200_000
DEFAULT_MAX_IDENTICAL_CALLS: Final = 3  # a call and two retries
_HELD_AT_BREACH: Final = (
    "This tool call was not run: it needs a human's approval, and the turn ended at a tool "
    "call limit before one was asked for."
)
# span attributes: the journal entry's state for a repeat; the approval, and who gave it
TOOL_REPEAT: Final = "tooluse.tool.repeat"
TOOL_APPROVAL: Final = "tooluse.tool.approval"
TOOL_APPROVED_BY: Final = "tooluse.tool.approved_by"
_LISTED_TOOL_NAMES: Final = 20  # an unknown-tool error lists all names up to this many tools
_T = TypeVar("_T")


@dataclasses.dataclass(slots=True)  # not frozen: frozen dataclasses are slow to build
class _Job:
    """A call that will run: its position in the round, the tool, and the arguments to pass."""

    index: int
    call: ToolCall
    callback: ToolCallback
    arguments: str
    approval: Approval = "not needed"
    approved_by: str | None = None
    # what became of it, for the audit log
    outcome: Outcome = "ran"
    latency_ms: float | None = None


@dataclasses.dataclass(slots=True)
class _RoundPlan:
    """The decisions taken for each call of a round before anything runs."""

    responses: list[ToolResponse | None]
    jobs: list[_Job] = dataclasses.field(default_factory=list)
    held: list[PendingToolCall] = dataclasses.field(default_factory=list)
    held_at: list[int] = dataclasses.field(default_factory=list)  # their places in the round
    breach: tuple[LimitBreach, ToolResponse] | None = None
    earlier: set[int] = dataclasses.field(default_factory=set)  # answered before a pause
    denied: dict[int, str | None] = dataclasses.field(default_factory=dict)  # by whom
    # Some call was answered with an error without running (a denial, a limit, an unknown
    # tool, arguments too long): the model must read it, so the round cannot return directly.
    refused: bool = False


class ToolCallingManager:
    """Executes the tool calls of one model response and returns the extended conversation.

    The calls of a round run concurrently (results in call order); a ``sequential`` tool runs
    alone in its place. Failures the model can act on (unknown tool, bad or oversized
    arguments, tool errors, timeouts, limit breaches with ``on_limit_exceeded="return_error"``,
    denied approvals) become error responses (``is_error=True``); the rest raise.

    - ``exception_processor``: turns a tool's exception into the model's error text or raises
      (default :class:`DefaultToolExecutionExceptionProcessor`).
    - ``resolver`` / ``resolver_fallback``: where to look for a tool the request did not
      attach; consulted only when ``resolver_fallback`` is true.
    - ``unknown_tool``: ``"error"`` answers the model with the closest tool names,
      ``"raise"`` raises :class:`UnknownToolError` before any call of the round runs.
    - ``max_concurrency``: at most this many calls of a round run at once (``None``: all).
    - limits per turn: ``max_calls_per_tool``, ``max_total_tool_calls`` (``None``: unlimited),
      ``per_tool_limits``, ``excluded_from_limits``, ``on_limit_exceeded``.
    - ``max_identical_calls``: a tool called with the same arguments more often in a turn
      is answered with an error for the model instead of running again (a model stuck in a
      loop, or repeating a write); ``None``: no guard. Read-only tools and
      ``repeatable_tools`` are exempt (a screenshot, a status poll).
    - ``max_argument_chars``: longer argument strings are refused with an error response.
    - ``max_image_bytes``: a result whose images (a tool's ``ToolResult``) are larger in all
      is an error response (``None``: no limit). The default keeps each request under
      Anthropic's 5 MiB of base64 per image.
    - ``requires_approval``: a predicate ``(call, context)`` holding calls for a human, in
      addition to each tool's own ``metadata.requires_approval``.
    - ``tool_visibility``: which tools the caller of the tool context
      (:class:`~tooluse.calling.Caller`) may use; a call of any other is answered as a call
      of an unknown tool, and the loop offers only the allowed ones
      (:meth:`visible_options`).
    """

    def __init__(
        self,
        *,
        exception_processor: ToolExecutionExceptionProcessor | None = None,
        resolver: ToolCallbackResolver | None = None,
        resolver_fallback: bool = False,
        unknown_tool: Literal["error", "raise"] = "error",
        max_concurrency: int | None = None,
        max_calls_per_tool: int | None = 40,
        max_total_tool_calls: int | None = 150,
        per_tool_limits: Mapping[str, int] | None = None,
        excluded_from_limits: Iterable[str] = (),
        on_limit_exceeded: Literal["raise", "return_error"] = "raise",
        max_identical_calls: int | None = DEFAULT_MAX_IDENTICAL_CALLS,
        repeatable_tools: Iterable[str] = (),
        max_argument_chars: int | None = DEFAULT_MAX_ARGUMENT_CHARS,
        max_image_bytes: int | None = DEFAULT_MAX_IMAGE_BYTES,
        requires_approval: ApprovalPredicate | None = None,
        write_approval: WriteApproval = "none",
        journal: ToolCallJournal | None = None,
        audit: AuditSink | None = None,
        rate_limits: Mapping[str, RateLimit] | None = None,
        rate_limit_store: RateLimitStore | None = None,
        tool_visibility: ToolVisibility | None = None,
    ) -> None:
        if resolver_fallback and resolver is None:
            raise ValueError("resolver_fallback=True needs a resolver to fall back to")
        if unknown_tool not in ("error", "raise"):
            raise ValueError(f"unknown_tool must be 'error' or 'raise', got {unknown_tool!r}")
        if on_limit_exceeded not in ("raise", "return_error"):
            raise ValueError(
                f"on_limit_exceeded must be 'raise' or 'return_error', got {on_limit_exceeded!r}"
            )
        if write_approval not in WRITE_APPROVALS:
            raise ValueError(
                f"write_approval must be one of {', '.join(WRITE_APPROVALS)}, got "
                f"{write_approval!r}"
            )
        for what, value in (
            ("max_concurrency", max_concurrency),
            ("max_argument_chars", max_argument_chars),
            ("max_image_bytes", max_image_bytes),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value <= 0
            ):
                raise ValueError(f"{what} must be a positive integer or None, got {value!r}")
        self._processor: ToolExecutionExceptionProcessor = (
            exception_processor or DefaultToolExecutionExceptionProcessor()
        )
        self._resolver = resolver if resolver_fallback else None
        self._raise_on_unknown = unknown_tool == "raise"
        self._max_concurrency = max_concurrency
        self._limits = ToolCallLimits(
            max_calls_per_tool=max_calls_per_tool,
            max_total_tool_calls=max_total_tool_calls,
            per_tool_limits=per_tool_limits,
            excluded_from_limits=excluded_from_limits,
            max_identical_calls=max_identical_calls,
            repeatable_tools=repeatable_tools,
        )
        self._raise_on_limit = on_limit_exceeded == "raise"
        self._max_argument_chars = max_argument_chars
        self._max_image_bytes = max_image_bytes
        self._requires_approval = requires_approval
        self._write_approval: WriteApproval = write_approval
        self._journal = journal
        self._audit = audit
        self._rate_limits = dict(rate_limits or {})
        wrong = [
            name for name, limit in self._rate_limits.items() if not isinstance(limit, RateLimit)
        ]
        if wrong:
            raise TypeError(f"rate_limits maps tool names to RateLimit; not for {wrong}")
        self._rate_limit_store: RateLimitStore = rate_limit_store or InMemoryRateLimitStore()
        if tool_visibility is not None and not isinstance(tool_visibility, ToolVisibility):
            raise TypeError(
                "tool_visibility must have allows(caller, tool) -> bool (a ToolVisibility, e.g. "
                f"ToolAccessPolicy), got {tool_visibility!r}"
            )
        self._visibility = tool_visibility
        # The loop passes the same options every round: remember the last name index by the
        # identity of its (immutable) callback tuple, which the entry keeps alive.
        self._last_index: tuple[tuple[ToolCallback, ...], dict[str, ToolCallback]] | None = None

    # -- public API --------------------------------------------------------------------------

    def resolve_tool_definitions(self, options: ChatOptions) -> list[ToolDefinition]:
        """The definitions of the tools attached to ``options``, in order."""
        return [callback.definition for callback in options.tool_callbacks]

    def visible_options(self, options: ChatOptions) -> ChatOptions:
        """``options`` with only the tools that the caller of its tool context may use (the
        same object when all may be used): what the loop offers and tool search indexes."""
        if self._visibility is None or not options.tool_callbacks:
            return options
        caller = Caller.of(options.tool_context)
        allows = self._visibility.allows
        visible = tuple(callback for callback in options.tool_callbacks if allows(caller, callback))
        if len(visible) == len(options.tool_callbacks):
            return options
        return options.replace(tool_callbacks=visible)

    async def aexecute_tool_calls(
        self, prompt: Prompt, response: ChatResponse
    ) -> ToolExecutionResult:
        """Run the tool calls of the first generation of ``response`` that has any.

        Returns ``prompt.messages`` + that assistant message + one ``ToolResponseMessage``
        (responses in call order). Calls needing approval are held in
        ``pending_tool_calls``. Raises ``ValueError`` when no generation has tool calls and
        :class:`ToolCallLimitExceeded` on a breach with ``on_limit_exceeded="raise"``.
        """
        assistant = _first_tool_call_message(response)
        context = _tool_context(prompt.options)
        plan = self._plan(
            assistant.tool_calls,
            prompt.options,
            context,
            self._limits.tally(prompt.messages),
            answered={},
            decisions=None,
        )
        if plan.held:
            _check_resumable(assistant.tool_calls)
        return await self._finish(
            plan, prompt.messages, assistant, context, prior_return_direct=None
        )

    def execute_tool_calls(self, prompt: Prompt, response: ChatResponse) -> ToolExecutionResult:
        """Sync form of :meth:`aexecute_tool_calls` (not from inside a running event loop)."""
        return run_sync(
            self.aexecute_tool_calls(prompt, response),
            sync_name="execute_tool_calls()",
            async_name="aexecute_tool_calls()",
        )

    async def aresume_tool_calls(
        self, prompt: Prompt, decisions: Mapping[str, Decision]
    ) -> ToolExecutionResult:
        """Complete a round paused for approval.

        ``prompt.messages`` is the paused result's history (ending with the assistant message
        and, when some calls ran, their responses) and ``prompt.options`` attaches the tools.
        ``decisions`` maps every pending call id to :class:`Approve` or :class:`Deny`.
        Answered calls never run again; limits and the return-direct rule apply as in a round.
        """
        messages = prompt.messages
        assistant_index, assistant, answered, prior_return_direct = _paused_round(messages)
        calls = assistant.tool_calls
        _check_resumable(calls)
        _check_decisions(calls, answered, decisions)
        context = _tool_context(prompt.options)
        plan = self._plan(
            calls,
            prompt.options,
            context,
            # the round's own responses are counted in call order by _plan, as when it paused
            self._limits.tally(messages[:assistant_index]),
            answered=answered,
            decisions=decisions,
        )
        return await self._finish(
            plan, messages[:assistant_index], assistant, context, prior_return_direct
        )

    def resume_tool_calls(
        self, prompt: Prompt, decisions: Mapping[str, Decision]
    ) -> ToolExecutionResult:
        """Sync form of :meth:`aresume_tool_calls` (not from inside a running event loop)."""
        return run_sync(
            self.aresume_tool_calls(prompt, decisions),
            sync_name="resume_tool_calls()",
            async_name="aresume_tool_calls()",
        )

    # -- planning: what happens to each call, decided before anything runs ------------------

    def _plan(
        self,
        calls: Sequence[ToolCall],
        options: ChatOptions,
        context: ToolContext,
        tally: TurnTally,
        *,
        answered: Mapping[str, ToolResponse],
        decisions: Mapping[str, Decision] | None,
    ) -> _RoundPlan:
        tools = self._tool_index(options.tool_callbacks)
        visible = self._visible_to(context)
        if visible is not None:  # whatever tools are attached
            tools = {name: tool for name, tool in tools.items() if visible(tool)}
        plan = _RoundPlan(responses=[None] * len(calls))
        responses = plan.responses
        for index, call in enumerate(calls):
            earlier = answered.get(call.id)
            if earlier is not None:
                responses[index] = earlier
                plan.earlier.add(index)
                tally.count(call.name)  # counted in its place, as in the round that paused
                tally.seen(call)
                continue
            if plan.breach is not None:
                continue  # the round stops at a breach; later calls never run
            decision = decisions.get(call.id) if decisions is not None else None
            if isinstance(decision, Deny):
                responses[index] = _error(call, decision.message)
                plan.denied[index] = decision.by
                continue
            breach = tally.count(call.name)
            if breach is not None:
                breach_response = _error(call, breach.message)
                responses[index] = breach_response
                if self._raise_on_limit:
                    plan.breach = (breach, breach_response)
                continue
            callback = self._find_tool(call.name, tools, visible)
            if callback is None:
                responses[index] = _error(call, self._unknown_tool_message(call.name, tools))
                continue
            repeated = tally.repeat(call, read_only=callback.metadata.read_only)
            if repeated is not None:
                responses[index] = _error(call, repeated)
                continue
            arguments = call.arguments
            if isinstance(decision, Approve):
                arguments = decision.encoded_arguments(call.id) or arguments
            too_long = self._argument_error(call.name, arguments)
            if too_long is not None:
                responses[index] = _error(call, too_long)
                continue
            if decisions is None:
                reason = approval_reason(
                    call, callback, context, self._requires_approval, self._write_approval
                )
                if reason is not None:
                    plan.held.append(PendingToolCall(call.id, call.name, call.arguments, reason))
                    plan.held_at.append(index)
                    continue
            # empty or null arguments become "{}": providers stream no-argument calls as ""
            job = _Job(index, call, callback, normalise_arguments(arguments))
            if isinstance(decision, Approve):
                job.approval, job.approved_by = "approved", decision.by
            plan.jobs.append(job)
        if plan.breach is not None and plan.held:
            # The breach ends the turn: no decision can come for the held calls any more.
            for index in plan.held_at:
                responses[index] = _error(calls[index], _HELD_AT_BREACH)
            plan.held.clear()
        plan.refused = any(
            response is not None and call.id not in answered
            for call, response in zip(calls, responses, strict=True)
        )
        return plan

    def _tool_index(self, callbacks: tuple[ToolCallback, ...]) -> dict[str, ToolCallback]:
        last = self._last_index
        if last is not None and last[0] is callbacks:
            return last[1]
        index: dict[str, ToolCallback] = {}
        for callback in callbacks:
            if not is_tool_callback(callback):
                raise TypeError(
                    f"ChatOptions.tool_callbacks must hold ToolCallbacks, got {callback!r}; "
                    "convert functions and objects with tooluse.tool_callbacks(...)"
                )
            index.setdefault(callback.definition.name, callback)  # first match wins
        if type(callbacks) is tuple:  # a list could change before the next round
            self._last_index = (callbacks, index)
        return index

    def _visible_to(self, context: ToolContext) -> Callable[[ToolCallback], bool] | None:
        """Whether the caller of ``context`` may use a tool; ``None``: any tool."""
        if self._visibility is None:
            return None
        return functools.partial(self._visibility.allows, Caller.of(context))

    def _find_tool(
        self,
        name: str,
        tools: Mapping[str, ToolCallback],
        visible: Callable[[ToolCallback], bool] | None,
    ) -> ToolCallback | None:
        callback = tools.get(name)
        if callback is None and self._resolver is not None and name.strip():
            callback = self._resolver.resolve(name)
            if callback is not None and visible is not None and not visible(callback):
                callback = None  # as if the resolver had none
        if callback is None and self._raise_on_unknown:
            raise UnknownToolError(name, f"No ToolCallback found for tool name: {name}")
        return callback

    def _unknown_tool_message(self, name: str, tools: Mapping[str, ToolCallback]) -> str:
        logger.warning(
            "The model called the unknown tool %r; it gets an error result. A provider may have "
            "shortened or changed the name.",
            _shorten(name),
        )
        text = f"Unknown tool '{_shorten(name)}': no tool of that name is available."
        import difflib  # only for a model's mistake: not loaded with the loop

        by_lower_name = {known.lower(): known for known in tools}
        close = difflib.get_close_matches(name.lower(), by_lower_name, n=3, cutoff=0.6)
        if close:
            suggestions = " or ".join(f"'{by_lower_name[c]}'" for c in close)
            return f"{text} Did you mean {suggestions}?"
        if not tools:
            return f"{text} No tools are available in this request."
        if len(tools) <= _LISTED_TOOL_NAMES:
            return f"{text} Available tools: {', '.join(tools)}."
        return f"{text} Call only the tools you were given."

    def _argument_error(self, name: str, arguments: str) -> str | None:
        limit = self._max_argument_chars
        if limit is None or len(arguments) <= limit:
            return None
        return (
            f"The arguments for tool '{name}' are {len(arguments)} characters long; the limit "
            f"is {limit}. Call the tool again with shorter arguments."
        )

    # -- execution ---------------------------------------------------------------------------

    async def _finish(
        self,
        plan: _RoundPlan,
        base: Sequence[Message],
        assistant: AssistantMessage,
        context: ToolContext,
        prior_return_direct: bool | None,
    ) -> ToolExecutionResult:
        responses = plan.responses
        with collected_usage() as spent:
            ran = await self._run_jobs(plan.jobs, context)
        for job, response in zip(plan.jobs, ran, strict=True):
            responses[job.index] = response
        return_direct = False if plan.refused else _return_direct(plan.jobs, prior_return_direct)
        answered = tuple(r for r in responses if r is not None)
        # A paused round's results say whether every call that ran was return-direct, so
        # the AND rule spans the round across a resume.
        executed_return_direct = return_direct if plan.held else None
        history: tuple[Message, ...] = (*base, assistant)
        if answered:
            results = ToolResponseMessage(
                responses=answered, executed_return_direct=executed_return_direct
            )
            history = (*history, results)
        result = ToolExecutionResult(
            conversation_history=history,
            return_direct=bool(return_direct) and not plan.held,
            pending_tool_calls=tuple(plan.held),
            usage=sum_usage(*spent),
        )
        if self._audit is not None:
            write = self._audit.record(_audit_records(plan, assistant.tool_calls, context))
            later = AUDIT_WRITES.get()
            if later is None:
                await write
            else:  # the run waits for it before it ends
                later.add(write)
        if plan.breach is not None:
            breach, breach_response = plan.breach
            raise ToolCallLimitExceeded(
                tool_name=breach.tool_name,
                limit=breach.limit,
                partial_result=result,
                breach_response=breach_response,
            )
        return result

    async def _run_jobs(self, jobs: Sequence[_Job], context: ToolContext) -> list[ToolResponse]:
        """Results in job order; concurrent groups split at ``sequential`` tools."""
        if len(jobs) <= 1:
            return [await self._execute(job, context) for job in jobs]
        results: list[ToolResponse] = []
        group: list[_Job] = []
        for job in jobs:
            if job.callback.metadata.sequential:
                results += await self._run_group(group, context)
                group = []
                results.append(await self._execute(job, context))
            else:
                group.append(job)
        results += await self._run_group(group, context)
        return results

    async def _run_group(self, group: Sequence[_Job], context: ToolContext) -> list[ToolResponse]:
        # No task for a single call, nor for inline ones: they would run one after another
        # in their tasks anyway (an inline call never suspends).
        if len(group) <= 1 or all(_runs_inline(job.callback) for job in group):
            return [await self._execute(job, context) for job in group]
        bound = self._max_concurrency
        if bound is None or bound >= len(group):
            return await _gather([self._execute(job, context) for job in group])
        semaphore = asyncio.Semaphore(bound)
        return await _gather([self._execute_bounded(semaphore, job, context) for job in group])

    async def _execute_bounded(
        self, semaphore: asyncio.Semaphore, job: _Job, context: ToolContext
    ) -> ToolResponse:
        async with semaphore:
            return await self._execute(job, context)

    async def _execute(self, job: _Job, context: ToolContext) -> ToolResponse:
        call = job.call
        attributes = {
            _tracing.GEN_AI_OPERATION_NAME: "execute_tool",
            _tracing.GEN_AI_TOOL_NAME: call.name,
            _tracing.GEN_AI_TOOL_CALL_ID: call.id,
            _tracing.GEN_AI_TOOL_TYPE: "function",
        }
        with _tracing.start_span(f"execute_tool {call.name}", attributes) as span:
            for key, value in identity_attributes(context).items():
                span.set_attribute(key, value)
            if job.approval != "not needed":
                span.set_attribute(TOOL_APPROVAL, job.approval)
            if job.approved_by is not None:
                span.set_attribute(TOOL_APPROVED_BY, job.approved_by)
            started = time.perf_counter()
            try:
                return await self._journaled(job, context, span)
            finally:
                job.latency_ms = (time.perf_counter() - started) * 1000

    async def _journaled(
        self, job: _Job, context: ToolContext, span: _tracing.SpanHandle
    ) -> ToolResponse:
        call = job.call
        limit = self._rate_limits.get(call.name)
        if limit is not None:
            wait = await self._rate_limit_store.take(
                limit.bucket(call.name, context),
                capacity=limit.calls,
                per_seconds=limit.per_seconds,
            )
            if wait is not None:
                job.outcome = "refused"
                span.set_error("rate_limited", "the tool's rate limit was reached")
                return _error(call, limit.message(call.name, wait))
        journal = self._journal
        key = None
        if journal is not None:
            key = idempotency_key_of(job.callback, job.arguments, context)
        if journal is None or key is None:
            response, outcome = await self._run(job, context, span)
            job.outcome = "ran" if outcome == "ran" else "failed"
            return response
        entry = await journal.begin(key, tool=call.name, call_id=call.id)
        if entry is not None:
            span.set_attribute(TOOL_REPEAT, entry.state)
            job.outcome = "repeat"
            text, is_error = repeat_text(entry)
            return ToolResponse(id=call.id, name=call.name, data=text, is_error=is_error)
        # A crash from here to finish() leaves the key "started": never run twice.
        response, outcome = await self._run(job, context, span)
        job.outcome = "ran" if outcome == "ran" else "failed"
        if outcome == "ran":
            await journal.finish(key, response.data)
        elif outcome == "raised":
            await journal.release(key)
        return response

    async def _run(
        self, job: _Job, context: ToolContext, span: _tracing.SpanHandle
    ) -> tuple[ToolResponse, Literal["ran", "raised", "timed_out"]]:
        """The call's response, and whether the tool returned, raised, or timed out (and may
        still be acting)."""
        call = job.call
        timeout = job.callback.metadata.timeout
        deadline = None if timeout is None else asyncio.timeout(timeout)
        try:
            if deadline is None:
                result = await job.callback.acall(job.arguments, context)
            else:
                async with deadline:
                    result = await job.callback.acall(job.arguments, context)
        except MemoryError:
            raise
        except Exception as exc:
            if isinstance(exc, TimeoutError) and deadline is not None and deadline.expired():
                span.set_error("timeout", "the tool timed out")
                message = f"Tool '{call.name}' did not finish within {timeout:g} seconds."
                return _error(call, message), "timed_out"
            text = self._processor.process(exc, call.name)
            span.set_error(_tracing.error_type_of(exc), text)
            return _error(call, text), "raised"
        if result is None:
            result = ""
        elif isinstance(result, ToolResult):
            return image_response(call, result, self._max_image_bytes), "ran"
        elif not isinstance(result, str):
            raise TypeError(
                f"Tool '{call.name}' returned {type(result).__name__}; a ToolCallback must "
                "return str or ToolResult"
            )
        return ToolResponse(id=call.id, name=call.name, data=result), "ran"


# -- helpers -----------------------------------------------------------------------------------


def _first_tool_call_message(response: ChatResponse) -> AssistantMessage:
    for generation in response.generations:
        if generation.message.tool_calls:
            return generation.message
    raise ValueError("No tool call requested by the chat model")


def _tool_context(options: ChatOptions) -> ToolContext:
    context = options.tool_context
    return context if isinstance(context, ToolContext) else ToolContext(context)


def _runs_inline(callback: ToolCallback) -> bool:
    """Whether ``callback`` declares that its calls run on the loop's thread without
    suspending (``FunctionToolCallback(inline=True)``)."""
    return getattr(callback, "inline", False) is True


def _error(call: ToolCall, text: str) -> ToolResponse:
    return ToolResponse(id=call.id, name=call.name, data=text, is_error=True)


def _shorten(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."


def _return_direct(jobs: Sequence[_Job], prior: bool | None) -> bool | None:
    """AND of ``return_direct`` over the executed calls (``None`` when none ran); a round that
    mixes both kinds is logged, since its direct results then go back to the model."""
    flags = [job.callback.metadata.return_direct for job in jobs]
    if prior is not None:
        flags.append(prior)
    if not flags:
        return None
    if any(flags) and not all(flags):
        logger.warning(
            "A round mixed return-direct and regular tools (%s): return_direct applies only "
            "when every executed tool is return-direct, so all results go back to the model.",
            ", ".join(sorted({job.call.name for job in jobs})),
        )
        return False
    return flags[0]


async def _gather(coroutines: Sequence[Coroutine[Any, Any, _T]]) -> list[_T]:
    """``asyncio.gather`` that, when one call raises, cancels and awaits the others before the
    exception propagates (unwrapped), so no tool keeps running unobserved."""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in coroutines]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _audit_records(
    plan: _RoundPlan, calls: Sequence[ToolCall], context: ToolContext
) -> list[AuditRecord]:
    """A record per call of the round not answered before a pause."""
    user, tenant, conversation = caller_of(context)
    roles = roles_of(context)
    jobs = {job.index: job for job in plan.jobs}
    held = set(plan.held_at)
    now = time.time()
    records = []
    for index, call in enumerate(calls):
        if index in plan.earlier:
            continue
        job, response = jobs.get(index), plan.responses[index]
        outcome: Outcome
        approval: Approval = "not needed"
        by = None
        if job is not None:
            outcome, approval, by = job.outcome, job.approval, job.approved_by
        elif index in held:
            outcome, approval = "held", "pending"
        else:
            outcome = "refused"
            if index in plan.denied:
                approval, by = "denied", plan.denied[index]
        records.append(
            AuditRecord(
                at=now,
                tool=call.name,
                call_id=call.id,
                arguments=job.arguments if job is not None else call.arguments,
                outcome=outcome,
                result="" if response is None else response.data,
                is_error=response is not None and response.is_error,
                latency_ms=None if job is None else job.latency_ms,
                approval=approval,
                approved_by=by,
                user=user,
                tenant=tenant,
                conversation=conversation,
                roles=roles,
            )
        )
    return records


def _paused_round(
    messages: Sequence[Message],
) -> tuple[int, AssistantMessage, dict[str, ToolResponse], bool | None]:
    """Locate the paused round: the last assistant message with tool calls and its index, the
    responses already given, and whether the calls executed so far were all return-direct."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage) and message.tool_calls:
            break
    else:
        raise ValueError("prompt.messages has no assistant message with tool calls to resume")
    tail = messages[index + 1 :]
    if not tail:
        return index, message, {}, None
    partial = tail[0]
    if len(tail) > 1 or not isinstance(partial, ToolResponseMessage):
        raise ValueError(
            "The last tool-call round is followed by other messages than its tool responses; "
            "only a paused round (the assistant message, then at most one ToolResponseMessage) "
            "can be resumed"
        )
    call_ids = {call.id for call in message.tool_calls}
    stray = [r.id for r in partial.responses if r.id not in call_ids]
    if stray:
        raise ValueError(f"Tool responses {stray} answer no call of the round being resumed")
    answered = {r.id: r for r in partial.responses}
    return index, message, answered, partial.executed_return_direct


def _check_resumable(calls: Sequence[ToolCall]) -> None:
    """Decisions are matched by id, so a round with held calls needs unique, non-empty ids."""
    ids = [call.id for call in calls]
    if "" in ids or len(set(ids)) != len(ids):
        raise ValueError(
            f"Tool calls held for approval need unique, non-empty ids to be matched with "
            f"decisions; the round has ids {ids}"
        )


def _check_decisions(
    calls: Sequence[ToolCall],
    answered: Mapping[str, ToolResponse],
    decisions: Mapping[str, Decision],
) -> None:
    pending = [call.id for call in calls if call.id not in answered]
    if not pending:
        raise ValueError("Every tool call of the last round already has a response")
    not_pending = [key for key in decisions if key not in set(pending)]
    if not_pending:
        raise ValueError(
            f"Decisions were given for tool calls that are not pending: {not_pending}; the "
            f"pending calls are {pending}"
        )
    missing = [call_id for call_id in pending if call_id not in decisions]
    if missing:
        raise ValueError(f"No decision was given for the pending tool calls {missing}")
    wrong = {k: type(v).__name__ for k, v in decisions.items() if not isinstance(v, Approve | Deny)}
    if wrong:
        raise TypeError(f"Decisions must be Approve or Deny, got {wrong}")
