"""MCP servers as tool sources of the service (``--mcp FILE``, ``ServiceConfig.mcp_servers``):
``tooluse serve`` answering through a real stdio server and stopping it on shutdown, the
commands reaching a streamable HTTP server, and the errors for servers that cannot start.

A Python MCP server takes about 2 s to start (the SDK's import): one stdio server for the
serve test, one HTTP server shared by the command tests; the rest use in-process servers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from _ports import free_port
from _rag_helpers import HashingEmbeddingModel
from _service_helpers import (
    config,
    default_sigint,
    parse_sse,
    read_until,
    serve_without_listening,
    service,
)
from tooluse.cli import main
from tooluse.mcp import InProcessServer, StdioServer, ToolSettings, mcp_server
from tooluse.messages import Prompt, ToolResponseMessage, UserMessage
from tooluse.service import QaService, ServiceConfig
from tooluse.service._samples import get_current_time, get_weather
from tooluse.service._service import TOOL_SEARCH_ABOVE
from tooluse.testing import FunctionModel, ResponseLike, tool_call
from tooluse.tools import tool

SERVERS = Path(__file__).parent / "mcp_servers"
SDK_SERVER = str(SERVERS / "sdk_server.py")
TOOLUSE_TOOLS = f"{SERVERS / 'tooluse_tools.py'}:tools"
MCP_WEATHER_TOOLS = ["get_weather", "whoami", "picture", "broken"]


def _question(prompt: Prompt) -> str:
    return next(m.text for m in reversed(prompt.messages) if isinstance(m, UserMessage))


def _sdk_server_user(prompt: Prompt) -> ResponseLike:
    """A model for both stages: the router adds numbers with the server's ``add``, or has it
    add a tool with ``add_tool``; the answer says whether it got fetched data."""
    if not prompt.options.tool_callbacks:
        return "From live data." if _question(prompt).startswith("Data fetched") else "No data."
    if isinstance(prompt.messages[-1], ToolResponseMessage):
        return ""
    question = _question(prompt).lower()
    if "new tool" in question:
        return tool_call("add_tool", {"name": "fresh"}, id="add-tool-1")
    if "add" in question:
        return tool_call("add", {"a": 2, "b": 3}, id="add-1")
    return ""


def _processes_with(marker: str) -> list[int]:
    """The processes whose command line holds ``marker`` (Linux: read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command_line = (entry / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        if marker.encode() in command_line:
            found.append(int(entry.name))
    return found


async def _eventually(
    condition: Callable[[], Awaitable[bool]], what: str, seconds: float = 10.0
) -> None:
    deadline = time.monotonic() + seconds
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.05)


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")
@pytest.mark.optional_skip("a system without /proc (macOS, Windows)")
async def test_serve_answers_with_a_stdio_server_tools_and_stops_it_on_shutdown(
    tmp_path: Path,
) -> None:
    marker = f"tooluse-test-{uuid.uuid4().hex}"  # an argument the server ignores, to find it
    # echo and add are annotated read-only; add_tool is a write, run without approval here
    never = ToolSettings(approval="never")
    sdk = StdioServer(
        sys.executable, [SDK_SERVER, marker], name="sdk", tool_settings={"add_tool": never}
    )
    model = FunctionModel(_sdk_server_user)
    async with service(tmp_path / "s.db", model=model, mcp_servers=[sdk]) as client:
        assert len(_processes_with(marker)) == 1
        tools = (await client.get("/api/tools")).json()
        assert {tool["mcp_server"] for tool in tools} == {"sdk"}  # no sample tools
        assert [tool["name"] for tool in tools][:2] == ["echo", "add"]
        health = (await client.get("/healthz")).json()
        assert (health["status"], health["tools"], health["tool_search"]) == ("ok", 12, False)
        assert health["mcp_servers"] == [
            {"name": "sdk", "state": "connected", "tools": 12, "error": None}
        ]

        events = parse_sse((await client.post("/api/chat", json={"message": "add 2 and 3"})).text)
        calls = [data for name, data in events if name == "tool_call"]
        results = [data for name, data in events if name == "tool_result"]
        assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
            ("add", {"a": 2, "b": 3})
        ]
        assert [(r["name"], r["result"], r["is_error"]) for r in results] == [("add", "5", False)]
        assert events[-1][0] == "done"
        assert "From live data." in "".join(d["text"] for n, d in events if n == "delta")

        # The server adds a tool and says so (list_changed): offered without a restart.
        await client.post("/api/chat", json={"message": "make a new tool"})

        async def fresh_offered() -> bool:
            names = [tool["name"] for tool in (await client.get("/api/tools")).json()]
            return "fresh" in names

        await _eventually(fresh_offered, "the added tool is listed")
        assert (await client.get("/healthz")).json()["tools"] == 13
    assert _processes_with(marker) == []  # the lifespan's end stopped the server


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")
@pytest.mark.optional_skip("a system without /proc (macOS, Windows)")
def test_ctrl_c_at_the_chat_prompt_ends_it_quietly_and_stops_the_servers(tmp_path: Path) -> None:
    marker = f"tooluse-test-{uuid.uuid4().hex}"
    mcp = _write(
        tmp_path / "mcp.json", {"sdk": {"command": sys.executable, "args": [SDK_SERVER, marker]}}
    )
    command = [sys.executable, "-m", "tooluse.cli", "chat", "--model", "test", "--mcp", str(mcp)]
    command += ["--db", str(tmp_path / "c.db"), "--no-sample-knowledge"]
    env = {name: value for name, value in os.environ.items() if name != "TOOLUSE_MODEL"}
    pipe = subprocess.PIPE
    chat = subprocess.Popen(
        command, env=env, stdin=pipe, stdout=pipe, stderr=pipe, preexec_fn=default_sigint
    )
    try:
        read_until(chat, "you> ")
        assert len(_processes_with(marker)) == 1
        interrupted = time.monotonic()
        chat.send_signal(signal.SIGINT)
        chat.wait(timeout=60)  # stdin stays open: input() waits for a line that never comes
    finally:
        chat.kill()
        chat.stdin.close()
    # A hang waits for ever; a clean exit took 5.8 s on two cores shared with a load of 8.
    assert time.monotonic() - interrupted < 30
    err = chat.stderr.read()
    assert b"Traceback" not in err, err.decode()
    assert chat.returncode == 130
    assert _processes_with(marker) == []


