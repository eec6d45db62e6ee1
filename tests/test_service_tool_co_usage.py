"""``tooluse serve`` with tool search learns which tools each tenant's turns call together: a
search that finds one offers the others, for that tenant only, among the tools the caller may
see; learned from the audit log at start, then from each turn (``tool_co_usage``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _service_helpers import config, parse_sse, running
from test_service_users import keys_file
from tooluse.calling import Caller, ToolAccess, ToolAccessPolicy
from tooluse.cli import build_parser
from tooluse.cli._options import config_from_arguments
from tooluse.messages import Prompt, ToolResponseMessage, UserMessage
from tooluse.search import ToolCoUsage
from tooluse.service import create_app
from tooluse.service._co_usage import TenantCoUsage
from tooluse.service._service import TOOL_SEARCH_ABOVE
from tooluse.testing import FunctionModel, ResponseLike, tool_call
from tooluse.tools import tool


def _read_only(name: str, description: str) -> object:
    def run(target: str = "") -> str:
        return f"{name} done"

    return tool(name=name, description=description, read_only=True)(run)


CAR = (
    _read_only("start_engine", "Start the car's engine"),
    _read_only("press_brake", "Press the brake pedal"),
    *(_read_only(f"archive_{n}", f"Look up a record of archive {n}") for n in range(24)),
)
TOGETHER = "start engine press brake"  # a question whose search finds both
ALONE = "start engine"  # one whose search finds start_engine only, without usage


def _router(prompt: Prompt) -> ResponseLike:
    """Searches with the question for two tools, then calls each tool found that the
    question names (``start_engine`` for "start engine", ``press_brake`` for "brake")."""
    offered = {callback.definition.name for callback in prompt.options.tool_callbacks}
    question = next(m.text for m in reversed(prompt.messages) if isinstance(m, UserMessage))
    if not offered:
        return "Done."
    last = prompt.messages[-1]
    if not isinstance(last, ToolResponseMessage):
        return tool_call("toolSearchTool", {"query": question, "max_results": 2}, id="search")
    if last.responses[0].name != "toolSearchTool":
        return ""
    wanted = [("start_engine", "start engine"), ("press_brake", "brake")]
    calls = [
        tool_call(name, {}, id=f"call-{name}")
        for name, words in wanted
        if words in question and name in offered
    ]
    return calls or ""


HEADERS = {
    None: {},
    "ann": {"Authorization": "Bearer ann-key"},  # acme, customer
    "sam": {"Authorization": "Bearer sam-key"},  # acme, support
    "bob": {"Authorization": "Bearer bob-key"},  # globex
    "shared": {"Authorization": "Bearer s3cret"},  # the service's one key: no tenant
}


async def _found(client: httpx.AsyncClient, question: str, user: str | None = None) -> list[str]:
    """What the turn's search found; its tools are called (learned) as the router wants."""
    response = await client.post("/api/chat", json={"message": question}, headers=HEADERS[user])
    assert response.status_code == 200, response.text
    events = parse_sse(response.text)
    assert events[-1][0] == "done", events
    results = [data for name, data in events if name == "tool_result"]
    assert results[0]["name"] == "toolSearchTool"
    found: list[str] = json.loads(results[0]["result"])
    return found


@contextlib.asynccontextmanager
async def _service(db: Path, **changes: Any) -> AsyncIterator[httpx.AsyncClient]:
    changes.setdefault("model", FunctionModel(_router))
    changes.setdefault("tools", CAR)
    async with running(create_app(config(db, **changes))) as client:
        yield client


async def test_tools_called_together_are_then_offered_together(tmp_path: Path) -> None:
    async with _service(tmp_path / "s.db") as client:
        assert (await _found(client, ALONE))[0] == "start_engine"
        assert "press_brake" not in await _found(client, ALONE)
        for _ in range(3):  # ToolCoUsage's min_support
            assert sorted(await _found(client, TOGETHER)) == ["press_brake", "start_engine"]
        assert await _found(client, ALONE) == ["start_engine", "press_brake"]


