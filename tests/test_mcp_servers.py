"""MCP against real servers in their own processes: the SDK's ``MCPServer`` over stdio (both
protocol eras), ``tooluse mcp serve`` over stdio and streamable HTTP on 127.0.0.1, and the
PyPI package ``mcp-server-time``.

Starting a Python MCP server costs seconds (the SDK's import), so every server is started
once for the module, all at the same time, and each test waits only for the ones it uses.
Tests that change a server (its tool list, or killing it) have servers of their own.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio
from mcp.types import Tool
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from _forking import in_child
from _ports import free_port
from mcp_servers import tooluse_tools
from tooluse import ChatClient, ToolContext, ToolExecutionException, tool_callbacks
from tooluse.cli import main
from tooluse.mcp import (
    MCP_META_KEY,
    HttpServer,
    McpServerError,
    McpToolCallback,
    McpToolProvider,
    StdioServer,
    tool_context_to_meta,
)
from tooluse.messages import ImagePart, ToolResponse, ToolResponseMessage
from tooluse.qa import LedgerToolCallback
from tooluse.schema import ensure_valid_input_schema
from tooluse.search import mcp_server_category
from tooluse.testing import ScriptedModel, tool_call
from tooluse.tools import Image, ToolResult, convert_result

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVERS = Path(__file__).parent / "mcp_servers"
SDK_SERVER = str(SERVERS / "sdk_server.py")
TOOLUSE_TOOLS = f"{SERVERS / 'tooluse_tools.py'}:tools"
SDK_TOOLS = [
    "echo", "add", "pixel", "mixed", "structured", "fail", "crash", "sleep", "counter", "meta",
    "add_tool", "remove_tool",
]  # fmt: skip
TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


def sdk_server(name: str, mode: str = "auto") -> StdioServer:
    return StdioServer(sys.executable, [SDK_SERVER], name=name, mode=mode)


async def http_server(port: int) -> asyncio.subprocess.Process:
    """``tooluse mcp serve`` over streamable HTTP on ``port``, once it listens."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tooluse.cli", "mcp", "serve", TOOLUSE_TOOLS,
        "--http", str(port), "--name", "weather-http",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if process.returncode is not None:
                raise RuntimeError(f"the HTTP server exited ({process.returncode})")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            return process
        raise RuntimeError("the HTTP server did not start listening")
    except BaseException:
        # Not up yet when the module's tests ended (a short -k run cancels the start): the
        # process must not outlive the tests.
        if process.returncode is None:
            process.kill()
            await process.wait()
        raise


