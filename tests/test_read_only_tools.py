"""Read-only vs write tools: declared with ``@tool(read_only=...)``, read from an MCP server's
annotations and ``mcp.json``, and held for approval by a manager's ``write_approval`` policy
(the service's default)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import Tool, ToolAnnotations

from _calling_tools import FakeTool, prompt_with, tool_calls_response
from _service_helpers import names, parse_sse, respond, service
from tooluse import ToolCallingManager, ToolMetadata, tool, tool_callbacks
from tooluse.mcp import (
    InProcessServer,
    McpConfigError,
    McpToolProvider,
    StdioServer,
    ToolSettings,
    annotated_metadata,
    mcp_server,
    mcp_servers_from_config,
)
from tooluse.messages import Prompt, UserMessage
from tooluse.testing import FunctionModel, ResponseLike, tool_call


def kinds(**tools: dict[str, Any]) -> list[FakeTool]:
    return [FakeTool(name, **metadata) for name, metadata in tools.items()]


async def held_names(manager: ToolCallingManager, tools: list[FakeTool]) -> list[str]:
    calls = [(t.definition.name, "{}") for t in tools]
    result = await manager.aexecute_tool_calls(prompt_with(tools), tool_calls_response(*calls))
    return [pending.name for pending in result.pending_tool_calls]


async def test_a_write_policy_holds_the_tools_not_marked_read_only() -> None:
    tools = kinds(
        look={"read_only": True},
        note={},
        wipe={"destructive": True},
        ping={"requires_approval": False},  # opted out of the policy
        send={"requires_approval": True, "read_only": True},  # its own rule still holds
    )
    assert await held_names(ToolCallingManager(write_approval="writes"), tools) == [
        "note",
        "wipe",
        "send",
    ]
    assert [t.definition.name for t in tools if t.calls] == ["look", "ping"]
    assert await held_names(ToolCallingManager(write_approval="destructive"), tools) == [
        "wipe",
        "send",
    ]
    assert await held_names(ToolCallingManager(), tools) == ["send"]  # the library default
    with pytest.raises(ValueError, match="write_approval must be one of none, writes"):
        ToolCallingManager(write_approval="all")  # type: ignore[arg-type]


async def test_the_hold_names_the_reason() -> None:
    manager = ToolCallingManager(write_approval="writes")
    note = FakeTool("note")
    result = await manager.aexecute_tool_calls(
        prompt_with([note]), tool_calls_response(("note", '{"text": "x"}'))
    )
    assert result.pending_tool_calls[0].reason == (
        "Tool 'note' can change data (it is not marked read-only)"
    )
    assert note.calls == []


def test_tool_declares_its_kind() -> None:
    @tool(read_only=True)
    def look(q: str) -> str:
        return q

    @tool(destructive=True)
    def wipe(path: str) -> str:
        return path

    look_cb, wipe_cb = tool_callbacks(look, wipe)
    assert (look_cb.metadata.read_only, look_cb.metadata.destructive) == (True, False)
    assert (wipe_cb.metadata.read_only, wipe_cb.metadata.destructive) == (False, True)
    assert wipe_cb.metadata.requires_approval is None  # unset: the policy decides
    with pytest.raises(ValueError, match="both read_only and destructive"):
        ToolMetadata(read_only=True, destructive=True)


def hinted(**hints: Any) -> Tool:
    annotations = ToolAnnotations(**hints) if hints else None
    return Tool(name="t", input_schema={"type": "object"}, annotations=annotations)


@pytest.mark.parametrize(
    ("tool_", "settings", "expected"),
    [
        # the specification's defaults: no annotations is a write that may destroy
        (hinted(), ToolSettings(), (False, True, None)),
        (hinted(read_only_hint=True), ToolSettings(), (True, False, None)),
        (
            hinted(read_only_hint=False, destructive_hint=False),
            ToolSettings(),
            (False, False, None),
        ),
        (hinted(read_only_hint=True), ToolSettings(read_only=False), (False, True, None)),
        (hinted(), ToolSettings(read_only=True, approval="never"), (True, False, False)),
        (hinted(read_only_hint=True), ToolSettings(approval="always"), (True, False, True)),
    ],
)
def test_mcp_annotations_and_settings_give_the_metadata(
    tool_: Tool, settings: ToolSettings, expected: tuple[bool, bool, bool | None]
) -> None:
    metadata = annotated_metadata(tool_, settings)
    assert (metadata.read_only, metadata.destructive, metadata.requires_approval) == expected


async def test_a_served_tool_keeps_its_kind_across_mcp() -> None:
    @tool(read_only=True)
    def look(q: str) -> str:
        return q

    @tool
    def note(text: str) -> str:
        return text

    server = InProcessServer(
        mcp_server(look, note, name="local"), tool_settings={"note": ToolSettings(approval="never")}
    )
    async with McpToolProvider(server) as provider:
        metadata = {c.definition.name: c.metadata for c in provider.tool_callbacks()}
    assert (metadata["look"].read_only, metadata["note"].read_only) == (True, False)
    assert metadata["note"].requires_approval is False


def test_mcp_json_takes_tooluse_settings_beside_the_clients_servers() -> None:
    config = {
        "mcpServers": {
            "git": {"command": "uvx", "args": ["mcp-server-git"]},
            "time": {"command": "uvx", "args": ["mcp-server-time"], "exclude": ["x"]},
        },
        "tooluse": {
            "servers": {
                "git": {
                    "approval": "always",
                    "include": ["git_status", "git_commit"],
                    "tools": {"git_status": {"readOnly": True, "approval": "never"}},
                },
                "time": {"readOnly": True},
            }
        },
    }
    git, time = mcp_servers_from_config(config, where="mcp.json")
    assert isinstance(git, StdioServer) and git.include == {"git_status", "git_commit"}
    assert git.settings_for("git_commit") == ToolSettings(approval="always")
    assert git.settings_for("git_status") == ToolSettings(approval="never", read_only=True)
    assert time.exclude == {"x"} and time.settings_for("y") == ToolSettings(read_only=True)
    # What the clients read is untouched: each server entry has only their fields.
    assert set(config["mcpServers"]["git"]) == {"command", "args"}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"servers": {"nope": {}}}, r"names 'nope', which are not in the servers \('git'\)"),
        ({"servers": {"git": {"approval": "maybe"}}}, r'"approval" must be "auto" or "always"'),
        ({"servers": {"git": {"command": "x"}}}, r'"command" is not a field of the tooluse'),
        ({"servers": {"git": {"tools": {"t": {"readOnly": "yes"}}}}}, r'"readOnly" must be true'),
        (
            {"servers": {"git": {"tools": {"t": {"include": []}}}}},
            r'"t": "include" is not a field of the settings of a tool',
        ),
        ({"servers": {"git": {"exclude": ["a"]}}}, r'"exclude" given both in the server entry'),
        ({"other": 1}, r'"other": only "servers"'),
        ([], r'"tooluse" must be an object'),
    ],
)
def test_bad_tooluse_settings_are_named(section: object, message: str) -> None:
    config = {
        "mcpServers": {"git": {"command": "uvx", "exclude": ["b"]}},
        "tooluse": section,
    }
    with pytest.raises(McpConfigError, match=message):
        mcp_servers_from_config(config, where="mcp.json")


def _note_taking_user(prompt: Prompt) -> ResponseLike:
    last = prompt.messages[-1]
    if prompt.options.tool_callbacks and isinstance(last, UserMessage):
        return [tool_call("note", {"text": "hi"}, id="n1"), tool_call("look", {"q": "x"}, id="l1")]
    return respond(prompt)


async def test_the_service_holds_an_mcp_write_tool_and_runs_the_read_only_one(
    tmp_path: Path,
) -> None:
    """With the service's default policy, a tool the server does not mark read-only waits for
    approval, with no approval setting anywhere."""
    server = MCPServer("notes")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def look(q: str) -> str:
        return f"found {q}"

    written: list[str] = []

    @server.tool()
    def note(text: str) -> str:
        written.append(text)
        return "noted"

    model = FunctionModel(_note_taking_user)
    async with service(
        tmp_path / "s.db", model=model, mcp_servers=[InProcessServer(server, name="notes")]
    ) as client:
        events = parse_sse((await client.post("/api/chat", json={"message": "note"})).text)
        listed = {t["name"]: t for t in (await client.get("/api/tools")).json()}
        assert names(events) == ["tool_call", "tool_call", "tool_result", "approval_required"]
        assert (events[2][1]["name"], events[2][1]["result"]) == ("look", "found x")
        assert written == []
        resumed = await client.post(
            f"/api/approvals/{events[-1][1]['approval_id']}",
            json={"decisions": {"n1": {"approve": True}}},
        )
    assert names(parse_sse(resumed.text))[-1] == "done"
    assert written == ["hi"]
    assert (listed["note"]["requires_approval"], listed["look"]["requires_approval"]) == (
        True,
        False,
    )