async def test_one_tenant_s_usage_never_lifts_anything_for_another(tmp_path: Path) -> None:
    async with _service(
        tmp_path / "s.db", authenticators=[keys_file(tmp_path)], api_key="s3cret"
    ) as client:
        for _ in range(3):
            await _found(client, TOGETHER, "ann")
        assert await _found(client, ALONE, "sam") == ["start_engine", "press_brake"]  # acme
        assert "press_brake" not in await _found(client, ALONE, "bob")  # globex
        assert "press_brake" not in await _found(client, ALONE, "shared")  # no tenant
        for _ in range(3):
            await _found(client, TOGETHER, "shared")
        assert await _found(client, ALONE, "shared") == ["start_engine", "press_brake"]
        assert "press_brake" not in await _found(client, ALONE, "bob")


async def test_a_tool_hidden_from_the_caller_is_never_offered_as_a_companion(
    tmp_path: Path,
) -> None:
    support_only = ToolAccessPolicy(tools={"press_brake": ToolAccess(allow_roles=["support"])})
    async with _service(
        tmp_path / "s.db", authenticators=[keys_file(tmp_path)], tool_visibility=support_only
    ) as client:
        for _ in range(3):
            await _found(client, TOGETHER, "sam")
        assert await _found(client, ALONE, "sam") == ["start_engine", "press_brake"]
        assert "press_brake" not in await _found(client, ALONE, "ann")  # acme, but a customer


async def test_turned_off_nothing_is_learned_or_lifted(tmp_path: Path) -> None:
    async with _service(tmp_path / "s.db", tool_co_usage=False) as client:
        for _ in range(3):
            await _found(client, TOGETHER)
        assert "press_brake" not in await _found(client, ALONE)
    parser = build_parser(["serve"])
    assert config_from_arguments(parser.parse_args(["serve", "--model", "test"])).tool_co_usage
    off = parser.parse_args(["serve", "--model", "test", "--no-tool-co-usage"])
    assert config_from_arguments(off).tool_co_usage is False


async def test_without_tool_search_there_is_nothing_to_learn(tmp_path: Path) -> None:
    app = create_app(config(tmp_path / "s.db", tools=CAR[:TOOL_SEARCH_ABOVE]))
    async with running(app):
        assert app.state.service.tool_search is None and app.state.service.co_usage is None


async def _seeded_by_the_log(db: Path, **changes: Any) -> None:
    async with _service(db, **changes) as client:
        for _ in range(3):
            await _found(client, TOGETHER)
    async with _service(db, **changes) as client:  # a restart, or another worker
        assert await _found(client, ALONE) == ["start_engine", "press_brake"]


async def test_the_audit_log_seeds_a_new_service(tmp_path: Path) -> None:
    await _seeded_by_the_log(tmp_path / "s.db")


async def test_the_audit_log_seeds_a_new_service_on_postgres(
    postgres_url: str, tmp_path: Path
) -> None:
    await _seeded_by_the_log(tmp_path / "unused.db", database_url=postgres_url)


class _Log:
    """An audit log whose recent calls are given, read counted."""

    def __init__(self, *turns: tuple[str, ...]) -> None:
        self.reads: list[str | None] = []
        self.turns = turns

    def recent_calls(self, *, tenant: str | None, **_: Any) -> list[Any]:
        self.reads.append(tenant)
        return [(float(n), name, None) for n, turn in enumerate(self.turns) for name in turn]