class Servers:
    """The module's servers, connecting in the background; ``await servers.get(key)``."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._providers: dict[str, McpToolProvider] = {}
        self._starts: dict[str, asyncio.Task[McpToolProvider]] = {}
        self.http_process: asyncio.subprocess.Process | None = None

    def start(
        self, key: str, provider: McpToolProvider, before: Callable[[], Awaitable[None]]
    ) -> None:
        async def connect() -> McpToolProvider:
            await before()
            return await provider.aconnect()

        self._providers[key] = provider
        self._starts[key] = asyncio.ensure_future(connect())

    async def get(self, key: str) -> McpToolProvider:
        return await self._starts[key]

    async def start_http_server(self) -> None:
        self.http_process = await http_server(self.port)

    async def close(self) -> None:
        for task in self._starts.values():
            task.cancel()
        await asyncio.gather(*self._starts.values(), return_exceptions=True)
        await asyncio.gather(*(p.aclose() for p in self._providers.values()))
        if self.http_process is not None and self.http_process.returncode is None:
            self.http_process.terminate()
            await self.http_process.wait()


async def nothing() -> None:
    return None


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def servers() -> AsyncIterator[Servers]:
    servers = Servers()
    servers.start("sdk", McpToolProvider(sdk_server("sdk")), nothing)
    servers.start(
        "pair", McpToolProvider(sdk_server("modern"), sdk_server("legacy", "legacy")), nothing
    )
    servers.start("doomed", McpToolProvider(sdk_server("doomed", "legacy")), nothing)
    weather = StdioServer(
        sys.executable, ["-m", "tooluse.cli", "mcp", "serve", TOOLUSE_TOOLS], name="weather"
    )
    servers.start("weather", McpToolProvider(weather), nothing)
    http = HttpServer(servers.url, name="weather-http", headers={"X-Test": "1"})
    servers.start("http", McpToolProvider(http), servers.start_http_server)
    time_server = StdioServer(TIME_SERVER[0], TIME_SERVER[1:], name="time")
    servers.start("time", McpToolProvider(time_server), nothing)
    yield servers
    await servers.close()


def tools_of(provider: McpToolProvider) -> dict[str, McpToolCallback]:
    return {callback.definition.name: callback for callback in provider.tool_callbacks()}


async def eventually(condition: Callable[[], bool], what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.02)


# -- the SDK's server over stdio -----------------------------------------------------------------


async def test_the_tools_are_listed_with_repaired_schemas(servers: Servers) -> None:
    provider = await servers.get("sdk")
    tools = tools_of(provider)
    assert list(tools) == SDK_TOOLS
    echo = tools["echo"]
    assert echo.definition.description == "Echo the text back."
    assert echo.definition.input_schema == ensure_valid_input_schema(echo.tool.input_schema)
    assert echo.definition.input_schema["required"] == ["text"]
    assert (echo.server_name, echo.original_name) == ("sdk", "echo")
    assert mcp_server_category(echo) == "sdk"  # tool search's default category: the server
    # Also through the QA pipeline's recording wrapper (it lost the category).
    assert mcp_server_category(LedgerToolCallback(echo)) == "sdk"
    assert provider.connections[0].protocol_version in MODERN_PROTOCOL_VERSIONS


async def test_results_are_text_for_the_model_with_images_beside(servers: Servers) -> None:
    tools = tools_of(await servers.get("sdk"))
    assert await tools["echo"].acall('{"text": "héllo\\nthere"}') == "héllo\nthere"
    assert await tools["add"].acall('{"a": 2, "b": 3}') == "5"
    pixel = Image(b"\x89PNG fake pixel", "image/png")
    assert await tools["pixel"].acall("") == ToolResult("", [pixel])
    # Text blocks with images: the text as the text blocks alone give it, the images beside.
    captioned = await tools["pixel"].acall('{"caption": "Took screenshot"}')
    assert captioned == ToolResult("Took screenshot", [pixel])
    # Other mixes: the JSON of the blocks.
    mixed = await tools["mixed"].acall("null")
    assert isinstance(mixed, ToolResult)
    assert json.loads(mixed.text) == [
        "first",
        {"image": 1, "mimeType": "image/png"},
        {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "A"},
        {"type": "resource_link", "uri": "file:///b.txt", "name": "b"},
    ]
    assert mixed.images == (pixel,)
    assert json.loads(await tools["structured"].acall("{}")) == {"temperature": 21.5}


async def test_an_is_error_result_is_an_error_for_the_model(servers: Servers) -> None:
    tools = tools_of(await servers.get("sdk"))
    with pytest.raises(ToolExecutionException, match="boom") as raised:
        await tools["fail"].acall('{"message": "boom"}')
    assert raised.value.tool_name == "fail"
    with pytest.raises(ToolExecutionException, match="Invalid arguments for tool 'echo'"):
        await tools["echo"].acall("[1, 2]")
    with pytest.raises(ToolExecutionException, match="Invalid arguments for tool 'echo'"):
        await tools["echo"].acall("{not json")


async def test_the_tool_context_is_sent_as_meta(servers: Servers) -> None:
    tools = tools_of(await servers.get("sdk"))
    context = ToolContext({"user": "u1", "n": 3, "_secret": "s", "live": object()})
    assert json.loads(await tools["meta"].acall("{}", context)) == {"user": "u1", "n": 3}
    assert json.loads(await tools["meta"].acall("{}")) == {}


async def test_twenty_concurrent_calls_share_one_session(servers: Servers) -> None:
    provider = await servers.get("sdk")
    tools = tools_of(provider)
    session = provider.connections[0]._client
    before = int(await tools["counter"].acall(""))
    started = time.perf_counter()
    sleeps = [tools["sleep"].acall('{"seconds": 0.5}') for _ in range(10)]
    echoes = [tools["echo"].acall(json.dumps({"text": f"call {i}"})) for i in range(10)]
    results = await asyncio.gather(*(asyncio.create_task(call) for call in sleeps + echoes))
    elapsed = time.perf_counter() - started
    assert results == ["slept 0.5"] * 10 + [f"call {i}" for i in range(10)]
    assert elapsed < 3.0, f"20 calls took {elapsed:.2f}s: they did not run concurrently"
    # One server process counted all of them: one session, not one per call.
    assert int(await tools["counter"].acall("")) - before == 20
    assert provider.connections[0]._client is session


async def test_sync_calls_from_another_thread(servers: Servers) -> None:
    echo = tools_of(await servers.get("sdk"))["echo"]
    assert await asyncio.to_thread(echo.call, '{"text": "from a thread"}') == "from a thread"
    with pytest.raises(RuntimeError, match=r"use `await callback\.acall"):
        echo.call('{"text": "inside the loop"}')


async def test_a_forked_child_is_told_to_connect_its_own_servers(servers: Servers) -> None:
    # The child has a copy of the session, not the parent's thread running its loop: a call
    # used to wait for its timeout, and closing waited forever.
    provider = await servers.get("sdk")
    echo = tools_of(provider)["echo"]

    def in_the_child() -> list[str]:
        def call() -> str:
            try:
                return echo.call('{"text": "from the child"}')
            except McpServerError as error:
                return str(error)

        # On a new thread: the forking thread still looks like it runs the parent's loop.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(call).result()
            pool.submit(asyncio.run, provider.aclose()).result()  # its copy only
        return [answer, provider.connections[0].state]

    answer, state = in_child(in_the_child)
    assert answer.startswith("MCP server 'sdk' was connected in another process (pid ")
    assert "make and connect an McpToolProvider in this process" in answer
    assert state == "closed"
    # The parent's session and server are untouched.
    assert await echo.acall('{"text": "still here"}') == "still here"
    assert provider.connections[0].state == "connected"


async def test_the_list_changed_notice_refreshes_the_tools_in_both_eras(servers: Servers) -> None:
    provider = await servers.get("pair")
    modern, legacy = provider.connections
    assert modern.protocol_version in MODERN_PROTOCOL_VERSIONS
    assert legacy.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
    # Same tool names on both: the second server's get alt_<n>_ names.
    alternatives = [f"alt_{i}_{name}" for i, name in enumerate(SDK_TOOLS, start=1)]
    assert list(tools_of(provider)) == SDK_TOOLS + alternatives

    await tools_of(provider)["add_tool"].acall('{"name": "fresh"}')  # on the modern server
    await eventually(lambda: "fresh" in tools_of(provider), "the modern server's new tool shows")
    assert await tools_of(provider)["fresh"].acall('{"text": "x"}') == "fresh:x"

    await tools_of(provider)["alt_11_add_tool"].acall('{"name": "fresh"}')  # on the legacy one
    await eventually(lambda: "alt_13_fresh" in tools_of(provider), "the legacy server's shows")
    assert await tools_of(provider)["alt_13_fresh"].acall('{"text": "y"}') == "fresh:y"
    assert list(tools_of(provider)) == [*SDK_TOOLS, "fresh", *alternatives, "alt_13_fresh"]

    await tools_of(provider)["remove_tool"].acall('{"name": "fresh"}')
    await eventually(lambda: "fresh" not in tools_of(provider), "the removal shows")
    await tools_of(provider)["add_tool"].acall('{"name": "fresh"}')
    await eventually(lambda: "fresh" in tools_of(provider), "the tool is back under its name")
    assert "alt_13_fresh" in tools_of(provider)


async def test_a_server_that_dies_is_reported_then_reconnected(servers: Servers) -> None:
    provider = await servers.get("doomed")
    tools = tools_of(provider)
    assert await tools["echo"].acall('{"text": "alive"}') == "alive"
    started = time.perf_counter()
    with pytest.raises(McpServerError, match="'doomed' closed the connection during") as raised:
        await tools["crash"].acall("{}")  # the call in flight fails: it is not sent again
    assert (raised.value.server_name, raised.value.tool_name) == ("doomed", "crash")
    assert time.perf_counter() - started < 5
    await eventually(lambda: provider.connections[0].state == "failed", "the session ends")
    # The next call starts a new server process and goes through.
    assert await tools["echo"].acall('{"text": "back"}') == "back"
    assert provider.connections[0].state == "connected"
    assert await tools_of(provider)["echo"].acall('{"text": "listed"}') == "listed"
    # A second death within the reconnect interval (5 s) is not retried at once.
    with pytest.raises(McpServerError, match="closed the connection"):
        await tools["crash"].acall("{}")
    with pytest.raises(McpServerError, match=r"reconnecting: at most every 5 s"):
        await tools["echo"].acall('{"text": "anyone?"}')
    # In the loop, a dead server reaches the caller; the model is not asked again.
    model = ScriptedModel([tool_call("echo", {"text": "hi"}), "unreachable"])
    with pytest.raises(McpServerError, match="'doomed'"):
        await ChatClient(model, tools=[provider]).prompt().user("echo hi").acall()
    assert len(model.requests) == 1


async def test_a_provider_can_refuse_to_reconnect() -> None:
    async with McpToolProvider(sdk_server("once", "legacy"), reconnect_interval=None) as provider:
        tools = tools_of(provider)
        with pytest.raises(McpServerError, match="closed the connection"):
            await tools["crash"].acall("{}")
        with pytest.raises(McpServerError, match="the session has ended; reconnecting: never"):
            await tools["echo"].acall('{"text": "anyone?"}')


async def crashed(provider: McpToolProvider) -> None:
    """Kill the provider's server mid-call and wait until its session has ended."""
    with pytest.raises(McpServerError, match="closed the connection"):
        await tools_of(provider)["crash"].acall("{}")
    await eventually(lambda: provider.connections[0].state == "failed", "the session ends")


