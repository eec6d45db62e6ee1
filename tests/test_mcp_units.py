"""MCP without subprocesses: server parameters, naming, conversions, and the provider against
servers run in this process (the SDK's in-process transports; both protocol eras)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolRequestParams,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ListToolsResult,
    PaginatedRequestParams,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)

from _ports import free_port
from tooluse import Approve, ChatClient, ToolContext, ToolExecutionException, tool
from tooluse.cli import main
from tooluse.errors import ToolArgumentsError
from tooluse.mcp import (
    MCP_META_KEY,
    HttpServer,
    InProcessServer,
    McpServerError,
    McpToolCallback,
    McpToolProvider,
    StdioServer,
    aserve_tools,
    mcp_server,
    tool_context_to_meta,
)
from tooluse.mcp._connection import McpConnection
from tooluse.mcp._convert import error_text, result_content
from tooluse.mcp._naming import ToolNamer
from tooluse.testing import ScriptedModel, tool_call
from tooluse.tools import Image, ToolMetadata, ToolResult, convert_result

MODES = ["auto", "legacy"]


def make_tool(name: str, schema: dict[str, Any] | None = None) -> Tool:
    return Tool(name=name, description=f"The {name} tool", input_schema=schema or {})


@tool
def greet(name: str, context: ToolContext) -> dict[str, Any]:
    """Greet someone and show the tool context."""
    return {"greeting": f"hello {name}", "context": dict(context)}


@tool(timeout=0.2)
async def dawdle() -> str:
    """Takes longer than its timeout."""
    await asyncio.sleep(5)
    return "never"


@tool
def explode() -> str:
    """Fails."""
    raise ValueError("no can do")


@tool
def snapshot() -> Image:
    """A picture."""
    return Image(b"\x89PNG unit", "image/png")


def numbers_server(name: str) -> MCPServer:
    """An SDK server whose tool names collide with another instance of itself."""
    server = MCPServer(name)

    @server.tool()
    def one() -> str:
        return f"{name}:one"

    @server.tool()
    def two() -> str:
        return f"{name}:two"

    @server.tool()
    async def nap(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "awake"

    return server


def names(provider: McpToolProvider) -> list[str]:
    return [callback.definition.name for callback in provider.tool_callbacks()]


def by_name(provider: McpToolProvider, name: str) -> McpToolCallback:
    return next(c for c in provider.tool_callbacks() if c.definition.name == name)


# -- server parameters -------------------------------------------------------------------------


def test_server_parameters_take_default_names() -> None:
    assert StdioServer("/usr/bin/mcp-server-time").name == "mcp-server-time"
    assert StdioServer("python3", ["server.py"], name="files").name == "files"
    assert HttpServer("http://127.0.0.1:8123/mcp").name == "127.0.0.1:8123"
    assert InProcessServer(numbers_server("numbers")).name == "numbers"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: StdioServer(""), "needs a command"),
        (lambda: StdioServer("python", "server.py"), "list of strings"),
        (lambda: StdioServer("python", name="  "), "cannot be blank"),
        (lambda: StdioServer("python", include="echo"), "collections of tool names"),
        (lambda: StdioServer("python", mode="modern"), "mode must be"),
        (lambda: HttpServer("127.0.0.1:8000/mcp"), "http:// or https://"),
        (lambda: HttpServer("ftp://host/mcp"), "http:// or https://"),
        (lambda: InProcessServer(object()), "mcp.server.Server or MCPServer"),
    ],
)
def test_bad_server_parameters_are_named(make: Any, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        make()


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=30))
def test_any_url_without_an_http_scheme_is_refused(text: str) -> None:
    if text.startswith(("http://", "https://")):
        return
    with pytest.raises(ValueError, match="HttpServer needs an http"):
        HttpServer(text)


def test_provider_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="at least one MCP server"):
        McpToolProvider()
    with pytest.raises(TypeError, match="StdioServer, HttpServer or InProcessServer"):
        McpToolProvider("python server.py")
    with pytest.raises(ValueError, match="Several MCP servers are named 'same'"):
        McpToolProvider(StdioServer("a", name="same"), StdioServer("b", name="same"))
    with pytest.raises(ValueError, match="naming must be one of"):
        McpToolProvider(StdioServer("a"), naming="server")
    with pytest.raises(ValueError, match="call_timeout must be a positive"):
        McpToolProvider(StdioServer("a"), call_timeout=0)


def test_tools_before_connecting_is_an_error() -> None:
    provider = McpToolProvider(InProcessServer(numbers_server("n")))
    with pytest.raises(RuntimeError, match="not connected"):
        provider.tool_callbacks()
    with pytest.raises(RuntimeError, match="not connected"):
        ChatClient(ScriptedModel(["hi"]), tools=[provider]).prompt().user("hi").call()


# -- naming ------------------------------------------------------------------------------------


def test_alt_naming_is_spring_s_and_remembered() -> None:
    namer = ToolNamer("alt")
    first = [namer.name("a", make_tool("sameName")), namer.name("b", make_tool("sameName"))]
    assert first == ["sameName", "alt_1_sameName"]
    # Spring AI would hand out plain names again when the same tools are listed again.
    again = [namer.name("a", make_tool("sameName")), namer.name("b", make_tool("sameName"))]
    assert again == first
    assert namer.name("c", make_tool("sameName")) == "alt_2_sameName"
    assert namer.name("d", make_tool("alt_1_sameName")) == "alt_3_alt_1_sameName"


def test_prefix_function_and_plain_naming() -> None:
    assert ToolNamer("prefix").name("files", make_tool("read")) == "files_read"
    assert ToolNamer("none").name("files", make_tool("read")) == "read"
    custom = ToolNamer(lambda server, t: f"{server}.{t.name}")
    assert custom.name("files", make_tool("read")) == "files.read"
    with pytest.raises(ValueError, match="must return a non-blank string"):
        ToolNamer(lambda server, t: " ").name("files", make_tool("read"))


@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(["x", "y", "alt_1_x"]))))
def test_alt_names_are_unique_and_stable(pairs: list[tuple[str, str]]) -> None:
    namer = ToolNamer("alt")
    given_names = {pair: namer.name(pair[0], make_tool(pair[1])) for pair in pairs}
    assert len(set(given_names.values())) == len(given_names)
    assert all(namer.name(s, make_tool(t)) == given_names[(s, t)] for s, t in pairs)


# -- conversions -------------------------------------------------------------------------------

PIXEL = base64.b64encode(b"\x89PNG pixel").decode()


def test_the_description_falls_back_to_the_names_a_server_gives_in_the_spec_s_order() -> None:
    connection = McpConnection(InProcessServer(numbers_server("a")))

    def description(**fields: Any) -> str:
        listed = Tool(name="get_x", input_schema={"type": "object"}, **fields)
        return McpToolCallback(
            connection, listed, name="get_x", context_to_meta=tool_context_to_meta
        ).definition.description

    titled = ToolAnnotations(title="Annotated title")
    assert description(description="Gets x.", title="Title", annotations=titled) == "Gets x."
    assert description(title="Title", annotations=titled) == "Title"
    assert description(annotations=titled) == "Annotated title"
    assert description() == "get_x"


def test_one_text_block_is_the_result_unchanged() -> None:
    result = CallToolResult(content=[TextContent(type="text", text="It is 21°C\nand sunny")])
    assert result_content(result) == "It is 21°C\nand sunny"


def test_other_content_becomes_json_like_tooluse_results_with_images_beside() -> None:
    result = CallToolResult(
        content=[
            TextContent(type="text", text="first"),
            ImageContent(type="image", data=PIXEL, mime_type="image/png"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="file:///a", mime_type="text/plain", text="A"),
            ),
            ResourceLink(type="resource_link", uri="file:///b", name="b"),
            AudioContent(type="audio", data=PIXEL, mime_type="audio/wav"),
        ]
    )
    content = result_content(result)
    assert isinstance(content, ToolResult)
    assert json.loads(content.text) == [
        "first",
        {"image": 1, "mimeType": "image/png"},
        {"uri": "file:///a", "mimeType": "text/plain", "text": "A"},
        {"type": "resource_link", "uri": "file:///b", "name": "b"},
        {"image": 2, "mimeType": "audio/wav"},
    ]
    assert content.images == (
        Image(b"\x89PNG pixel", "image/png"),
        Image(b"\x89PNG pixel", "audio/wav"),
    )
    image_only = CallToolResult(content=[ImageContent(type="image", data=PIXEL, mime_type="x/y")])
    assert result_content(image_only) == ToolResult("", [Image(b"\x89PNG pixel", "x/y")])
    # Data that is not base64 is named, never passed on as text.
    broken = CallToolResult(content=[ImageContent(type="image", data="%%", mime_type="image/png")])
    named = result_content(broken)
    assert isinstance(named, str)
    assert json.loads(named) == {
        "mimeType": "image/png",
        "error": "the server sent data that is not base64",
    }


def test_text_blocks_with_images_are_the_text_they_give_alone_with_the_images_beside() -> None:
    def text(value: str) -> TextContent:
        return TextContent(type="text", text=value)

    png = ImageContent(type="image", data=PIXEL, mime_type="image/png")
    wav = AudioContent(type="audio", data=PIXEL, mime_type="audio/wav")
    pixel, sound = Image(b"\x89PNG pixel", "image/png"), Image(b"\x89PNG pixel", "audio/wav")
    captioned = CallToolResult(content=[text("Took screenshot"), png])
    assert result_content(captioned) == ToolResult("Took screenshot", [pixel])
    # Several text blocks read as they do without the images: a JSON list of their texts.
    texts = [text("page 1"), text("page 2")]
    assert result_content(CallToolResult(content=texts)) == '["page 1","page 2"]'
    interleaved = CallToolResult(content=[texts[0], png, texts[1], wav])
    assert result_content(interleaved) == ToolResult('["page 1","page 2"]', [pixel, sound])
    assert result_content(CallToolResult(content=[png, wav])) == ToolResult("", [pixel, sound])
    # Media that is not base64 is not an image: the JSON of the blocks names it.
    broken = ImageContent(type="image", data="%%", mime_type="image/png")
    named = result_content(CallToolResult(content=[text("shot"), broken, png]))
    assert isinstance(named, ToolResult)
    assert json.loads(named.text) == [
        "shot",
        {"mimeType": "image/png", "error": "the server sent data that is not base64"},
        {"image": 1, "mimeType": "image/png"},
    ]
    assert named.images == (pixel,)


def test_structured_or_empty_results() -> None:
    structured = CallToolResult(content=[], structured_content={"t": 21.5, "城市": "北京"})
    assert json.loads(result_content(structured)) == {"t": 21.5, "城市": "北京"}
    assert result_content(CallToolResult(content=[])) == ""
    # An empty text block says nothing: the structured content is what the model reads.
    blank = TextContent(type="text", text="")
    quiet = CallToolResult(content=[blank], structured_content={"t": 21.5})
    assert json.loads(result_content(quiet)) == {"t": 21.5}
    png = ImageContent(type="image", data=PIXEL, mime_type="image/png")
    pictured = CallToolResult(content=[blank, png], structured_content=[1, 2])
    assert result_content(pictured) == ToolResult("[1,2]", [Image(b"\x89PNG pixel", "image/png")])
    # Text the server wrote is what the model reads; the structured copy is not repeated.
    worded = CallToolResult(
        content=[TextContent(type="text", text="21.5 °C")], structured_content={}
    )
    assert result_content(worded) == "21.5 °C"
    assert result_content(CallToolResult(content=[blank, blank])) == ""


def test_binary_resources_reach_the_model_as_media_not_base64_text() -> None:
    def blob(uri: str, mime_type: str | None, data: str) -> EmbeddedResource:
        contents = BlobResourceContents(uri=uri, mime_type=mime_type, blob=data)
        return EmbeddedResource(type="resource", resource=contents)

    result = CallToolResult(
        content=[
            TextContent(type="text", text="attached"),
            blob("file:///shot.png", "image/png", PIXEL),
            blob("file:///raw", None, PIXEL),
            blob("file:///bad.pdf", "application/pdf", "%%"),
        ]
    )
    content = result_content(result)
    assert isinstance(content, ToolResult)
    assert PIXEL not in content.text
    assert json.loads(content.text) == [
        "attached",
        {
            "uri": "file:///shot.png",
            "mimeType": "image/png",
            "blob": {"image": 1, "mimeType": "image/png"},
        },
        {"uri": "file:///raw", "blob": {"image": 2, "mimeType": "application/octet-stream"}},
        {
            "uri": "file:///bad.pdf",
            "mimeType": "application/pdf",
            "blob": {
                "mimeType": "application/pdf",
                "error": "the server sent data that is not base64",
            },
        },
    ]
    assert content.images == (
        Image(b"\x89PNG pixel", "image/png"),
        Image(b"\x89PNG pixel", "application/octet-stream"),
    )


def test_error_text_joins_the_text_blocks() -> None:
    result = CallToolResult(
        content=[TextContent(type="text", text="bad"), TextContent(type="text", text="worse")],
        is_error=True,
    )
    assert error_text(result) == "bad\nworse"


def test_context_to_meta_drops_private_and_non_json_values(
    caplog: pytest.LogCaptureFixture,
) -> None:
    context = ToolContext({"user": "u1", "n": 3, "_secret": "s", "ledger": object(), "x": None})
    with caplog.at_level(logging.DEBUG, logger="tooluse.mcp"):
        assert tool_context_to_meta(context) == {"user": "u1", "n": 3, "x": None}
    assert "'ledger' is not sent" in caplog.text
    assert tool_context_to_meta(None) is None
    assert tool_context_to_meta(ToolContext({"_only": 1})) is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=8), JSON | st.builds(object), max_size=6))
def test_meta_is_the_public_json_part_of_the_context(entries: dict[str, Any]) -> None:
    expected = {
        key: value
        for key, value in entries.items()
        if not key.startswith("_") and type(value) is not object
    }
    assert (tool_context_to_meta(ToolContext(entries)) or {}) == expected


# -- the provider against in-process servers -----------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_served_tools_end_to_end_in_process(mode: str) -> None:
    server = mcp_server(
        greet, dawdle, explode, snapshot, name="local", tool_context={"tenant": "t1", "user": "x"}
    )
    async with McpToolProvider(InProcessServer(server, mode=mode)) as provider:
        assert names(provider) == ["greet", "dawdle", "explode", "snapshot"]
        reply = await by_name(provider, "greet").acall(
            '{"name": "Ann"}', ToolContext({"user": "client says", "_private": 1})
        )
        # The server's own context wins over what the client sends, which stays under mcp_meta.
        assert json.loads(reply) == {
            "greeting": "hello Ann",
            "context": {MCP_META_KEY: {"user": "client says"}, "tenant": "t1", "user": "x"},
        }
        with pytest.raises(ToolExecutionException, match="no can do"):
            await by_name(provider, "explode").acall("{}")
        with pytest.raises(ToolExecutionException, match=r"did not finish within 0\.2 seconds"):
            await by_name(provider, "dawdle").acall("")
        # The server validates the arguments and reports the error as its result.
        with pytest.raises(ToolExecutionException, match="Invalid arguments for tool 'greet'"):
            await by_name(provider, "greet").acall('{"name": ["not", "text"]}')
        # Arguments that are not a JSON object never leave: the model's to fix, even for a
        # processor that rethrows ValueError (pydantic's ValidationError is one).
        with pytest.raises(ToolArgumentsError, match="Invalid arguments for tool 'greet'"):
            await by_name(provider, "greet").acall('["not", "an object"]')
        assert await by_name(provider, "snapshot").acall("{}") == convert_result(
            Image(b"\x89PNG unit", "image/png")
        )


async def test_served_images_go_out_as_mcp_image_and_audio_blocks_after_the_text() -> None:
    wav = Image(b"RIFF", "audio/wav")

    @tool
    def album() -> dict[str, Any]:
        """Captioned media."""
        return {"caption": "home", "media": [Image(b"\x89PNG unit"), wav]}

    async with McpToolProvider(InProcessServer(mcp_server(snapshot, album))) as provider:
        connection = provider.connections[0]
        assert (await connection.call_tool("snapshot", {})).content == [
            ImageContent(
                type="image", data=base64.b64encode(b"\x89PNG unit").decode(), mime_type="image/png"
            )
        ]
        text, picture, sound = (await connection.call_tool("album", {})).content
        assert isinstance(text, TextContent)
        assert json.loads(text.text) == {
            "caption": "home",
            "media": [{"image": 1, "mimeType": "image/png"}, {"image": 2, "mimeType": "audio/wav"}],
        }
        assert isinstance(picture, ImageContent) and picture.mime_type == "image/png"
        assert sound == AudioContent(type="audio", data="UklGRg==", mime_type="audio/wav")


@pytest.mark.parametrize("mode", MODES)
async def test_served_json_objects_go_out_as_structured_content_too(mode: str) -> None:
    @tool
    def forecast(city: str) -> list[str]:
        """Not an object: text only."""
        return [city, "rain"]

    server = InProcessServer(mcp_server(greet, forecast, snapshot, explode), mode=mode)
    async with McpToolProvider(server) as provider:
        connection = provider.connections[0]
        greeting = await connection.call_tool("greet", {"name": "Ann"})
        (text,) = greeting.content
        assert isinstance(text, TextContent)
        # The object, with its JSON as the text block, as the specification asks.
        assert greeting.structured_content == json.loads(text.text)
        assert greeting.structured_content["greeting"] == "hello Ann"
        for name in ("forecast", "snapshot", "explode"):
            arguments = {"city": "Oslo"} if name == "forecast" else {}
            assert (await connection.call_tool(name, arguments)).structured_content is None


async def test_structured_content_that_breaks_the_output_schema_is_a_server_error() -> None:
    # The SDK validates structuredContent against the listed outputSchema (the specification:
    # clients SHOULD); a server breaking its own schema is the caller's problem.
    schema = {"type": "object", "properties": {"t": {"type": "number"}}, "required": ["t"]}
    listed = Tool(name="temp", input_schema={"type": "object"}, output_schema=schema)

    async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=[listed])

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        value = (params.arguments or {}).get("value")
        return CallToolResult(content=[], structured_content={"t": value})

    server = Server("thermo", on_list_tools=list_tools, on_call_tool=call_tool)
    async with McpToolProvider(InProcessServer(server)) as provider:
        (temp,) = provider.tool_callbacks()
        assert json.loads(await temp.acall('{"value": 21.5}')) == {"t": 21.5}
        with pytest.raises(McpServerError, match=r"Invalid structured content .* 'warm'"):
            await temp.acall('{"value": "warm"}')


@pytest.mark.parametrize("mode", MODES)
async def test_every_page_of_the_tool_list_is_listed(mode: str) -> None:
    def listed(name: str) -> Tool:
        return make_tool(name, {"type": "object"})

    pages = [[listed("a"), listed("b")], [listed("c")], [listed("d")]]
    cursors: list[str | None] = []

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        cursor = params.cursor if params is not None else None
        cursors.append(cursor)
        page = int(cursor or 0)
        following = str(page + 1) if page + 1 < len(pages) else None
        return ListToolsResult(tools=pages[page], next_cursor=following)

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=params.name)])

    server = Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)
    async with McpToolProvider(InProcessServer(server, mode=mode)) as provider:
        assert names(provider) == ["a", "b", "c", "d"]
        assert cursors == [None, "1", "2"]
        assert await by_name(provider, "d").acall("{}") == "d"


async def test_an_unknown_tool_is_a_protocol_error_that_propagates() -> None:
    async with McpToolProvider(InProcessServer(mcp_server(greet, name="local"))) as provider:
        ghost = McpToolCallback(
            provider.connections[0],
            make_tool("ghost"),
            name="ghost",
            context_to_meta=tool_context_to_meta,
        )
        with pytest.raises(McpServerError, match="'local' rejected tools/call 'ghost'") as raised:
            await ghost.acall("{}")
        assert (raised.value.server_name, raised.value.code) == ("local", -32602)
        # Through the loop: a protocol error reaches the caller, not the model.
        model = ScriptedModel([tool_call("ghost"), "unreachable"])
        with pytest.raises(McpServerError, match="ghost"):
            await ChatClient(model, tools=[ghost]).prompt().user("go").acall()


def test_tools_needing_approval_are_not_served_unless_allowed() -> None:
    @tool(requires_approval=True)
    def delete_everything() -> str:
        """Dangerous."""
        return "gone"

    with pytest.raises(ValueError, match="delete_everything require human approval"):
        mcp_server(greet, delete_everything)
    assert mcp_server(delete_everything, allow_approval_tools=True).name == "tooluse"
    with pytest.raises(ValueError, match="at least one tool"):
        mcp_server()


@pytest.mark.parametrize("mode", MODES)
async def test_colliding_names_across_servers(mode: str) -> None:
    servers = [
        InProcessServer(numbers_server("a"), mode=mode),
        InProcessServer(numbers_server("b"), mode=mode),
    ]
    async with McpToolProvider(*servers) as provider:
        assert names(provider) == ["one", "two", "nap", "alt_1_one", "alt_2_two", "alt_3_nap"]
        assert await by_name(provider, "alt_1_one").acall("{}") == "b:one"
        await provider.refresh()
        assert names(provider)[3:] == ["alt_1_one", "alt_2_two", "alt_3_nap"]
    async with McpToolProvider(*servers, naming="prefix") as provider:
        assert names(provider) == ["a_one", "a_two", "a_nap", "b_one", "b_two", "b_nap"]
    with pytest.raises(ValueError, match=r"Multiple MCP tools with the same name \(one, two, nap"):
        await McpToolProvider(*servers, naming="none").aconnect()


async def test_include_exclude_and_filter(caplog: pytest.LogCaptureFixture) -> None:
    a = InProcessServer(numbers_server("a"), include=["one", "nap", "typo"])
    b = InProcessServer(numbers_server("b"), exclude=["one"])
    with caplog.at_level(logging.WARNING, logger="tooluse.mcp"):
        provider = McpToolProvider(
            a, b, tool_filter=lambda server, t: not (server == "b" and t.name == "nap")
        )
        async with provider:
            assert names(provider) == ["one", "nap", "two"]
    assert "MCP server 'a' has no tools named typo" in caplog.text


async def test_a_call_that_takes_too_long_is_reported_not_waited_for() -> None:
    # Long enough that a quick call never misses it on a busy machine.
    provider = McpToolProvider(InProcessServer(numbers_server("slow")), call_timeout=1.0)
    async with provider:
        with pytest.raises(McpServerError, match="'slow' did not answer tools/call 'nap' within"):
            await by_name(provider, "nap").acall('{"seconds": 5}')
        assert await by_name(provider, "nap").acall('{"seconds": 0}') == "awake"


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_timeout_cancels_the_call_on_the_server(mode: str) -> None:
    server = MCPServer("slow")
    cancelled = asyncio.Event()

    @server.tool()
    async def wait() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()  # the server got notifications/cancelled
            raise
        return "never"

    def quick(server_name: str, listed: Tool) -> ToolMetadata:
        return ToolMetadata(timeout=0.3)

    async with McpToolProvider(InProcessServer(server, mode=mode), tool_metadata=quick) as mcp:
        model = ScriptedModel([tool_call("wait"), "Gave up."])
        await ChatClient(model, tools=[mcp]).prompt().user("wait").acall()
        (response,) = model.requests[1].messages[-1].responses
        assert response.data == "Tool 'wait' did not finish within 0.3 seconds."
        await asyncio.wait_for(cancelled.wait(), 5)


def test_sync_use_runs_on_the_thread_s_own_loop() -> None:
    with McpToolProvider(InProcessServer(numbers_server("sync"))) as provider:
        assert by_name(provider, "one").call("") == "sync:one"
        model = ScriptedModel([tool_call("two"), "done"])
        client = ChatClient(model, tools=[provider])
        assert client.prompt().user("two?").call().content() == "done"
        assert model.requests[1].messages[-1].responses[0].data == "sync:two"
        one = by_name(provider, "one")
    assert provider.connections[0].state == "closed"
    with pytest.raises(McpServerError, match=r"'sync' is not connected \(closed\)"):
        one.call("")


# -- failing to connect ------------------------------------------------------------------------


async def test_a_command_that_does_not_exist_is_named() -> None:
    provider = McpToolProvider(StdioServer("no-such-mcp-server-command-x", name="ghost"))
    with pytest.raises(McpServerError, match="'ghost': could not start 'no-such-mcp-server"):
        await provider.aconnect()


async def test_a_server_that_exits_at_once_is_reported() -> None:
    provider = McpToolProvider(
        StdioServer(sys.executable, ["-c", "import sys; sys.exit(3)"], name="quitter"),
        StdioServer(sys.executable, ["-c", "pass"], name="other"),
    )
    with pytest.raises(McpServerError) as raised:
        await provider.aconnect()
    message = str(raised.value)
    assert "'quitter' closed the connection during the handshake" in message
    assert "'other' closed the connection during the handshake" in message
    assert raised.value.server_name == "quitter, other"


async def test_a_server_that_never_answers_times_out() -> None:
    silent = StdioServer(sys.executable, ["-c", "import sys; sys.stdin.read()"], name="silent")
    provider = McpToolProvider(silent, connect_timeout=0.5)
    with pytest.raises(McpServerError, match="'silent' did not complete the connection"):
        await provider.aconnect()
    assert provider.connections[0].state == "closed"


# -- the command line (argument errors; the real runs are in test_mcp_servers.py) ----------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["mcp", "serve", "no_colon"], "expected MODULE:ATTR"),
        (["mcp", "serve", "tests/mcp_servers/tooluse_tools.py:missing"], "has no attribute"),
        (["mcp", "serve", "no_such_module_xyz:tools"], "No module named"),
        (["mcp", "tools"], "give one server: a command after `--`, --url URL, or --config"),
        (["mcp", "tools", "--url", "http://x/mcp", "--", "cmd"], "give one server"),
        (["mcp", "tools", "--config", "mcp.json", "--url", "http://x/mcp"], "give one server"),
        (["mcp", "tools", "--url", "http://x/mcp", "--header", "oops"], "NAME:VALUE"),
        (["mcp", "tools", "--header", "A: b", "--", "cmd"], "--header goes with --url"),
        (["mcp", "tools", "--server", "time", "--", "cmd"], "--server NAME picks a server of"),
    ],
)
def test_cli_argument_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(argv)
    assert status in (1, 2)
    assert message in capsys.readouterr().err


def test_cli_tools_names_the_server_to_pick_from_a_configuration_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mcp = tmp_path / "mcp.json"
    servers = {"time": {"command": "uvx"}, "crm": {"url": "http://127.0.0.1:9/mcp"}}
    mcp.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    assert main(["mcp", "tools", "--config", str(mcp)]) == 2
    assert capsys.readouterr().err == (
        f"tooluse mcp tools: --config {mcp} has 2 servers (time, crm): pick one with --server "
        f"NAME (`tooluse tools --mcp {mcp}` lists all their tools)\n"
    )
    assert main(["mcp", "tools", "--config", str(mcp), "--server", "tmie"]) == 2
    assert capsys.readouterr().err == (
        f"tooluse mcp tools: --config {mcp} has no server 'tmie'; its servers: time, crm\n"
    )
    mcp.write_text("{", encoding="utf-8")
    assert main(["mcp", "tools", "--config", str(mcp)]) == 2
    assert capsys.readouterr().err.startswith(
        f"tooluse mcp tools: --config {mcp} is not valid JSON: "
    )


def test_cli_names_its_flag_for_tools_needing_approval(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # loading puts the working directory on it
    assert main(["mcp", "serve", "tooluse.service:SAMPLE_TOOLS"]) == 2  # cancel_order is held
    err = capsys.readouterr().err
    assert err.startswith("tooluse mcp serve: tools cancel_order in tooluse.service:SAMPLE_TOOLS")
    assert "add --allow-approval-tools to serve them" in err
    assert "allow_approval_tools=" not in err  # the keyword argument of the library message


@pytest.mark.parametrize("port", ["65536", "99999", "-1", "http"])
def test_cli_serve_refuses_a_port_out_of_range(
    port: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tooluse.mcp import _server

    def serving(*args: object, **kwargs: object) -> None:
        raise AssertionError("the server started")

    monkeypatch.setattr(_server, "serve_tools", serving)
    with pytest.raises(SystemExit) as exit_:
        main(["mcp", "serve", "tests/mcp_servers/tooluse_tools.py:tools", "--http", port])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --http" in err and "Traceback" not in err


def test_cli_reports_a_stdio_server_that_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", "tools", "--", sys.executable, "-c", "pass"]) == 1
    assert "closed the connection during the handshake" in capsys.readouterr().err


async def test_closing_cuts_off_calls_in_flight_without_waiting_for_them() -> None:
    provider = McpToolProvider(InProcessServer(numbers_server("busy"), mode="legacy"))
    await provider.aconnect()
    nap = by_name(provider, "nap")
    calls = [asyncio.create_task(nap.acall('{"seconds": 30}')) for _ in range(3)]
    await asyncio.sleep(0.1)
    await asyncio.wait_for(provider.aclose(), timeout=5)
    for call in calls:
        with pytest.raises(McpServerError, match="'busy': tools/call 'nap' was cut off by closing"):
            await call
    assert provider.connections[0].state == "closed"
    assert provider.connections[0].failure is None


async def test_refresh_lists_again_and_keeps_names() -> None:
    server = numbers_server("growing")
    async with McpToolProvider(InProcessServer(server)) as provider:
        callbacks = provider.tool_callbacks()

        @server.tool()
        def three() -> str:
            return "3"

        assert provider.tool_callbacks() is callbacks  # nothing announced the change
        await provider.refresh()
        assert names(provider) == ["one", "two", "nap", "three"]
        assert provider.tool_callbacks()[0] is callbacks[0]


async def test_closing_while_connecting_does_not_hang() -> None:
    provider = McpToolProvider(InProcessServer(numbers_server("early")))
    connecting = asyncio.create_task(provider.aconnect())
    while provider.connections[0].state != "connecting":
        await asyncio.sleep(0)  # until the owner task exists (it has not connected yet)
    await asyncio.wait_for(provider.aclose(), timeout=5)
    await asyncio.wait_for(connecting, timeout=5)
    assert provider.connections[0].state == "closed"


class FilterBroke(Exception):
    """A user's callback failing in its own way."""


