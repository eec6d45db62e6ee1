"""MCP server configuration files (``{"mcpServers": {...}}``) read into server parameters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooluse.mcp import (
    HttpServer,
    McpConfigError,
    McpServerError,
    McpToolProvider,
    StdioServer,
    load_mcp_config,
    mcp_servers_from_config,
)

ENVIRON = {"CRM_TOKEN": "t0k", "DATA": "/srv/data"}


def servers(config: object) -> tuple[Any, ...]:
    return mcp_servers_from_config(config, where="mcp.json", environ=ENVIRON)


def test_claude_desktop_stdio_servers() -> None:
    (time, files) = servers(
        {
            "mcpServers": {
                "time": {"command": "uvx", "args": ["mcp-server-time"]},
                "files": {
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-filesystem", "${DATA}"],
                    "env": {"LOG": "${LOG_LEVEL:-info}", "HOME_DIR": "${env:DATA}"},
                },
            },
            "globalShortcut": "Ctrl+Space",  # the client's other settings are not ours
        }
    )
    assert time == StdioServer("uvx", ["mcp-server-time"], name="time")
    assert time.env is None  # no "env": the SDK's default variables only
    assert files == StdioServer(
        "npx",
        ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"],
        name="files",
        env={"LOG": "info", "HOME_DIR": "/srv/data"},
    )


@pytest.mark.parametrize("kind", [None, "http", "streamable-http", "streamableHttp"])
def test_http_servers_by_url_or_type(kind: str | None) -> None:
    entry: dict[str, Any] = {
        "url": "https://crm.example/mcp",
        "headers": {"Authorization": "Bearer ${CRM_TOKEN}"},
    }
    if kind is not None:
        entry["type"] = kind
    (crm,) = servers({"mcpServers": {"crm": entry}})
    assert isinstance(crm, HttpServer)
    assert (crm.name, crm.url) == ("crm", "https://crm.example/mcp")
    assert crm.headers == {"Authorization": "Bearer t0k"}


def test_vs_code_servers_and_tooluse_settings() -> None:
    (git,) = servers(
        {
            "servers": {
                "git": {
                    "type": "stdio",
                    "command": "uvx",
                    "args": ["mcp-server-git"],
                    "required": False,
                    "include": ["git_status", "git_log"],
                    "exclude": ["git_reset"],
                    "mode": "legacy",
                }
            }
        }
    )
    assert git == StdioServer(
        "uvx",
        ["mcp-server-git"],
        name="git",
        required=False,
        include={"git_status", "git_log"},
        exclude={"git_reset"},
        mode="legacy",
    )


def test_a_file_gives_its_directory_to_a_relative_cwd(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    config = {"mcpServers": {"local": {"command": "python", "args": ["s.py"], "cwd": "tools"}}}
    path.write_text(json.dumps(config), encoding="utf-8")
    (local,) = load_mcp_config(path)
    assert isinstance(local, StdioServer)
    assert local.cwd == tmp_path / "tools"


async def test_a_relative_command_is_looked_up_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not from the file's directory, as no client does (docs/service.md); when it is not
    found there, the error says where it was looked up."""
    config_dir, working_dir = tmp_path / "config", tmp_path / "work"
    config_dir.mkdir()
    working_dir.mkdir()
    (config_dir / "server.sh").write_text("#!/bin/sh\nexit 3\n", encoding="utf-8")
    path = config_dir / "mcp.json"
    config = {"mcpServers": {"local": {"command": "./server.sh", "args": ["data.json"]}}}
    path.write_text(json.dumps(config), encoding="utf-8")
    (local,) = load_mcp_config(path)
    assert isinstance(local, StdioServer)
    assert (local.command, local.args, local.cwd) == ("./server.sh", ("data.json",), None)

    monkeypatch.chdir(working_dir)
    with pytest.raises(McpServerError) as failed:
        await McpToolProvider(local).aconnect()
    assert str(failed.value).startswith(
        "MCP server 'local': could not start './server.sh' (a relative path, looked up from "
        f"the working directory {working_dir}): [Errno 2] No such file or directory"
    ), failed.value


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ([], 'mcp.json must be a JSON object with "mcpServers", got a list []'),
        ({"mcp": {}}, 'mcp.json has no "mcpServers" object: write {"mcpServers": {"NAME": {'),
        ({"mcpServers": {}, "servers": {}}, 'has both "mcpServers" and "servers": keep one'),
        ({"mcpServers": ["a"]}, '"mcpServers" must be an object of servers by name, got a list'),
        ({"mcpServers": {}}, 'mcp.json: "mcpServers" has no servers'),
        ({"mcpServers": {"a": "uvx a"}}, "server 'a' must be an object, got a string \"uvx a\""),
        ({"mcpServers": {" ": {"command": "x"}}}, "a server needs a non-blank name"),
        ({"mcpServers": {"a": {}}}, "server 'a' needs \"command\" (a server to run over stdio)"),
        (
            {"mcpServers": {"a": {"command": "x", "url": "http://h/mcp"}}},
            'server \'a\' has both "command" (stdio) and "url" (HTTP)',
        ),
        (
            {"mcpServers": {"a": {"type": "sse", "url": "http://h/sse"}}},
            '"type": "sse" (the deprecated HTTP+SSE transport) is not supported',
        ),
        (
            {"mcpServers": {"a": {"type": "ws", "url": "ws://h"}}},
            '"type" must be one of "stdio", "http", "streamable-http", "streamableHttp", got "ws"',
        ),
        (
            {"mcpServers": {"a": {"command": "x", "envFile": ".env"}}},
            '"envFile" is not supported; put the variables in "env"',
        ),
        (
            {"mcpServers": {"a": {"command": "x", "headers": {}}}},
            '"headers" is not a field of a stdio server (it has command, args, env, cwd, type',
        ),
        (
            {"mcpServers": {"a": {"url": "http://h/mcp", "args": []}}},
            '"args" is not a field of an HTTP server (it has url, headers, type',
        ),
        (
            {"mcpServers": {"a": {"command": "x", "autoApprove": ["t"]}}},
            '"autoApprove" is not supported (the fields are command, args, env, cwd, type, '
            "required, include, exclude, mode); remove it",
        ),
        ({"mcpServers": {"a": {"command": ""}}}, '"command" must be a non-blank string, got'),
        ({"mcpServers": {"a": {"command": "x", "args": "-v"}}}, '"args" must be a list of str'),
        (
            {"mcpServers": {"a": {"command": "x", "env": {"PORT": 80}}}},
            '"env" must be an object of strings (e.g. {"NAME": "value"}), got an object',
        ),
        ({"mcpServers": {"a": {"command": "x", "required": "no"}}}, '"required" must be true'),
        ({"mcpServers": {"a": {"command": "x", "include": "t"}}}, '"include" must be a list'),
        ({"mcpServers": {"a": {"command": "x", "mode": "new"}}}, '"mode" must be "auto" or'),
        ({"mcpServers": {"a": {"url": "ftp://h/mcp"}}}, "needs an http:// or https:// URL"),
        (
            {"mcpServers": {"a": {"command": "${NO_SUCH_VARIABLE}"}}},
            "server 'a': \"command\" uses the environment variable NO_SUCH_VARIABLE, which is "
            "not set (set it, or give a default: ${NO_SUCH_VARIABLE:-value})",
        ),
        (
            {"mcpServers": {"a": {"url": "http://h/mcp", "headers": {"K": "${input:key}"}}}},
            'server \'a\': "headers"."K": ${input:key} is not supported: only environment '
            "variables are",
        ),
    ],
)
def test_a_bad_configuration_is_a_specific_error(config: object, message: str) -> None:
    with pytest.raises(McpConfigError) as raised:
        servers(config)
    assert message in str(raised.value)
    assert str(raised.value).startswith("mcp.json")


def test_a_file_that_is_missing_or_not_json(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError, match=r"none\.json: cannot read the MCP configuration"):
        load_mcp_config(tmp_path / "none.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {', encoding="utf-8")
    with pytest.raises(McpConfigError, match=r"broken\.json is not valid JSON: .* line 1"):
        load_mcp_config(broken)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["command", "args", "env", "url", "headers", "type", "cwd", "x"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(st.one_of(_JSON, st.builds(lambda e: {"mcpServers": {"s": e}}, _JSON)))
def test_any_json_is_servers_or_a_config_error(config: object) -> None:
    try:
        parsed = servers(config)
    except McpConfigError as exc:
        assert str(exc).startswith("mcp.json")
    else:
        assert all(isinstance(server, StdioServer | HttpServer) for server in parsed)
