"""A stdio MCP server killed under the service and under the library: the documented reconnect,
calls bounded while it runs, ``/healthz`` showing the recovery, and a clean shutdown.

The server is the PyPI ``mcp-server-time`` (the test extra), killed with SIGKILL as a crash
would end it. Its start takes about a second: each test starts it two or three times.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from _service_helpers import config, parse_sse, running
from tooluse.mcp import McpServerError, McpToolProvider, StdioServer
from tooluse.messages import Prompt, ToolResponseMessage
from tooluse.service import create_app
from tooluse.testing import FunctionModel, ResponseLike, tool_call

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

TIME_ARGUMENTS = ["-m", "mcp_server_time", "--local-timezone", "UTC"]


def time_server(name: str = "time") -> StdioServer:
    return StdioServer(sys.executable, TIME_ARGUMENTS, name=name)


def time_servers() -> list[int]:
    """This process's children that run ``mcp-server-time``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command_line = (entry / "cmdline").read_bytes()
        except (OSError, IndexError):  # ended meanwhile
            continue
        if parent == os.getpid() and b"mcp_server_time" in command_line:
            found.append(int(entry.name))
    return found


def kill_time_server() -> None:
    (pid,) = time_servers()
    os.kill(pid, signal.SIGKILL)


async def eventually(condition: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.02)


async def utc_now(provider: McpToolProvider, *, timeout: float | None = None) -> str:
    (tool,) = [c for c in provider.tool_callbacks() if c.definition.name == "get_current_time"]
    async with asyncio.timeout(timeout):
        return await tool.acall('{"timezone": "UTC"}')


async def test_a_caller_cancelled_while_the_dead_session_ends_does_not_stop_the_recovery() -> None:
    async with McpToolProvider(time_server()) as provider:
        assert '"timezone": "UTC"' in await utc_now(provider)
        kill_time_server()
        with pytest.raises(McpServerError, match="closed the connection"):
            await utc_now(provider)
        # At once, while the dead session is still ending: a call that gives up (a tool
        # timeout, a client gone). It cancelled the future the session's task sets as it
        # ends, which then raised InvalidStateError there, and CancelledError in every later
        # call and in closing.
        with pytest.raises(TimeoutError):
            await utc_now(provider, timeout=0.001)
        assert '"timezone": "UTC"' in await utc_now(provider)
        assert provider.connections[0].state == "connected"
        assert len(time_servers()) == 1
    assert time_servers() == []


async def test_a_background_reconnect_cut_short_by_closing_leaves_nothing_behind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # What a request's listing starts (the service lists the tools for each request), then
    # the chat's end closing the provider while it runs.
    async with McpToolProvider(time_server(), reconnect_interval=0.1) as provider:
        kill_time_server()
        with pytest.raises(McpServerError, match="closed the connection"):
            await utc_now(provider)
        await eventually(lambda: provider.connections[0].state == "failed", "the session ends")
        await asyncio.sleep(0.2)
        provider.tool_callbacks()
        await eventually(lambda: provider.connections[0].state == "connecting", "reconnecting")
    assert provider.connections[0].state == "closed"
    await eventually(lambda: time_servers() == [], "the server started meanwhile is stopped", 10)
    assert "InvalidStateError" not in caplog.text
    assert "failed unexpectedly" not in caplog.text


def _time_user(prompt: Prompt) -> ResponseLike:
    """The router asks the time server; the answer stage repeats what it was given."""
    if not prompt.options.tool_callbacks:
        return "answered"
    if isinstance(prompt.messages[-1], ToolResponseMessage):
        return ""
    return tool_call("get_current_time", {"timezone": "UTC"})


async def test_the_service_recovers_a_killed_stdio_server(tmp_path: Path) -> None:
    model = FunctionModel(_time_user)
    app = create_app(config(tmp_path / "s.db", model=model, mcp_servers=[time_server()]))
    (connection,) = app.state.service.mcp.connections
    async with running(app) as client:

        async def ask() -> list[tuple[str, object]]:
            response = await client.post("/api/chat", json={"message": "what time is it?"})
            return parse_sse(response.text)

        def tool_results(events: list[tuple[str, object]]) -> list[object]:
            return [data for name, data in events if name == "tool_result"]

        assert tool_results(await ask())
        kill_time_server()
        failed = await ask()  # fails clearly, and the stream ends
        assert failed[-1][0] == "error"
        assert "closed the connection" in str(failed[-1][1])
        health = (await client.get("/healthz")).json()
        # "connecting" once the reconnect interval (5 s) has passed, as on a loaded machine
        assert health["status"] == "degraded"
        assert health["mcp_servers"][0]["state"] in ("failed", "connecting")

        # A client that leaves while the next question reconnects: it is let go at once
        # and the reconnect goes on (it was cut short, and the next question within the
        # reconnect interval, 5 s, failed with the old error).
        leaving = asyncio.ensure_future(ask())
        await eventually(
            lambda: len(time_servers()) == 1 and connection.state == "connecting", "reconnecting"
        )
        left = time.monotonic()
        leaving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await leaving
        assert time.monotonic() - left < 1

        answered = await ask()
        assert answered[-1][0] == "done"
        [result] = tool_results(answered)
        assert isinstance(result, dict) and '"timezone": "UTC"' in result["result"]
        health = (await client.get("/healthz")).json()
        assert (health["status"], health["mcp_servers"][0]["state"]) == ("ok", "connected")
        assert health["mcp_servers"][0]["error"] is None
    assert time_servers() == []  # the shutdown stopped the new server
