"""Fixtures shared by several test modules."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator

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


@pytest.fixture
def no_resource_warnings() -> Iterator[None]:
    """Fails the test if a socket, transport or event loop was left unclosed (garbage is
    collected first, so what was dropped unclosed is found)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        yield
        gc.collect()
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert unclosed == []
