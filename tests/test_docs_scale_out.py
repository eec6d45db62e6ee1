"""docs/scale-out.md's example runs as written, on the tests' PostgreSQL server in place of
the page's ``db.internal`` (and with a fast stand-in for the bundled embedding model)."""

import pytest

from _doc_examples import DOCS, python_examples, run_examples
from _rag_helpers import HashingEmbeddingModel
from tooluse.messages import UserMessage
from tooluse.rag import Document

DOC = DOCS / "scale-out.md"
SHOWN_URL = "postgresql://tooluse:secret@db.internal/tooluse"


def test_the_example_runs(monkeypatch: pytest.MonkeyPatch, postgres_url: str) -> None:
    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    (example,) = python_examples(DOC)
    assert SHOWN_URL in example
    namespace = run_examples(DOC, [example.replace(SHOWN_URL, postgres_url)], {})
    namespace["knowledge"].add([Document(id="r", text="refunds within 30 days")])
    assert [d.id for d in namespace["retriever"].retrieve("refunds")] == ["r"]
    namespace["memory"].add("c1", UserMessage(text="hi"))
    assert namespace["memory"].get("c1") == [UserMessage(text="hi")]
    namespace["database"].close()
