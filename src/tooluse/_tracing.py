"""OpenTelemetry spans for tool executions and model calls.

OpenTelemetry is optional (the ``otel`` extra): when ``opentelemetry`` cannot be imported,
:func:`start_span` yields a do-nothing handle, so callers never branch on it. Attribute names
follow the OpenTelemetry GenAI semantic conventions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "ERROR_TYPE",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "AttributeValue",
    "SpanHandle",
    "error_type_of",
    "start_span",
]

GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
ERROR_TYPE: Final = "error.type"

AttributeValue = str | bool | int | float


def _load_tracer() -> Tracer | None:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    # A proxy until the application installs a tracer provider; it follows that provider later.
    return trace.get_tracer("tooluse")


_tracer: Tracer | None = _load_tracer()


class SpanHandle(Protocol):
    """What code inside a span may do with it."""

    def set_attribute(self, key: str, value: AttributeValue) -> None: ...

    def set_error(self, error_type: str, description: str | None = None) -> None:
        """Mark the operation failed without an exception escaping (e.g. an error result)."""
        ...


class _NoopSpanHandle:
    __slots__ = ()

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        pass

    def set_error(self, error_type: str, description: str | None = None) -> None:
        pass


class _OtelSpanHandle:
    __slots__ = ("_span",)

    def __init__(self, span: Span) -> None:
        self._span = span

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        self._span.set_attribute(key, value)

    def set_error(self, error_type: str, description: str | None = None) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute(ERROR_TYPE, error_type)
        self._span.set_status(Status(StatusCode.ERROR, description))


_NOOP_HANDLE: Final = _NoopSpanHandle()


def error_type_of(exc: BaseException) -> str:
    """The ``error.type`` value for an exception: its fully qualified class name."""
    cls = type(exc)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


@contextlib.contextmanager
def start_span(name: str, attributes: Mapping[str, AttributeValue]) -> Iterator[SpanHandle]:
    """Run the block in an INTERNAL span ``name`` (the current span becomes its parent).

    An exception escaping the block is recorded on the span with ``error.type`` set.
    """
    if _tracer is None:
        yield _NOOP_HANDLE
        return
    with _tracer.start_as_current_span(name, attributes=attributes) as span:
        try:
            yield _OtelSpanHandle(span)
        except BaseException as exc:
            span.set_attribute(ERROR_TYPE, error_type_of(exc))
            raise
