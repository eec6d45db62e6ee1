"""The README's example is code users copy: it must run as written."""

import runpy
from pathlib import Path

import pytest

from _doc_examples import ROOT, python_examples

README = ROOT / "README.md"


def test_readme_example_runs_and_calls_the_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = python_examples(README)
    assert blocks, "README has no python example"
    example = tmp_path / "example.py"
    example.write_text(blocks[0], encoding="utf-8")
    assert len(blocks[0].strip().splitlines()) <= 25
    runpy.run_path(str(example), run_name="__main__")
    printed = capsys.readouterr().out
    assert '"get_weather"' in printed and '"sky": "sunny"' in printed
