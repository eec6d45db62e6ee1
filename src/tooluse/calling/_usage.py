"""The tokens that a round's tools spend on models of their own (a search query's
translation, a tool that asks a model), counted in the usage of the run whose round it is."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from tooluse.messages import Usage

__all__ = ["report_usage"]

# The usage reported by the tools of the round running in this context: a list, so that a
# tool in a worker thread (a copy of the context) adds to the round's own.
_ROUND_USAGE: contextvars.ContextVar[list[Usage] | None] = contextvars.ContextVar(
    "tooluse_round_usage", default=None
)


def report_usage(usage: Usage | None) -> None:
    """Count ``usage``, a model call that a tool made while it ran, in the usage of its run
    (``ToolExecutionResult.usage``, which the tool-calling loop adds to its own). Outside a
    round of a :class:`~tooluse.calling.ToolCallingManager` (a tool called directly) it
    counts nowhere."""
    spent = _ROUND_USAGE.get()
    if spent is not None and usage is not None and not usage.is_empty():
        spent.append(usage)


@contextlib.contextmanager
def collected_usage() -> Iterator[list[Usage]]:
    """The usage reported within the block (by a round's tools, and what they start)."""
    spent: list[Usage] = []
    token = _ROUND_USAGE.set(spent)
    try:
        yield spent
    finally:
        _ROUND_USAGE.reset(token)