async def test_calls_during_a_reconnect_wait_for_it() -> None:
    async with McpToolProvider(sdk_server("busy", "legacy"), reconnect_interval=0.1) as provider:
        echo = tools_of(provider)["echo"]
        await crashed(provider)
        await asyncio.sleep(0.2)
        first = asyncio.ensure_future(echo.acall('{"text": "first"}'))  # starts the reconnect
        await eventually(lambda: provider.connections[0].state == "connecting", "reconnecting")
        # Not "not connected (connecting); connect the provider first".
        assert await echo.acall('{"text": "second"}') == "second"
        assert await first == "first"


async def test_a_caller_that_gives_up_leaves_the_reconnect_running() -> None:
    async with McpToolProvider(sdk_server("cut", "legacy"), reconnect_interval=0.1) as provider:
        echo = tools_of(provider)["echo"]
        await crashed(provider)
        await asyncio.sleep(0.2)
        # The call that reconnects is cancelled meanwhile (a tool timeout, a cancelled request).
        first = asyncio.ensure_future(echo.acall('{"text": "first"}'))
        await eventually(lambda: provider.connections[0].state == "connecting", "reconnecting")
        first.cancel()
        cancelled = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert time.monotonic() - cancelled < 1  # not after the server's start is undone
        await eventually(lambda: provider.connections[0].state == "connected", "reconnected")
        assert await echo.acall('{"text": "again"}') == "again"


