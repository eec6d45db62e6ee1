"""docs/tools-that-act.md's examples run as written."""

from __future__ import annotations

from _doc_examples import DOCS, python_examples, run_examples

DOC = DOCS / "tools-that-act.md"


def test_the_examples_run_in_order() -> None:
    examples = python_examples(DOC)
    assert len(examples) == 4
    namespace = run_examples(DOC, examples, {"__name__": "tools_that_act_doc"})
    assert namespace["transfers"] == [("landlord", 450)]
