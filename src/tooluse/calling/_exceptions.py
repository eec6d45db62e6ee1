"""What happens when a tool fails: the exception processor, the limit breach and the unknown
tool error."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Protocol, runtime_checkable

from tooluse.calling._result import ToolExecutionResult
from tooluse.errors import ToolArgumentsError, ToolExecutionException, ToolSourceError
from tooluse.messages import AssistantMessage, Generation, ToolResponse, ToolResponseMessage

__all__ = [
    "DefaultToolExecutionExceptionProcessor",
    "ToolCallLimitExceeded",
    "ToolExecutionExceptionProcessor",
    "UnknownToolError",
]


@runtime_checkable
class ToolExecutionExceptionProcessor(Protocol):
    """Turns an exception raised by a tool into the error text the model sees, or raises."""

    def process(self, exc: Exception, tool_name: str) -> str: ...


class DefaultToolExecutionExceptionProcessor:
    """The default decision table, evaluated in order:

    1. ``MemoryError`` and ``ToolSourceError`` (a tool server that died or broke its
       protocol; also as the cause of a ``ToolExecutionException``) propagate.
    2. The exception, or the cause of a ``ToolExecutionException``, is an instance of a type in
       ``rethrow``: that exception propagates, unwrapped. Invalid arguments from the model
       (``ToolArgumentsError``) are not unwrapped: their cause is the validation error.
    3. ``always_throw``: the exception propagates as the tool raised it.
    4. Otherwise the model gets the exception's message, or
       ``Exception occurred in tool: <name> (<ClassName>)`` when the message is empty.

    ``BaseException``s that are not ``Exception`` (cancellation, ``KeyboardInterrupt``,
    ``SystemExit``) never reach a processor: the manager lets them propagate.
    """

    def __init__(
        self, *, always_throw: bool = False, rethrow: Iterable[type[BaseException]] = ()
    ) -> None:
        self.always_throw = always_throw
        self.rethrow: tuple[type[BaseException], ...] = tuple(rethrow)
        not_types = [t for t in self.rethrow if not isinstance(t, type)]
        if not_types:
            raise TypeError(f"rethrow takes exception classes, got {not_types!r}")

    def process(self, exc: Exception, tool_name: str) -> str:
        # bad arguments from the model are not a wrapper: they always go to the model
        wrapper = isinstance(exc, ToolExecutionException) and not isinstance(
            exc, ToolArgumentsError
        )
        cause = exc.__cause__ if wrapper else None
        original = cause if cause is not None else exc
        if isinstance(original, MemoryError | ToolSourceError) or not isinstance(
            original, Exception
        ):
            raise original
        if isinstance(original, self.rethrow):
            raise original
        if self.always_throw:
            raise exc
        message = str(exc)
        if message.strip():
            return message
        return f"Exception occurred in tool: {tool_name} ({type(original).__name__})"


class UnknownToolError(LookupError):
    """The model called a tool that is not attached to the request (``unknown_tool="raise"``)."""

    def __init__(self, tool_name: str, message: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name


class ToolCallLimitExceeded(Exception):
    """A call went over a per-turn limit (``on_limit_exceeded="raise"``).

    ``tool_name`` is the tool whose own limit was hit, ``None`` for the total limit;
    ``partial_result`` is the round so far: the calls before the breach ran and are answered,
    the breaching call is answered with the limit message (``breach_response``), later calls
    did not run.
    """

    FINISH_REASON: ClassVar[str] = "toolCallLimitExceeded"
    METADATA_PARTIAL_TOOL_RESPONSES: ClassVar[str] = "partial_tool_responses"

    def __init__(
        self,
        *,
        tool_name: str | None,
        limit: int,
        partial_result: ToolExecutionResult,
        breach_response: ToolResponse,
    ) -> None:
        if tool_name is None:
            message = f"Total tool call limit ({limit}) exceeded for this turn"
        else:
            message = f"Tool call limit ({limit}) exceeded for tool '{tool_name}'"
        super().__init__(message)
        self.tool_name = tool_name
        self.limit = limit
        self.partial_result = partial_result
        self.breach_response = breach_response

    def build_generation(self) -> Generation:
        """The answer that ends the turn: the limit message as text, ``finish_reason``
        ``"toolCallLimitExceeded"``, and the round's other responses (as dicts) under
        ``partial_tool_responses``."""
        last = self.partial_result.conversation_history[-1]
        responses = last.responses if isinstance(last, ToolResponseMessage) else ()
        others = [r.model_dump() for r in responses if r is not self.breach_response]
        return Generation(
            message=AssistantMessage(text=self.breach_response.data),
            metadata={
                "finish_reason": self.FINISH_REASON,
                self.METADATA_PARTIAL_TOOL_RESPONSES: others,
            },
        )