async def test_a_closed_provider_does_not_restart_a_server_that_died() -> None:
    provider = McpToolProvider(sdk_server("gone", "legacy"), reconnect_interval=0.1)
    async with provider:
        echo = tools_of(provider)["echo"]
        await crashed(provider)
    assert provider.connections[0].state == "closed"
    await asyncio.sleep(0.2)
    # A callback kept from before must not start a server process nobody would stop.
    with pytest.raises(McpServerError, match=r"'gone' is not connected \(closed\)"):
        await echo.acall('{"text": "anyone?"}')
    assert provider.connections[0].state == "closed"


async def test_an_http_server_that_went_away_is_reconnected_when_it_is_back() -> None:
    port = free_port()
    process = await http_server(port)
    server = HttpServer(f"http://127.0.0.1:{port}/mcp", name="flaky")
    try:
        async with McpToolProvider(server, reconnect_interval=0.2) as provider:
            tool = tools_of(provider)["get_weather"]
            assert "Paris" in await tool.acall('{"city": "Paris"}')
            process.terminate()
            await process.wait()
            with pytest.raises(McpServerError, match="'flaky'"):
                await tool.acall('{"city": "Paris"}')
            await asyncio.sleep(0.3)
            with pytest.raises(McpServerError, match="reconnecting after"):
                await tool.acall('{"city": "Paris"}')  # the attempt fails: nobody listens
            process = await http_server(port)
            await asyncio.sleep(0.3)
            assert "Rome" in await tool.acall('{"city": "Rome"}')
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()