def _refuse_b(server: str, tool: Tool) -> bool:
    if server == "b":
        raise FilterBroke(f"no rule for {server}/{tool.name}")
    return True


def _no_metadata(server: str, tool: Tool) -> ToolMetadata:
    raise FilterBroke("no metadata")


def _no_name(server: str, tool: Tool) -> str:
    raise FilterBroke("no name")


@pytest.mark.parametrize(
    "options",
    [{"tool_filter": _refuse_b}, {"tool_metadata": _no_metadata}, {"naming": _no_name}],
    ids=["tool_filter", "tool_metadata", "naming"],
)
async def test_a_user_callback_failing_while_connecting_closes_every_server(
    options: dict[str, Any],
) -> None:
    provider = McpToolProvider(
        InProcessServer(numbers_server("a")), InProcessServer(numbers_server("b")), **options
    )
    with pytest.raises(FilterBroke):
        await provider.aconnect()  # the user's exception, as it was raised
    assert [c.state for c in provider.connections] == ["closed", "closed"]
    with pytest.raises(RuntimeError, match="not connected"):
        provider.tool_callbacks()


async def test_tool_metadata_can_hold_destructive_tools_for_approval() -> None:
    server = MCPServer("files")
    deleted: list[str] = []

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def delete_file(path: str) -> str:
        deleted.append(path)
        return f"deleted {path}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def read_file(path: str) -> str:
        return f"contents of {path}"

    def needs_approval(server_name: str, mcp_tool: Tool) -> ToolMetadata:
        annotations = mcp_tool.annotations
        return ToolMetadata(requires_approval=bool(annotations and annotations.destructive_hint))

    async with McpToolProvider(InProcessServer(server), tool_metadata=needs_approval) as provider:
        assert [c.metadata.requires_approval for c in provider.tool_callbacks()] == [True, False]
        model = ScriptedModel([tool_call("delete_file", {"path": "/tmp/x"}), "Deleted."])
        client = ChatClient(model, tools=[provider])
        paused = await client.prompt().user("delete /tmp/x").acall()
        assert [call.name for call in paused.pending_tool_calls] == ["delete_file"]
        assert deleted == []
        assert paused.state is not None
        decisions = {paused.pending_tool_calls[0].id: Approve()}
        resumed = await client.aresume(paused.state, decisions)
        assert resumed.content() == "Deleted."
        assert deleted == ["/tmp/x"]