def _archive_tool(number: int) -> object:
    def lookup(record_id: str) -> str:
        return f"record {record_id} of archive {number}"

    return tool(name=f"archive_{number}", description=f"Look up a record of archive {number}")(
        lookup
    )


async def test_mcp_tools_join_the_others_and_count_for_tool_search(tmp_path: Path) -> None:
    archive = mcp_server(*(_archive_tool(n) for n in range(TOOL_SEARCH_ABOVE)), name="archive")
    settings = config(
        tmp_path / "s.db",
        tools=[get_current_time],
        mcp_servers=[InProcessServer(archive, name="archive")],
    )
    qa = QaService(settings)
    with pytest.raises(RuntimeError, match=r"starts with `await service.astart\(\)`"):
        qa.start()
    await qa.astart()
    try:
        assert qa.tool_search is not None  # 1 + 20 tools: above the threshold
        health = qa.health()
        assert (health["tools"], health["tool_search"]) == (TOOL_SEARCH_ABOVE + 1, True)
        described = qa.tool_descriptions()
        assert (described[0]["name"], described[0]["mcp_server"]) == ("get_current_time", None)
        assert {d["mcp_server"] for d in described[1:]} == {"archive"}
    finally:
        await qa.aclose()
    assert qa.mcp is not None and [c.state for c in qa.mcp.connections] == ["closed"]


