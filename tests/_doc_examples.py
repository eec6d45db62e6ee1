"""The Python examples of the documentation, run the way a reader runs them: in order, in one
namespace, each compiled under its page and number so a failure points at the example."""

from __future__ import annotations

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
