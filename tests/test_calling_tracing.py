"""Each tool execution is an OpenTelemetry span with GenAI semantic-convention attributes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from _calling_tools import FakeTool, prompt_with, tool_calls_response
from tooluse import DefaultToolExecutionExceptionProcessor, ToolCallingManager
from tooluse import _tracing as tracing


def tool_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]


async def test_one_span_per_execution_with_genai_attributes(exporter: InMemorySpanExporter) -> None:
    tracer = tracing._current_tracer()
    assert tracer is not None  # the recording tracer the fixture installed
    with tracer.start_as_current_span("turn") as parent:
        await ToolCallingManager().aexecute_tool_calls(
            prompt_with([FakeTool("weather"), FakeTool("time")]),
            tool_calls_response(("weather", ""), ("time", ""), ("nope", "")),
        )
    spans = sorted(tool_spans(exporter), key=lambda s: s.name)
    assert [s.name for s in spans] == ["execute_tool time", "execute_tool weather"]
    weather = spans[1]
    assert dict(weather.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "weather",
        "gen_ai.tool.call.id": "c0",
        "gen_ai.tool.type": "function",
    }
    assert weather.kind == trace.SpanKind.INTERNAL
    assert weather.status.status_code == StatusCode.UNSET
    # concurrent calls are siblings under the caller's span
    parent_id = parent.get_span_context().span_id
    assert all(s.parent is not None and s.parent.span_id == parent_id for s in spans)


async def test_error_results_and_timeouts_mark_the_span(exporter: InMemorySpanExporter) -> None:

    def fail() -> str:
        raise ValueError("bad city")

    async def hang() -> str:
        await asyncio.sleep(5)
        return ""

    await ToolCallingManager().aexecute_tool_calls(
        prompt_with([FakeTool("fail", fail), FakeTool("hang", hang, timeout=0.01)]),
        tool_calls_response(("fail", ""), ("hang", "")),
    )
    by_name = {s.name: s for s in tool_spans(exporter)}
    failed = by_name["execute_tool fail"]
    assert (failed.attributes or {})["error.type"] == "ValueError"
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.status.description == "bad city"
    timed_out = by_name["execute_tool hang"]
    assert (timed_out.attributes or {})["error.type"] == "timeout"


async def test_a_propagating_exception_is_recorded(exporter: InMemorySpanExporter) -> None:

    class Fatal(RuntimeError):
        pass

    def fail() -> str:
        raise Fatal("stop")

    manager = ToolCallingManager(
        exception_processor=DefaultToolExecutionExceptionProcessor(rethrow=[Fatal])
    )
    with pytest.raises(Fatal):
        await manager.aexecute_tool_calls(
            prompt_with([FakeTool("f", fail)]), tool_calls_response(("f", ""))
        )
    (span,) = tool_spans(exporter)
    assert (span.attributes or {})["error.type"].endswith("Fatal")
    assert span.status.status_code == StatusCode.ERROR
    assert [e.name for e in span.events] == ["exception"]


def test_without_opentelemetry_spans_are_no_ops() -> None:
    # Load the module on its own (the package pulls in SDKs that need OpenTelemetry).
    script = textwrap.dedent(
        """
        import importlib.util, sys
        sys.modules["opentelemetry"] = None  # makes `import opentelemetry` fail
        spec = importlib.util.spec_from_file_location("tracing_probe", sys.argv[1])
        tracing = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tracing)
        assert tracing._current_tracer() is None
        with tracing.start_span("execute_tool x", {"gen_ai.tool.name": "x"}) as span:
            span.set_attribute("k", 1)
            span.set_error("timeout")
        try:
            with tracing.start_span("execute_tool x", {}):
                raise KeyError("propagates")
        except KeyError:
            print("ok")
        """
    )
    module = Path(tracing.__file__)
    done = subprocess.run(
        [sys.executable, "-c", script, str(module)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


async def test_the_manager_runs_untraced(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tracing, "_tracer", None)
    result = await ToolCallingManager().aexecute_tool_calls(
        prompt_with([FakeTool("a")]), tool_calls_response(("a", ""), ("b", ""))
    )
    assert [r.is_error for r in result.conversation_history[-1].responses] == [False, True]
    assert tool_spans(exporter) == []