async def test_starting_a_started_service_leaves_its_servers_connected(tmp_path: Path) -> None:
    settings = config(
        tmp_path / "s.db", mcp_servers=[InProcessServer(mcp_server(get_weather, name="live"))]
    )
    qa = QaService(settings)
    try:
        first, second = await asyncio.gather(qa.astart(), qa.astart(), return_exceptions=True)
        # The refused start did not close the sessions of the service that started.
        assert qa.mcp is not None and [c.state for c in qa.mcp.connections] == ["connected"]
        assert first is None
        assert isinstance(second, RuntimeError)
        assert str(second) == "The QaService is already starting"
        with pytest.raises(RuntimeError, match=r"^The QaService is already started$"):
            await qa.astart()
        assert [c.state for c in qa.mcp.connections] == ["connected"]
        assert [tool["name"] for tool in qa.tool_descriptions()] == ["get_weather"]
    finally:
        await qa.aclose()
    with pytest.raises(RuntimeError, match=r"^The QaService is closed; make a new one to start$"):
        await qa.astart()


async def test_an_optional_server_that_is_down_leaves_the_service_degraded(
    tmp_path: Path,
) -> None:
    live = InProcessServer(mcp_server(get_weather, name="live"))
    later = StdioServer(str(tmp_path / "no-such-server"), name="later", required=False)
    async with service(tmp_path / "s.db", mcp_servers=[live, later]) as client:
        health = (await client.get("/healthz")).json()
        assert health["status"] == "degraded"
        assert [(s["name"], s["state"], s["tools"]) for s in health["mcp_servers"]] == [
            ("live", "connected", 1),
            ("later", "failed", 0),
        ]
        assert "MCP server 'later': could not start" in health["mcp_servers"][1]["error"]
        tools = (await client.get("/api/tools")).json()
        assert [(t["name"], t["mcp_server"]) for t in tools] == [("get_weather", "live")]


def test_mcp_servers_takes_servers_not_a_file_name() -> None:
    with pytest.raises(TypeError, match=r"use tooluse.mcp.load_mcp_config\('mcp.json'\)"):
        ServiceConfig(mcp_servers="mcp.json")  # type: ignore[arg-type]


# -- the commands -------------------------------------------------------------------------------


