"""docs/tool-calling.md is read by people who copy its examples: they run as written, in
order, and their assertions hold."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "tool-calling.md"


def test_the_examples_run_in_order() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 5
    namespace: dict[str, object] = {"__name__": "tool_calling_doc"}
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"{DOC.name} example {number}", "exec"), namespace)