async def test_prefixed_names_that_collide_are_an_error_naming_both_tools() -> None:
    # "github" + "enterprise_search" and "github_enterprise" + "search" both give
    # github_enterprise_search: the model would see two tools of one name.
    first, second = MCPServer("github"), MCPServer("github_enterprise")

    @first.tool()
    def enterprise_search(query: str) -> str:
        return "github.com"

    @second.tool()
    def search(query: str) -> str:
        return "enterprise server"

    provider = McpToolProvider(InProcessServer(first), InProcessServer(second), naming="prefix")
    with pytest.raises(ValueError, match="'enterprise_search' of github, 'search' of github_ent"):
        await provider.aconnect()
    assert [c.state for c in provider.connections] == ["closed", "closed"]


@tool
def read_page(url: str) -> str:
    """Reads a page; the read times out."""
    raise TimeoutError("The read operation timed out")


@tool(timeout=30)
def read_page_bounded(url: str) -> str:
    """Reads a page, with a tool timeout; the read times out at once."""
    raise TimeoutError("The read operation timed out")


async def test_a_served_tool_s_own_timeout_error_is_an_error_result_like_any_failure() -> None:
    # Only the tool's `timeout=` is "did not finish"; a TimeoutError the tool raises (urllib's
    # read timeout, asyncio.wait_for) is a failure the model reads, as with local tools.
    async with McpToolProvider(InProcessServer(mcp_server(read_page, read_page_bounded))) as mcp:
        for name in ("read_page", "read_page_bounded"):
            with pytest.raises(ToolExecutionException, match=r"^The read operation timed out$"):
                await by_name(mcp, name).acall('{"url": "https://example.com"}')


async def test_a_call_from_another_thread_that_takes_too_long_is_an_mcp_server_error() -> None:
    provider = McpToolProvider(InProcessServer(numbers_server("slow")), call_timeout=0.3)
    async with provider:
        nap = by_name(provider, "nap")

        def call_from_a_thread() -> list[BaseException]:
            raised: list[BaseException] = []
            for _ in range(4):
                try:
                    nap.call('{"seconds": 2}')
                except Exception as exc:
                    raised.append(exc)
            return raised

        raised = await asyncio.to_thread(call_from_a_thread)
    assert len(raised) == 4
    for exc in raised:  # not a bare TimeoutError from the hand-over between loops
        assert isinstance(exc, McpServerError), repr(exc)
        assert "'slow' did not answer tools/call 'nap' within 0.3 seconds" in str(exc)


async def _listening(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True


async def test_cancelling_http_serving_frees_the_port_to_serve_again() -> None:
    port = free_port()
    for _ in range(2):  # the second server needs the port the first one had
        serving = asyncio.create_task(aserve_tools(greet, transport="http", port=port))
        while not await _listening(port):
            assert not serving.done(), serving.exception()
            await asyncio.sleep(0.02)
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving
        assert not await _listening(port)
