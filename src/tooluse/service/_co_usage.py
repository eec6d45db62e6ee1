"""The tools each tenant's turns call together, for tool search to lift a found tool's
companions (:class:`~tooluse.search.ToolCoUsage`), learned per tenant and never shared.

A tenant's usage is learned from the audit log the first time one of its turns runs on this
worker (a window of its recent calls), then from each of its turns that ends here; every
``refresh_seconds`` it is learned from the log again, which then holds the turns the other
workers ran too. Only the calls that gave a result count: not the search tool, not a call
refused, held for approval or answered with an error.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
from collections.abc import AsyncGenerator, Callable, Collection, Iterable, Mapping
from typing import Any, Final, Protocol

from tooluse.calling import Caller
from tooluse.qa import QaEvent, ToolResultEvent
from tooluse.search import TOOL_SEARCH_TOOL_NAME, ToolCoUsage
from tooluse.search._types import check_count

__all__ = [
    "DEFAULT_CO_USAGE_RECORDS",
    "DEFAULT_CO_USAGE_REFRESH",
    "DEFAULT_CO_USAGE_TENANTS",
    "DEFAULT_CO_USAGE_WINDOW",
    "RecentCalls",
    "TenantCoUsage",
]

logger = logging.getLogger("tooluse.service")

DEFAULT_CO_USAGE_WINDOW: Final = 30 * 24 * 3600.0
"""Seconds of a tenant's audit records its usage is learned from: a month of habits."""
DEFAULT_CO_USAGE_RECORDS: Final = 10_000
"""At most this many of them, the newest (a few thousand turns: tens of milliseconds)."""
DEFAULT_CO_USAGE_TENANTS: Final = 1_000
"""Tenants whose usage a worker holds; the least recently used beyond are forgotten (and
learned from the log again when they come back)."""
DEFAULT_CO_USAGE_REFRESH: Final = 900.0
"""Seconds after which a tenant's usage is learned from the log again, with the other
workers' turns: one read of its window per tenant per quarter of an hour."""


class RecentCalls(Protocol):
    """An audit log that gives a tenant's recent calls, ``(at, tool, conversation)``
    (:class:`~tooluse.calling.SqliteAuditLog`, :class:`~tooluse.calling.PostgresAuditLog`)."""

    def recent_calls(
        self, *, tenant: str | None, since: float, limit: int, ignore: Collection[str] = ()
    ) -> list[tuple[float, str, str | None]]: ...


class _Learned:
    __slots__ = ("learned_at", "usage")

    def __init__(self, usage: ToolCoUsage, learned_at: float) -> None:
        self.usage = usage
        self.learned_at = learned_at


