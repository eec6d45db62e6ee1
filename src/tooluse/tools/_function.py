"""``FunctionToolCallback``: a Python callable as a ``ToolCallback``."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from tooluse._fork import ThreadPool
from tooluse.tools._callback import BaseToolCallback
from tooluse.tools._decorator import (
    ToolOptions,
    check_tool_name,
    function_tool_name,
    tool_options,
    words_of_name,
)
from tooluse.tools._definition import ToolContext, ToolDefinition, ToolMetadata
from tooluse.tools._function_schema import function_schema
from tooluse.tools._results import ResultConverter, ToolResult, convert_result

if TYPE_CHECKING:
    from tooluse.messages import ToolCall


class FunctionToolCallback(BaseToolCallback):
    """A tool backed by a Python function (sync or async), a bound method, a
    ``functools.partial`` (the arguments it binds are neither shown to the model nor
    overridable by it) or a callable object.

    The input can be described three ways:

    - by the function's signature (the default): one property per parameter, validated with
      pydantic against the type hints;
    - ``input_type=``: a pydantic model, dataclass or TypedDict; the function takes one
      parameter and receives the validated instance;
    - ``input_schema=``: a raw JSON Schema (repaired with ``ensure_valid_input_schema``); the
      function receives the parsed ``dict`` (only its ``required`` fields are checked).

    A parameter annotated ``ToolContext`` receives the call's context (an empty one when none
    is given); it is never part of the schema.

    Options left ``None`` come from the function's ``@tool(...)`` options when it has them,
    else from the defaults (name: the function's name; description: its docstring, else its
    name in words).

    Calling: empty, blank or ``null`` arguments mean ``{}``. Arguments that are not JSON, not
    an object, or do not validate raise ``ToolExecutionException`` with a message for the
    model (tool, field, expected, received). Validation is lax (``"3"`` is accepted for an
    ``int``), extra fields are rejected (the schema says ``additionalProperties: false``), and
    ``null`` for an optional parameter means its default. Exceptions raised by the function
    itself propagate unchanged; the ``ToolCallingManager``'s exception processor decides what
    the model sees. ``acall`` runs sync functions in the tool thread pool (``run_in_tool_thread``),
    or on the loop's thread when declared ``inline`` (see ``@tool``), and awaits async ones
    on the loop; ``call`` (of :class:`BaseToolCallback`) runs ``acall``
    on the calling thread's own event loop and raises ``RuntimeError`` when called inside a
    running event loop (await ``acall`` there).
    """

    __slots__ = (
        "_arguments",
        "_definition",
        "_function",
        "_inline",
        "_is_async",
        "_metadata",
        "_result_converter",
        "_returns_none",
    )
    fixed_definition = True  # made once, from the function, in __init__

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        input_type: Any = None,
        input_schema: Mapping[str, Any] | str | None = None,
        return_direct: bool | None = None,
        requires_approval: bool | Callable[[ToolCall, ToolContext], bool] | None = None,
        sequential: bool | None = None,
        timeout: float | None = None,
        result_converter: ResultConverter | None = None,
        inline: bool | None = None,
        read_only: bool | None = None,
    ) -> None:
        if not callable(function):
            raise TypeError(f"FunctionToolCallback needs a callable, got {function!r}")
        if input_type is not None and input_schema is not None:
            raise ValueError("Pass either input_type= or input_schema=, not both")
        options = tool_options(function) or ToolOptions()
        if name is None:
            name = options.name if options.name is not None else function_tool_name(function)
        tool_name = check_tool_name(name)
        schema = function_schema(
            function, tool_name=tool_name, input_type=input_type, input_schema=input_schema
        )
        self._function = function
        self._is_async = schema.is_async
        self._returns_none = schema.returns_none
        self._result_converter = result_converter or options.result_converter
        self._metadata = _metadata(
            options.metadata, return_direct, requires_approval, sequential, timeout, read_only
        )
        self._inline = options.inline if inline is None else inline
        if self._inline and (self._is_async or self._metadata.timeout is not None):
            raise ValueError(
                f"Tool '{tool_name}': inline= is for plain def functions without a timeout "
                "(an async function runs on the loop already; nothing could stop an inline "
                "call at its timeout)"
            )
        self._arguments = schema
        candidates = (description, options.description, schema.description)
        text = next((t.strip() for t in candidates if t and t.strip()), None)
        self._definition = ToolDefinition(
            name=tool_name,
            description=text or words_of_name(tool_name),
            input_schema=schema.json_schema,
        )

    @property
    def definition(self) -> ToolDefinition:
        """Name, description and input schema. The schema is shared with other callbacks of the
        same function: treat it as read-only."""
        return self._definition

    @property
    def metadata(self) -> ToolMetadata:
        return self._metadata

    @property
    def function(self) -> Callable[..., Any]:
        return self._function

    @property
    def inline(self) -> bool:
        """Whether a call runs on the event loop's thread (``@tool(inline=True)``): ``acall``
        then finishes without suspending, so the executor runs a round of such calls one
        after another, with no task each."""
        return self._inline

    async def acall(self, arguments: str, context: ToolContext | None = None) -> str | ToolResult:
        args, kwargs = self._arguments.bind(arguments, context, self._definition)
        if self._is_async:
            result = await self._run_async(args, kwargs)
        elif self._inline:
            result = _stop_iteration_as_error(self._function, *args, **kwargs)
        else:
            result = await run_in_tool_thread(self._function, *args, **kwargs)
        return self._convert(result)

    async def _run_async(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        result = self._function(*args, **kwargs)
        # sync wrappers around coroutine functions return the awaitable
        return await result if inspect.isawaitable(result) else result

    def _convert(self, value: Any) -> str | ToolResult:
        if self._result_converter is None:
            return convert_result(value, returns_none=self._returns_none)
        converted = self._result_converter(value)
        if not isinstance(converted, str | ToolResult):
            raise TypeError(
                f"The result_converter of tool '{self._definition.name}' returned "
                f"{type(converted).__name__}, not str or ToolResult"
            )
        return converted

    def __repr__(self) -> str:
        return f"FunctionToolCallback(name={self._definition.name!r}, function={self._function!r})"


def _metadata(
    declared: ToolMetadata,
    return_direct: bool | None,
    requires_approval: bool | Callable[[ToolCall, ToolContext], bool] | None,
    sequential: bool | None,
    timeout: float | None,
    read_only: bool | None,
) -> ToolMetadata:
    if (
        return_direct is None
        and requires_approval is None
        and sequential is None
        and timeout is None
        and read_only is None
    ):
        return declared
    return dataclasses.replace(
        declared,
        return_direct=declared.return_direct if return_direct is None else return_direct,
        requires_approval=(
            declared.requires_approval if requires_approval is None else requires_approval
        ),
        sequential=declared.sequential if sequential is None else sequential,
        timeout=declared.timeout if timeout is None else timeout,
        read_only=declared.read_only if read_only is None else read_only,
    )


# --- the thread pool sync tools run in ---
#
# Not the event loop's default executor: that one has ``min(32, CPUs + 4)`` threads (6 on a
# 2-CPU machine), so a round of 8 sync tools that each wait on I/O would take two waves. Tool
# calls are mostly I/O-bound, so the pool is wider; threads are started only when needed, in
# each process (a forked child starts its own).

MAX_TOOL_THREADS = 64
_T = TypeVar("_T")
_TOOL_THREADS = ThreadPool(MAX_TOOL_THREADS, "tooluse-tool")


async def run_in_tool_thread(function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``function(*args, **kwargs)`` in the tool pool, with the caller's context variables
    (tracing spans, request state), like ``asyncio.to_thread``. A ``StopIteration`` it raises
    comes back as ``RuntimeError``, as from a coroutine."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, _stop_iteration_as_error, function, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_TOOL_THREADS, call)


def _stop_iteration_as_error(function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    # An asyncio future refuses a StopIteration (a bare next() in a tool), and the call
    # awaiting it then waits forever.
    try:
        return function(*args, **kwargs)
    except StopIteration as exc:
        name = getattr(function, "__name__", type(function).__name__)
        raise RuntimeError(f"{name}() raised StopIteration") from exc
