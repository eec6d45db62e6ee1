"""OpenTelemetry spans for tool executions and model calls.

OpenTelemetry is optional (the ``otel`` extra): when ``opentelemetry`` cannot be imported, or no
tracer provider records the span, :func:`start_span` gives a do-nothing handle and attaches
nothing, so the untraced hot path pays for one non-recording span at most. Attribute names
follow the OpenTelemetry GenAI semantic conventions.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, Callable, Mapping
from contextvars import Token
from types import TracebackType
from typing import TYPE_CHECKING, Final, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "ERROR_TYPE",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "AttributeValue",
    "SpanContext",
    "SpanHandle",
    "error_type_of",
    "start_span",
    "traced_stream",
]

GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
ERROR_TYPE: Final = "error.type"

AttributeValue = str | bool | int | float
_T = TypeVar("_T")


def _load_tracer() -> Tracer | None:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    # A proxy until the application installs a tracer provider; it follows that provider later.
    return trace.get_tracer("tooluse")


class _Unloaded(enum.Enum):
    TRACER = "loaded on the first span"


# OpenTelemetry is imported by the first span, not by ``import tooluse``.
_tracer: Tracer | Literal[_Unloaded.TRACER] | None = _Unloaded.TRACER


def _current_tracer() -> Tracer | None:
    global _tracer
    if _tracer is _Unloaded.TRACER:
        _tracer = _load_tracer()
    return _tracer


class SpanHandle(Protocol):
    """What code inside a span may do with it."""

    def set_attribute(self, key: str, value: AttributeValue) -> None: ...

    def set_error(self, error_type: str, description: str | None = None) -> None:
        """Mark the operation failed without an exception escaping (e.g. an error result)."""
        ...


class SpanContext(Protocol):
    """``with start_span(...) as handle:`` (a context manager yielding a :class:`SpanHandle`)."""

    def __enter__(self) -> SpanHandle: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...


def error_type_of(exc: BaseException) -> str:
    """The ``error.type`` value for an exception: its fully qualified class name."""
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def start_span(name: str, attributes: Mapping[str, AttributeValue]) -> SpanContext:
    """A context manager running its block in an INTERNAL span ``name``, child of the current
    span. An exception escaping the block is recorded with ``error.type`` and an error status.
    """
    tracer = _current_tracer()
    if tracer is None:
        return _NOOP
    span = tracer.start_span(name, attributes=attributes)
    if not span.is_recording():
        return _NOOP
    return _RecordingSpan(span)


class _NoopSpan:
    """Context manager and handle at once; stateless, so one instance serves every caller."""

    __slots__ = ()

    def __enter__(self) -> SpanHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        pass

    def set_error(self, error_type: str, description: str | None = None) -> None:
        pass


_NOOP: Final = _NoopSpan()


def traced_stream(
    name: str,
    attributes: Mapping[str, AttributeValue],
    body: Callable[[SpanHandle], AsyncGenerator[_T, None]],
) -> AsyncGenerator[_T, None]:
    """The items of ``body(span)``, run in an INTERNAL span ``name`` that starts now (iterate
    the result right away): what :func:`start_span` does for a block, for an async generator
    (untraced: ``body`` itself, no extra step per item).

    The span is current only while the body runs, never while the consumer holds an item: a
    ``with start_span(...)`` around a ``yield`` left it current in the consumer's task (its
    own spans became children of a model call, even after the stream ended early), and a
    stream closed from another context failed to detach it. A consumer that stops early is
    not an error.
    """
    tracer = _current_tracer()
    span = tracer.start_span(name, attributes=attributes) if tracer is not None else None
    if span is None or not span.is_recording():
        return body(_NOOP)
    return _traced(span, body)


async def _traced(
    span: Span, body: Callable[[SpanHandle], AsyncGenerator[_T, None]]
) -> AsyncGenerator[_T, None]:
    from opentelemetry import context, trace

    handle = _RecordingSpan(span)
    span_context = trace.set_span_in_context(span)
    items = body(handle)
    try:
        while True:
            token = context.attach(span_context)
            try:
                item = await anext(items)
            except StopAsyncIteration:
                return
            finally:
                context.detach(token)
            yield item
    except GeneratorExit:
        raise
    except BaseException as exc:
        handle.record_failure(exc)
        raise
    finally:
        token = context.attach(span_context)
        try:
            await items.aclose()
        finally:
            context.detach(token)
            span.end()


class _RecordingSpan:
    """Makes the span current for the block and ends it afterwards (like ``trace.use_span``,
    plus ``error.type``)."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token: Token[Context] | None = None

    def __enter__(self) -> SpanHandle:
        from opentelemetry import context, trace

        span_context: Context = trace.set_span_in_context(self._span)
        self._token = context.attach(span_context)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        from opentelemetry import context

        try:
            if exc is not None:
                self.record_failure(exc)
        finally:
            if self._token is not None:
                context.detach(self._token)
            self._span.end()

    def record_failure(self, exc: BaseException) -> None:
        """An exception that escaped the span's operation."""
        self._span.record_exception(exc)
        self.set_error(error_type_of(exc), f"{type(exc).__name__}: {exc}")

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        self._span.set_attribute(key, value)

    def set_error(self, error_type: str, description: str | None = None) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute(ERROR_TYPE, error_type)
        self._span.set_status(Status(StatusCode.ERROR, description))
