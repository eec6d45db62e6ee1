"""Exceptions shared across layers."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tooluse.tools import ToolDefinition


class ToolExecutionException(Exception):
    """A tool call failed in a way the model should hear about.

    ``str(exc)`` is the text given to the model (it says what to fix); ``definition`` is the
    tool's definition when known, ``__cause__`` the original error.
    """

    def __init__(
        self,
        message: str,
        *,
        definition: ToolDefinition | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.definition = definition
        if cause is not None:
            self.__cause__ = cause

    @property
    def tool_name(self) -> str | None:
        return self.definition.name if self.definition is not None else None


class ToolArgumentsError(ToolExecutionException):
    """The model's arguments for a tool are not valid JSON, not an object, or do not validate.

    Always an error for the model to correct: exception processors look past the cause of a
    ``ToolExecutionException`` (``rethrow``), but this one's cause is the validation error,
    which must not decide (``pydantic.ValidationError`` is a ``ValueError``).
    """


class ToolSourceError(Exception):
    """A tool source failed in a way the model cannot fix: a remote tool server (e.g. an MCP
    server) could not be reached, died, broke its protocol or did not answer in time.

    The default exception processor lets it propagate to the caller instead of showing it to
    the model.
    """


class SchemaVersionError(RuntimeError):
    """A store's file or database holds ``component``'s tables at schema version ``found``,
    and this version of tooluse reads version ``expected``: use a matching tooluse or a new
    file (``instead``). A ``RuntimeError``, as it was before it had a class of its own."""

    def __init__(
        self,
        location: str,
        component: str,
        found: object,
        expected: int,
        *,
        instead: str = "a new file",
    ) -> None:
        super().__init__(
            f"{location} holds {component} schema version {found}, but this version of "
            f"tooluse reads version {expected}; use a matching tooluse or {instead}"
        )
        self.location = location
        self.component = component
        self.found = found
        self.expected = expected