async def test_an_optional_server_is_left_out_until_it_can_be_reached(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ready = tmp_path / "ready"  # the server starts only once this file exists
    starts_later = StdioServer(
        sys.executable,
        [
            "-c",
            "import os, runpy, sys\n"
            f"if not os.path.exists({str(ready)!r}): sys.exit('not ready')\n"
            f"runpy.run_path({str(SDK_SERVER)!r}, run_name='__main__')",
        ],
        name="later",
        mode="legacy",
        required=False,
    )
    async with McpToolProvider(
        sdk_server("always", "legacy"), starts_later, reconnect_interval=0.2
    ) as provider:
        names = {c.definition.name for c in provider.tool_callbacks()}
        assert "echo" in names and not any(name.startswith("alt_") for name in names)
        assert "MCP server 'later' is left out for now (required=False)" in caplog.text
        assert provider.connections[1].state == "failed"
        ready.touch()
        # Each listing (one per request) tries again when due; the tools then show up.
        await eventually(
            lambda: any(c.server_name == "later" for c in provider.tool_callbacks()),
            "the optional server's tools are offered",
            seconds=60,  # a new server process per attempt: slow on a loaded machine
        )
        later = [c for c in provider.tool_callbacks() if c.server_name == "later"]
        echo = next(c for c in later if c.original_name == "echo")
        assert await echo.acall('{"text": "joined"}') == "joined"


async def test_a_required_server_that_cannot_start_fails_the_provider() -> None:
    broken = StdioServer(sys.executable, ["-c", "import sys; sys.exit(3)"], name="broken")
    provider = McpToolProvider(sdk_server("fine", "legacy"), broken)
    with pytest.raises(McpServerError, match="'broken'"):
        await provider.aconnect()
    assert [c.state for c in provider.connections] == ["closed", "closed"]


def processes_running(marker: str) -> list[int]:
    """The live processes with ``marker`` among their arguments (an exited one has none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        if marker.encode() in arguments:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")
@pytest.mark.optional_skip("a system without /proc (macOS, Windows)")
async def test_a_tool_filter_that_raises_closes_the_servers_already_started() -> None:
    marker = f"filter-leak-check-{uuid.uuid4().hex}"
    first = StdioServer(sys.executable, [SDK_SERVER, marker], name="first")
    second = StdioServer(sys.executable, [SDK_SERVER, marker], name="second", mode="legacy")

    def tool_filter(server: str, tool: Tool) -> bool:
        if server == "second":
            raise LookupError(f"no rule for {tool.name}")
        return True

    provider = McpToolProvider(first, second, tool_filter=tool_filter)
    with pytest.raises(LookupError, match="no rule for"):
        await provider.aconnect()
    assert [c.state for c in provider.connections] == ["closed", "closed"]
    assert processes_running(marker) == []


# -- tooluse tools served over stdio and streamable HTTP -----------------------------------------


@pytest.mark.parametrize("key", ["weather", "http"])
async def test_served_tools_keep_their_definitions(servers: Servers, key: str) -> None:
    served = tools_of(await servers.get(key))
    local = tool_callbacks(tooluse_tools.tools)
    assert [c.definition for c in served.values()] == [c.definition for c in local]


@pytest.mark.parametrize("key", ["weather", "http"])
async def test_served_tools_behave_as_local_ones(servers: Servers, key: str) -> None:
    served = tools_of(await servers.get(key))
    local = {c.definition.name: c for c in tool_callbacks(tooluse_tools.tools)}
    arguments = '{"city": "Paris", "unit": "f"}'
    assert await served["get_weather"].acall(arguments) == await local["get_weather"].acall(
        arguments
    )
    assert await served["picture"].acall("") == convert_result(tooluse_tools.PICTURE)
    # A ToolResult goes out as a text block and an image block, and comes back as it was.
    captioned = '{"caption": "Took screenshot"}'
    assert await served["picture"].acall(captioned) == await local["picture"].acall(captioned)
    with pytest.raises(ToolExecutionException, match="the weather service is down"):
        await served["broken"].acall("")
    with pytest.raises(ToolExecutionException, match="Invalid arguments for tool 'get_weather'"):
        await served["get_weather"].acall('{"city": "Paris", "unit": "kelvin"}')
    seen = json.loads(await served["whoami"].acall("{}", ToolContext({"user": "u2", "_x": 1})))
    assert seen == {MCP_META_KEY: {"user": "u2"}}


async def test_a_chat_client_loop_calls_an_mcp_tool(servers: Servers) -> None:
    provider = await servers.get("weather")
    model = ScriptedModel(
        [tool_call("get_weather", {"city": "Paris"}), "It is 21 degrees in Paris."]
    )
    client = ChatClient(model, tools=[provider])
    response = await client.prompt().user("Weather in Paris?").acall()
    assert response.content() == "It is 21 degrees in Paris."
    assert [t.definition.name for t in model.requests[0].options.tool_callbacks] == [
        "get_weather", "whoami", "picture", "broken"
    ]  # fmt: skip
    results = model.requests[1].messages[-1]
    assert isinstance(results, ToolResponseMessage)
    assert json.loads(results.responses[0].data) == {
        "city": "Paris",
        "temperature": 21,
        "unit": "c",
    }
    assert not results.responses[0].is_error


@pytest.mark.parametrize(("key", "tool"), [("sdk", "pixel"), ("weather", "picture")])
@pytest.mark.parametrize("caption", ["", "Took screenshot"])
async def test_a_chat_client_loop_shows_the_model_an_mcp_tool_s_image(
    servers: Servers, key: str, tool: str, caption: str
) -> None:
    # The SDK's own server, and a tooluse tool returning ToolResult served by `tooluse mcp
    # serve`; the caption, when there is one, is the text.
    provider = await servers.get(key)
    model = ScriptedModel([tool_call(tool, {"caption": caption}), "A tiny picture."])
    response = await ChatClient(model, tools=[provider]).prompt().user("Look.").acall()
    assert response.content() == "A tiny picture."
    results = model.requests[1].messages[-1]
    assert isinstance(results, ToolResponseMessage)
    expected = b"\x89PNG fake pixel" if key == "sdk" else tooluse_tools.PICTURE.data
    assert results.responses[0] == ToolResponse(
        results.responses[0].id,
        tool,
        caption,
        images=[ImagePart("image/png", base64.b64encode(expected).decode())],
    )


async def test_a_chat_client_loop_hands_is_error_to_the_model(servers: Servers) -> None:
    provider = await servers.get("weather")
    model = ScriptedModel([tool_call("broken"), "Sorry, the service is down."])
    response = await ChatClient(model, tools=[provider]).prompt().user("weather?").acall()
    assert response.content() == "Sorry, the service is down."
    results = model.requests[1].messages[-1]
    assert isinstance(results, ToolResponseMessage)
    assert results.responses[0].data == "the weather service is down"
    assert results.responses[0].is_error


async def test_the_cli_lists_an_http_server_s_tools(
    servers: Servers, capsys: pytest.CaptureFixture[str]
) -> None:
    await servers.get("http")
    argv = ["mcp", "tools", "--url", servers.url, "--header", "X-Test: 1"]
    assert await asyncio.to_thread(main, [*argv, "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [entry["name"] for entry in listing] == ["get_weather", "whoami", "picture", "broken"]
    assert listing[0]["input_schema"]["properties"]["city"]["description"] == "The city"
    assert await asyncio.to_thread(main, argv) == 0
    assert capsys.readouterr().out.splitlines()[0] == "get_weather\tCurrent weather in a city."


# -- a real MCP server from PyPI: mcp-server-time ------------------------------------------------


async def test_the_pypi_time_server(servers: Servers) -> None:
    provider = await servers.get("time")
    tools = tools_of(provider)
    assert list(tools) == ["get_current_time", "convert_time"]
    converted = json.loads(
        await tools["convert_time"].acall(
            '{"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}'
        )
    )
    assert converted["target"]["datetime"][11:16] == "21:00"
    assert converted["time_difference"] == "+9.0h"
    now = json.loads(await tools["get_current_time"].acall('{"timezone": "UTC"}'))
    assert now["timezone"] == "UTC"
    with pytest.raises(ToolExecutionException, match="Invalid timezone"):
        await tools["get_current_time"].acall('{"timezone": "Mars/Base"}')
    # An unknown tool is a protocol error there (-32602): it propagates, naming the server.
    ghost = McpToolCallback(
        provider.connections[0],
        Tool(name="ghost", input_schema={"type": "object"}),
        name="ghost",
        context_to_meta=tool_context_to_meta,
    )
    with pytest.raises(McpServerError, match="'time' rejected tools/call 'ghost'"):
        await ghost.acall("{}")
