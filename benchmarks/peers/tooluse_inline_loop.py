"""tooluse with ``add`` declared ``@tool(inline=True)``: the plain ``def`` runs on the event
loop's thread, not in the tool thread pool (``--tool async`` is the same as ``tooluse_loop``).
Run with this repository's interpreter."""

from __future__ import annotations

import functools
from importlib.metadata import version

import _harness
import tooluse_loop


def main() -> None:
    _harness.main_async(
        "tooluse-inline",
        version("tooluse"),
        functools.partial(tooluse_loop.setup, inline=True),
        notes="ChatClient.acall, FunctionModel, defaults on, @tool(inline=True)",
    )


if __name__ == "__main__":
    main()