class TenantCoUsage:
    """One :class:`ToolCoUsage` per tenant (``None``: the callers of no tenant, e.g. every
    caller of a service without users), for at most ``max_tenants`` tenants (least recently
    used forgotten). :meth:`usage_of` is the tool-search advisor's ``co_usage`` (no I/O);
    :meth:`learn` reads the log for a tenant not learned yet, or learned more than
    ``refresh_seconds`` ago (``None``: never again), from the records of the last
    ``window_seconds``, at most ``max_records``; :meth:`observe` counts a turn that ended.
    ``settings``: the :class:`ToolCoUsage` constructor's."""

    def __init__(
        self,
        log: RecentCalls,
        *,
        window_seconds: float = DEFAULT_CO_USAGE_WINDOW,
        max_records: int = DEFAULT_CO_USAGE_RECORDS,
        max_tenants: int = DEFAULT_CO_USAGE_TENANTS,
        refresh_seconds: float | None = DEFAULT_CO_USAGE_REFRESH,
        clock: Callable[[], float] = time.time,
        **settings: Any,
    ) -> None:
        if not window_seconds > 0:
            raise ValueError(f"window_seconds must be > 0, got {window_seconds!r}")
        if refresh_seconds is not None and not refresh_seconds > 0:
            raise ValueError(f"refresh_seconds must be > 0 or None, got {refresh_seconds!r}")
        check_count("max_records", max_records)
        check_count("max_tenants", max_tenants)
        ToolCoUsage(**settings)  # bad settings fail now, not at the first turn
        self._log = log
        self.window_seconds = window_seconds
        self.max_records = max_records
        self.max_tenants = max_tenants
        self.refresh_seconds = refresh_seconds
        self._clock = clock
        self._settings = settings
        self._learned: collections.OrderedDict[str | None, _Learned] = collections.OrderedDict()
        self._lock = threading.Lock()
        # One read of the log at a time per tenant: its concurrent first turns wait for it.
        self._reading: dict[str | None, threading.Lock] = {}
        self._refreshing: set[str | None] = set()  # tenants whose refresh is under way
        self._refresh_tasks: set[asyncio.Task[None]] = set()

    def usage_of(self, caller: Caller) -> ToolCoUsage | None:
        """The usage of the caller's tenant, learned (``None``: not yet)."""
        with self._lock:
            learned = self._learned.get(caller.tenant_id)
            if learned is None:
                return None
            self._learned.move_to_end(caller.tenant_id)
            return learned.usage

    def _due(self, tenant: str | None) -> bool:
        learned = self._learned.get(tenant)
        return learned is None or (
            self.refresh_seconds is not None
            and self._clock() - learned.learned_at >= self.refresh_seconds
        )

    async def prepare(self, tenant: str | None) -> None:
        """Have the tenant's usage learned before its turn runs: a look-up when it is,
        otherwise :meth:`learn` in a thread. A refresh runs beside the turn, which searches
        with the usage learned before (one refresh at a time per tenant). A log that cannot
        be read is logged, and the turn searches without the tenant's usage (it is tried
        again at its next turn)."""
        with self._lock:
            due = self._due(tenant)
            known = tenant in self._learned
            if due and known:
                if tenant in self._refreshing:
                    return
                self._refreshing.add(tenant)
        if not due:
            return
        if not known:
            await self._learn_in_thread(tenant, "its searches go on without them")
            return
        task = asyncio.get_running_loop().create_task(self._refresh(tenant))
        self._refresh_tasks.add(task)  # held: the loop keeps only a weak reference
        task.add_done_callback(self._refresh_tasks.discard)

    async def _refresh(self, tenant: str | None) -> None:
        try:
            await self._learn_in_thread(tenant, "its searches go on with what was learned before")
        finally:
            with self._lock:
                self._refreshing.discard(tenant)

    async def _learn_in_thread(self, tenant: str | None, meanwhile: str) -> None:
        try:
            await asyncio.to_thread(self.learn, tenant)
        except Exception:
            logger.exception(
                "Could not learn the tools tenant %r uses together from the audit log; %s",
                tenant,
                meanwhile,
            )

    def learn(self, tenant: str | None) -> None:
        """Learn the tenant's usage from the log, unless it was learned meanwhile or not
        long ago (blocking: one query)."""
        with self._lock:
            reading = self._reading.setdefault(tenant, threading.Lock())
        with reading:
            with self._lock:
                if not self._due(tenant):
                    return
            now = self._clock()
            calls = self._log.recent_calls(
                tenant=tenant,
                since=now - self.window_seconds,
                limit=self.max_records,
                ignore=(TOOL_SEARCH_TOOL_NAME,),
            )
            usage = ToolCoUsage.from_calls(calls, **self._settings)
            with self._lock:
                self._learned[tenant] = _Learned(usage, now)
                self._learned.move_to_end(tenant)
                while len(self._learned) > self.max_tenants:
                    self._learned.popitem(last=False)
                self._reading.pop(tenant, None)

    def observe(self, tenant: str | None, tools: Iterable[str]) -> None:
        """Count a turn of the tenant's that called ``tools`` (the search tool ignored). A
        tenant not learned (forgotten meanwhile) is left: its next turn learns from the log,
        which holds this one."""
        called = [name for name in tools if name != TOOL_SEARCH_TOOL_NAME]
        if not called:
            return
        with self._lock:
            learned = self._learned.get(tenant)
        if learned is not None:
            learned.usage.observe(called)

    async def learning(
        self, events: AsyncGenerator[QaEvent, None], tool_context: Mapping[str, Any] | None
    ) -> AsyncGenerator[QaEvent, None]:
        """``events`` (a turn of the pipeline for the caller of ``tool_context``), with the
        caller's tenant's usage learned before it runs and the tools whose results came
        without an error counted once it has ended (a turn that failed or was left is in the
        log for the next learning)."""
        tenant = Caller.of(tool_context or {}).tenant_id
        await self.prepare(tenant)
        called: list[str] = []
        async with contextlib.aclosing(events):
            async for event in events:
                if isinstance(event, ToolResultEvent) and not event.is_error:
                    called.append(event.name)
                yield event
        self.observe(tenant, called)
