"""The Python examples of the documentation, run the way a reader runs them: in order, in one
namespace, each compiled under its page and number so a failure points at the example."""

from __future__ import annotations

import argparse
import functools
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def python_examples(page: Path) -> list[str]:
    """The ```python blocks of ``page``, in order."""
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


def run_examples(page: Path, examples: list[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """Executes ``examples`` (blocks of ``page``) one after the other in ``namespace``, which
    holds what each leaves behind for the next; returns it."""
    for number, example in enumerate(examples, start=1):
        exec(compile(example, f"{page.name} example {number}", "exec"), namespace)
    return namespace


@functools.cache
def command_options(command: str) -> frozenset[str]:
    """The options of ``tooluse COMMAND`` (``"mcp serve"`` for a nested one), less ``--help``."""
    from tooluse.cli import build_parser

    parser: argparse.ArgumentParser = build_parser(command.split())  # loads this command only
    for word in command.split():
        (subcommands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = subcommands.choices[word]
    options = {name for action in parser._actions for name in action.option_strings}
    return frozenset(options - {"-h", "--help"})