def _write(path: Path, servers: dict[str, object]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def _argv(command: str, mcp: Path, db: Path) -> list[str]:
    if command in ("tools", "search"):
        return [command, *(["weather"] if command == "search" else []), "--mcp", str(mcp)]
    service_options = ["--model", "test", "--mcp", str(mcp), "--db", str(db)]
    service_options.append("--no-sample-knowledge")
    return [command, *service_options, *(["weather?"] if command == "chat" else [])]


@pytest.fixture
def offline_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands with the offline model and the hashing embedding model, never listening."""
    monkeypatch.delenv("TOOLUSE_MODEL", raising=False)
    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)

    def never(config: object) -> None:
        raise AssertionError("tooluse serve went on to serve")

    serve_without_listening(monkeypatch, never)


@pytest.mark.usefixtures("offline_commands")
@pytest.mark.parametrize("command", ["serve", "chat", "eval", "tools", "search"])
def test_a_server_that_cannot_start_is_an_option_error(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "no-such-server")
    mcp = _write(tmp_path / "mcp.json", {"ghost": {"command": missing}})
    assert main(_argv(command, mcp, tmp_path / "s.db")) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"tooluse {command}: --mcp {mcp}: MCP server 'ghost': could not start {missing!r}: "
    ), err
    assert "Traceback" not in err

    _write(mcp, {"old": {"type": "sse", "url": "http://127.0.0.1:9/sse"}})
    assert main(_argv(command, mcp, tmp_path / "s.db")) == 2
    err = capsys.readouterr().err
    assert err.startswith(f'tooluse {command}: --mcp {mcp}: server \'old\': "type": "sse" '), err


@pytest.mark.usefixtures("offline_commands")
def test_serve_names_a_server_that_exits_during_the_handshake(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mcp = _write(
        tmp_path / "mcp.json",
        {"quitter": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}},
    )
    assert main(_argv("serve", mcp, tmp_path / "s.db")) == 2
    assert capsys.readouterr().err.startswith(
        f"tooluse serve: --mcp {mcp}: MCP server 'quitter' closed the connection during the "
        "handshake"
    )


def test_mcp_tools_lists_a_server_of_a_configuration_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ghost = str(tmp_path / "no-such-server")
    mcp = _write(
        tmp_path / "mcp.json",
        {
            "ghost": {"command": ghost},  # never started: only the server asked for is
            "sdk": {
                "command": "${PYTHON}",
                "args": [SDK_SERVER],
                "exclude": ["crash", "sleep"],
                "required": False,
            },
        },
    )
    monkeypatch.setenv("PYTHON", sys.executable)  # the file's ${VAR} works here too
    assert main(["mcp", "tools", "--config", str(mcp), "--server", "sdk", "--json"]) == 0
    names = [tool["name"] for tool in json.loads(capsys.readouterr().out)]
    assert names[:3] == ["echo", "add", "pixel"] and len(names) == 10
    assert "crash" not in names and "sleep" not in names  # the file's exclude applies

    # The optional server ("required": false in the file) is listed, so its failure is an error.
    _write(mcp, {"ghost": {"command": ghost, "required": False}})
    assert main(["mcp", "tools", "--config", str(mcp)]) == 1
    assert capsys.readouterr().err.startswith(
        f"tooluse mcp tools: MCP server 'ghost': could not start {ghost!r}: "
    )


@pytest.fixture(scope="module")
def http_mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``tooluse mcp serve`` over streamable HTTP, and an ``--mcp`` file naming it."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tooluse.cli", "mcp", "serve", TOOLUSE_TOOLS, "--http", str(port)]
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"the HTTP server exited ({process.returncode})"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP server did not start listening"
                time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        yield _write(tmp_path_factory.mktemp("mcp") / "mcp.json", {"weather": {"url": url}})
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_tools_lists_the_mcp_tools_with_yours(
    http_mcp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tools", "--mcp", str(http_mcp), "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [(t["name"], t["mcp_server"]) for t in listing] == [
        (name, "weather") for name in MCP_WEATHER_TOOLS
    ]
    mine = "tooluse.service._samples:get_current_time"
    assert main(["tools", "--tools", mine, "--mcp", str(http_mcp)]) == 0
    names = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert names == ["get_current_time", *MCP_WEATHER_TOOLS]
    # The sample get_weather and the server's: which one the model meant would be a guess.
    assert main(["tools", "--tools", "tooluse.service:SAMPLE_TOOLS", "--mcp", str(http_mcp)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tooluse tools: --mcp {http_mcp}: ") and "get_weather" in err


def test_search_files_the_mcp_tools_under_their_server(
    http_mcp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "weather in a city", "--mcp", str(http_mcp), "--index", "bm25", "--json"]
    assert main([*argv, "--category", "weather"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found[0]["name"], found[0]["category"]) == ("get_weather", "weather")
    assert main([*argv, "--category", "elsewhere"]) == 2
    assert capsys.readouterr().err == (
        "tooluse search: no tool has the category 'elsewhere'; the categories are ['weather']\n"
    )


@pytest.mark.usefixtures("offline_commands")
def test_chat_and_eval_call_the_mcp_tools(
    http_mcp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv("chat", http_mcp, tmp_path / "c.db")) == 0
    out = capsys.readouterr().out
    assert "-> get_weather(" in out and '<- get_weather: {"city":"a",' in out, out

    families = [{"name": "w", "questions": ["weather?"], "expected_tools": ["get_weather"]}]
    path = tmp_path / "families.json"
    path.write_text(json.dumps({"families": families}), encoding="utf-8")
    database = str(tmp_path / "e.db")
    argv = [
        "eval",
        "--model",
        "test",
        str(path),
        "--runs",
        "1",
        "--mcp",
        str(http_mcp),
        "--db",
        database,
    ]
    assert main([*argv, "--no-sample-knowledge", "--pipelines", "two-stage"]) == 0
    assert capsys.readouterr().out.startswith("ok   two-stage | w #1 ")
