"""docs/memory-and-rag.md's example runs as written (in a temporary working directory, for
the ``tooluse.db`` it creates, and with a fast stand-in for the bundled embedding model,
which is not what it shows)."""

from pathlib import Path

import pytest

from _doc_examples import DOCS, python_examples, run_examples
from _rag_helpers import HashingEmbeddingModel

DOC = DOCS / "memory-and-rag.md"


def test_the_example_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    monkeypatch.chdir(tmp_path)
    examples = python_examples(DOC)
    assert len(examples) == 1
    run_examples(DOC, examples, {"__name__": "memory_and_rag_doc"})
    assert (tmp_path / "tooluse.db").is_file()  # memory and knowledge share the file
