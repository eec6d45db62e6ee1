"""Fixtures shared by several test modules."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tooluse import _tracing

# Helper modules whose asserts should report their values like the tests' own.
pytest.register_assert_rewrite("_memory_helpers")


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """Records the spans tooluse starts during this test.

    Only tooluse's tracer is swapped for one of a private SDK provider: setting the global
    tracer provider would make every later test (and library) in the process trace too.
    """
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    monkeypatch.setattr(_tracing, "_tracer", provider.get_tracer("tooluse"))
    return memory
