"""Fixtures shared by several test modules."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture(scope="session")
def span_store() -> InMemorySpanExporter:
    """Records every finished span (the global tracer provider can be set only once per
    process, so one SDK provider and one recorder serve the whole session)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return memory


@pytest.fixture
def exporter(span_store: InMemorySpanExporter) -> InMemorySpanExporter:
    """The span recorder, emptied for this test."""
    span_store.clear()
    return span_store
