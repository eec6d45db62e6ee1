"""docs/tool-search.md's examples run as written, in order (with a fast stand-in for the
bundled embedding model, which is not what they show), and the loop offers what the text
says it offers."""

import pytest

from _doc_examples import DOCS, python_examples, run_examples
from _rag_helpers import HashingEmbeddingModel

DOC = DOCS / "tool-search.md"


def test_the_examples_run_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # Where HybridToolIndex() looks it up (it imports the name: patching tooluse.embedding's
    # left the bundled model in, embedding into the user's cache directory).
    monkeypatch.setattr("tooluse.search._vector.default_embedding_model", HashingEmbeddingModel)
    examples = python_examples(DOC)
    assert len(examples) == 3
    namespace = run_examples(DOC, examples, {"__name__": "tool_search_doc"})
    offered = [
        [callback.definition.name for callback in request.options.tool_callbacks]
        for request in namespace["model"].requests
    ]
    # Round 1: the search tool alone; round 2: it, then what the search found.
    assert offered[0] == ["toolSearchTool"]
    assert offered[1][0] == "toolSearchTool" and "get_weather" in offered[1]
