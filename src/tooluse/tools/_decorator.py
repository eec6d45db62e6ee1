"""``@tool``: marks a function or method as a tool and records how it is exposed.

The decorated function is returned unchanged (still a normal function, sync or async, still a
method when defined in a class); the options are stored on it and read by
``FunctionToolCallback`` and ``tool_callbacks``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from tooluse.tools._definition import IdempotencyKey, ToolMetadata

if TYPE_CHECKING:
    from tooluse.messages import ToolCall
    from tooluse.tools._definition import ToolContext
    from tooluse.tools._results import ResultConverter

_F = TypeVar("_F")
TOOL_OPTIONS_ATTRIBUTE = "__tooluse_tool__"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ToolOptions:
    """What ``@tool(...)`` was given; ``None`` means "derive it" (name, description)."""

    name: str | None = None
    description: str | None = None
    metadata: ToolMetadata = dataclasses.field(default_factory=ToolMetadata)
    result_converter: ResultConverter | None = None
    inline: bool = False


@overload
def tool(function: _F, /) -> _F: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    requires_approval: bool | Callable[[ToolCall, ToolContext], bool] | None = None,
    sequential: bool = False,
    timeout: float | None = None,
    result_converter: ResultConverter | None = None,
    inline: bool = False,
    read_only: bool = False,
    destructive: bool = False,
    idempotency_key: IdempotencyKey | None = None,
) -> Callable[[_F], _F]: ...
def tool(
    function: Any = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    requires_approval: bool | Callable[[ToolCall, ToolContext], bool] | None = None,
    sequential: bool = False,
    timeout: float | None = None,
    result_converter: ResultConverter | None = None,
    inline: bool = False,
    read_only: bool = False,
    destructive: bool = False,
    idempotency_key: IdempotencyKey | None = None,
) -> Any:
    """Mark a function or method as a tool, bare (``@tool``) or with options.

    - ``name``: the tool's name (default: the function's name). Blank raises ``ValueError``;
      a name outside ``[a-zA-Z0-9_.-]`` logs a warning (provider adapters alias it).
    - ``description``: default the docstring (without its parameter sections), else the name
      split into words (``getWeather`` -> ``get weather``).
    - ``return_direct``: the result goes to the caller instead of back to the model.
    - ``requires_approval``: ``True`` or a predicate ``(call, context) -> bool``; such calls
      wait for a human decision. ``False``: never, even under the manager's
      ``write_approval`` policy; unset: as that policy says.
    - ``sequential``: never run concurrently with the other calls of a round.
    - ``timeout``: seconds; a slower call becomes an error result for the model.
    - ``result_converter``: ``(value) -> str | ToolResult`` replacing the default result
      conversion (``convert_result``).
    - ``inline``: a plain ``def`` that is cheap and never blocks (no I/O, microseconds) runs
      on the event loop's thread instead of the tool thread pool, saving the hand-off. While
      it runs, nothing else on that loop does; it cannot have a ``timeout`` (nothing could
      stop it). Not for ``async def`` functions, which run on the loop anyway.
    - ``read_only``: the tool has no side effects; under a ``write_approval`` policy (the
      service's default) every other tool waits for approval.
    - ``destructive``: a write that may destroy or overwrite data.
    - ``idempotency_key``: ``True`` or ``(arguments, context) -> str``: with a journal, a
      repeated call with the same key returns the stored result instead of running again.

    Works on ``async def`` functions, on methods (collect them with
    ``tool_callbacks(instance)``) and on top of ``@staticmethod``/``@classmethod``.
    """
    if name is not None:
        check_tool_name(name)
    options = ToolOptions(
        name=name,
        description=description,
        metadata=ToolMetadata(
            return_direct=return_direct,
            requires_approval=requires_approval,
            sequential=sequential,
            timeout=timeout,
            read_only=read_only,
            destructive=destructive,
            idempotency_key=idempotency_key,
        ),
        result_converter=result_converter,
        inline=inline,
    )

    def mark(target: _F) -> _F:
        function = target.__func__ if isinstance(target, staticmethod | classmethod) else target
        if isinstance(function, type) or not callable(function):
            raise TypeError(f"@tool applies to functions and methods, not to {target!r}")
        if name is None:
            check_tool_name(function_tool_name(function))
        setattr(function, TOOL_OPTIONS_ATTRIBUTE, options)
        return target

    return mark(function) if function is not None else mark


def tool_options(function: object) -> ToolOptions | None:
    """The ``@tool`` options of a function or method, ``None`` when it is not decorated."""
    options = getattr(function, TOOL_OPTIONS_ATTRIBUTE, None)
    return options if isinstance(options, ToolOptions) else None


# --- tool names: validation and the human-readable fallback description ---

logger = logging.getLogger("tooluse.tools")

RECOMMENDED_NAME = re.compile(r"^[a-zA-Z0-9_.-]+$")
# Word boundaries inside identifiers: "getWeather", "HTTPServer2Go", "get_weather", "math.pow".
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z]|\d|\b|_)|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_]+")


def check_tool_name(name: str) -> str:
    """Return ``name`` if usable; blank raises ``ValueError``, an unusual name logs a warning."""
    if not name or not name.strip():
        raise ValueError("Tool name cannot be null or empty")
    if not RECOMMENDED_NAME.match(name):
        _warn_unusual_name(name)
    return name


@functools.lru_cache(maxsize=1024)
def _warn_unusual_name(name: str) -> None:
    # Cached so that tools rebuilt per request warn once, not on every request.
    logger.warning(
        "Tool name %r does not match %s and may not be accepted by some providers (e.g. "
        "OpenAI); provider adapters map it to a safe alias",
        name,
        RECOMMENDED_NAME.pattern,
    )


def words_of_name(name: str) -> str:
    """``getWeather`` / ``get_weather`` -> ``get weather`` (the description of last resort)."""
    words = _WORD.findall(name)
    return " ".join(words).lower() if words else name


def function_tool_name(function: Callable[..., Any]) -> str:
    """The default tool name: the function's ``__name__`` (a partial's wrapped function's)."""
    target: Any = function
    while isinstance(target, functools.partial):
        target = target.func
    name = getattr(target, "__name__", None)
    if not isinstance(name, str) or not name.strip() or name == "<lambda>":
        raise ValueError(f"Cannot derive a tool name from {function!r}; pass name=")
    return name
