"""docs/mcp.md's examples run as written, with what they reach out to stood in for visibly:
``uvx mcp-server-time`` is a ``uvx`` on ``PATH`` that runs the installed ``mcp-server-time``
(no download), the CRM at ``http://127.0.0.1:8000/mcp`` is a tool served over streamable HTTP
on a free port (the example's URL is rewritten to it), and ``from_config()`` reads
``TOOLUSE_MODEL`` and ``OPENAI_BASE_URL``, which point at the local OpenAI-format server of
``provider_server``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.types import Tool, ToolAnnotations

from _doc_examples import DOCS, python_examples, run_examples
from _ports import free_port
from provider_payloads import openai_call, openai_completion
from provider_server import Reply, shared_server
from tooluse import ToolContext, tool
from tooluse.mcp import McpToolProvider, StdioServer, aserve_tools

DOC = DOCS / "mcp.md"
CRM_URL = "http://127.0.0.1:8000/mcp"


@tool
def whoami(context: ToolContext) -> dict[str, Any]:
    """Who the CRM sees calling."""
    return dict(context)


def _authorization(request_context: Any) -> dict[str, str]:
    return {"authorization": request_context.request.headers["authorization"]}


@pytest.fixture
def crm_url() -> Iterator[str]:
    """``whoami`` served over streamable HTTP by a thread of this process."""
    port = free_port()
    loop = asyncio.new_event_loop()
    serving = loop.create_task(
        aserve_tools(whoami, name="crm", transport="http", port=port, tool_context=_authorization)
    )

    def serve() -> None:
        with contextlib.suppress(asyncio.CancelledError):  # how the fixture stops it
            loop.run_until_complete(serving)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/mcp"
    loop.call_soon_threadsafe(serving.cancel)
    thread.join(timeout=10)
    loop.close()


@pytest.fixture
def uvx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``uvx`` that runs the installed ``mcp-server-time`` and nothing else."""
    shim = tmp_path / "bin" / "uvx"
    shim.parent.mkdir()
    shim.write_text(
        "#!/bin/sh\n"
        '[ "$1" = mcp-server-time ] || { echo "test uvx: only mcp-server-time" >&2; exit 1; }\n'
        f'shift\nexec "{sys.executable}" -m mcp_server_time --local-timezone UTC "$@"\n',
        encoding="utf-8",
    )
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.usefixtures("uvx")
def test_the_client_example_runs(
    crm_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = shared_server()
    calls = [
        openai_call("t1", "get_current_time", {"timezone": "Asia/Tokyo"}),
        openai_call("w1", "whoami", {}),
    ]
    server.expect(
        Reply.json(openai_completion(tool_calls=calls, finish_reason="tool_calls")),
        Reply.json(openai_completion("It is evening in Tokyo.")),
    )
    monkeypatch.setenv("TOOLUSE_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    example = python_examples(DOC)[0]
    assert CRM_URL in example
    run_examples(DOC, [example.replace(CRM_URL, crm_url)], {"__name__": "mcp_doc"})
    assert capsys.readouterr().out == "It is evening in Tokyo.\n"
    first, second = (request.body for request in server.requests)
    offered = {tool["function"]["name"] for tool in first["tools"]}
    assert {"get_current_time", "convert_time", "whoami"} <= offered
    results = {m["tool_call_id"]: m["content"] for m in second["messages"] if m["role"] == "tool"}
    assert json.loads(results["t1"])["timezone"] == "Asia/Tokyo"
    # The header went to the CRM with the request, the tool context as the call's _meta.
    assert json.loads(results["w1"]) == {
        "authorization": "Bearer t",
        "mcp_meta": {"user_id": "42"},
    }


def test_the_metadata_example_holds_destructive_tools_for_approval() -> None:
    namespace = run_examples(DOC, python_examples(DOC)[1:2], {"__name__": "mcp_doc"})

    def metadata(annotations: ToolAnnotations | None) -> Any:
        listed = Tool(name="git_reset", input_schema={"type": "object"}, annotations=annotations)
        return namespace["needs_approval"]("git", listed)

    assert metadata(ToolAnnotations(destructive_hint=True)).requires_approval is True
    assert metadata(ToolAnnotations(read_only_hint=True)).requires_approval is False
    assert (
        metadata(ToolAnnotations(read_only_hint=False, destructive_hint=False)).requires_approval
        is False
    )
    # The specification's defaults: readOnlyHint false, destructiveHint true, and
    # destructiveHint counts only when readOnlyHint is false.
    assert metadata(None).requires_approval is True
    assert metadata(ToolAnnotations(idempotent_hint=True)).requires_approval is True
    assert (
        metadata(ToolAnnotations(read_only_hint=True, destructive_hint=True)).requires_approval
        is False
    )


def test_the_served_tools_answer_over_stdio(tmp_path: Path) -> None:
    script = tmp_path / "weather_server.py"
    script.write_text(python_examples(DOC)[2], encoding="utf-8")
    with McpToolProvider(StdioServer(sys.executable, [str(script)])) as mcp:
        (weather,) = mcp.tool_callbacks()
        assert weather.definition.name == "get_weather"
        assert weather.call('{"city": "Paris"}') == '{"city":"Paris","temperature":21}'
