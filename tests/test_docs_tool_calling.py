"""docs/tool-calling.md is read by people who copy its examples: they run as written, in
order, and their assertions hold."""

from _doc_examples import DOCS, python_examples, run_examples

DOC = DOCS / "tool-calling.md"


def test_the_examples_run_in_order() -> None:
    examples = python_examples(DOC)
    assert len(examples) == 8
    run_examples(DOC, examples, {"__name__": "tool_calling_doc"})