async def test_tenants_are_learned_once_refreshed_and_bounded() -> None:
    now = [1000.0]
    log = _Log(("a",), ("b",))
    usages = TenantCoUsage(log, max_tenants=2, refresh_seconds=60, clock=lambda: now[0])
    acme, globex, initech = (Caller("u", tenant) for tenant in ("acme", "globex", "initech"))
    assert usages.usage_of(acme) is None  # not learned yet: no I/O here
    await usages.prepare("acme")
    await usages.prepare("acme")
    first = usages.usage_of(acme)
    assert first is not None and first.turns == 2 and log.reads == ["acme"]
    usages.observe("acme", ["a", "toolSearchTool", "b"])
    usages.observe("acme", ["toolSearchTool"])  # nothing called: no turn
    assert first.turns == 3 and first.count("toolSearchTool") == 0
    usages.observe("globex", ["a"])  # not learned: left to the log
    assert usages.usage_of(globex) is None
    now[0] += 61
    await usages.prepare("acme")  # learned again, with the other workers' turns
    await _refreshed(usages, acme, first)
    assert log.reads == ["acme", "acme"]
    await usages.prepare("globex")
    usages.usage_of(acme)  # used: globex is the least recently used now
    await usages.prepare("initech")
    assert usages.usage_of(globex) is None and usages.usage_of(initech) is not None
    assert usages.usage_of(acme) is not None


async def _refreshed(usages: TenantCoUsage, caller: Caller, before: ToolCoUsage) -> ToolCoUsage:
    for _ in range(500):
        usage = usages.usage_of(caller)
        if usage is not before and usage is not None:
            return usage
        await asyncio.sleep(0.01)
    raise AssertionError("the usage was not learned again within 5 s")


async def test_a_refresh_runs_beside_the_turns_that_go_on_with_the_old_usage() -> None:
    now = [1000.0]
    release = threading.Event()

    class Slow(_Log):
        def recent_calls(self, *, tenant: str | None, **options: Any) -> list[Any]:
            if len(self.reads) > 0:  # the refresh waits until the turns have run
                release.wait(5)
            return super().recent_calls(tenant=tenant, **options)

    log = Slow(("a", "b"), ("a", "b"), ("a", "b"))
    usages = TenantCoUsage(log, refresh_seconds=60, clock=lambda: now[0])
    acme = Caller("u", "acme")
    await usages.prepare("acme")
    first = usages.usage_of(acme)
    assert first is not None and first.turns == 6  # no conversation: a call is a turn
    now[0] += 61
    for _ in range(3):  # none waits for the log; one refresh at a time
        await asyncio.wait_for(usages.prepare("acme"), 1)
        assert usages.usage_of(acme) is first
    log.turns += (("c",),)  # another worker's turn, in the log the refresh reads
    release.set()
    assert (await _refreshed(usages, acme, first)).turns == 7
    assert log.reads == ["acme", "acme"]


async def test_a_refresh_that_fails_keeps_what_was_learned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [1000.0]

    class FailsLater(_Log):
        def recent_calls(self, *, tenant: str | None, **options: Any) -> list[Any]:
            if self.reads:
                self.reads.append(tenant)
                raise OSError("disk I/O error")
            return super().recent_calls(tenant=tenant, **options)

    log = FailsLater(("a", "b"))
    usages = TenantCoUsage(log, refresh_seconds=60, clock=lambda: now[0])
    acme = Caller("u", "acme")
    await usages.prepare("acme")
    first = usages.usage_of(acme)
    now[0] += 61
    await usages.prepare("acme")
    for _ in range(500):
        if "with what was learned before" in caplog.text:
            break
        await asyncio.sleep(0.01)
    assert "Could not learn the tools tenant 'acme' uses together" in caplog.text
    assert usages.usage_of(acme) is first


async def test_a_log_that_cannot_be_read_leaves_the_search_without_usage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def recent_calls(self, **_: Any) -> list[Any]:
            raise OSError("disk I/O error")

    usages = TenantCoUsage(Broken())
    await usages.prepare("acme")
    assert usages.usage_of(Caller(tenant_id="acme")) is None
    assert "Could not learn the tools tenant 'acme' uses together" in caplog.text
    assert "disk I/O error" in caplog.text


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"window_seconds": 0}, "window_seconds must be > 0"),
        ({"refresh_seconds": -1}, "refresh_seconds must be > 0 or None"),
        ({"max_records": 0}, "max_records must be an integer of at least 1"),
        ({"max_tenants": 1.5}, "max_tenants must be an integer"),
        ({"min_support": 0}, "min_support must be an integer"),
    ],
)
def test_bad_settings_are_refused_by_name(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TenantCoUsage(_Log(), **options)
