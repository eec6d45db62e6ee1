"""The README's examples are code users copy: they must run as written and print what the
README says they print."""

import re
from pathlib import Path
from typing import Any

import pytest

from _doc_examples import ROOT, python_examples
from tooluse import ApprovalRequired

README = ROOT / "README.md"


def _examples_and_outputs(page: Path) -> list[tuple[str, str]]:
    """Each ```python block of ``page`` with the ```text block that follows it (before the
    next ```python block): what it prints."""
    pattern = r"```python\n(.*?)```\n(?:(?!```python).)*?```text\n(.*?)```"
    pairs: list[tuple[str, str]] = re.findall(pattern, page.read_text(encoding="utf-8"), re.S)
    return pairs


def test_readme_examples_run_and_print_what_it_shows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    examples = _examples_and_outputs(README)
    assert len(examples) == len(python_examples(README)) == 2  # each shows what it prints
    assert len(examples[0][0].strip().splitlines()) <= 25
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for number, (code, printed) in enumerate(examples, start=1):
        exec(compile(code, f"README.md example {number}", "exec"), namespace)
        assert capsys.readouterr().out == printed, f"example {number}"
    paused = namespace["paused"]
    with pytest.raises(ApprovalRequired, match="book_table"):  # as the README says
        paused.content()
