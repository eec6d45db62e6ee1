"""docs/service.md's Python examples run as written, in order (with a fast stand-in for the
bundled embedding model, which is not what they show)."""

import re
from pathlib import Path

import pytest

from _rag_helpers import HashingEmbeddingModel

DOC = Path(__file__).resolve().parents[1] / "docs" / "service.md"


def test_the_examples_run_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 3
    namespace: dict[str, object] = {"__name__": "service_doc"}
    for number, block in enumerate(blocks[:2], start=1):  # the third needs a running server
        exec(compile(block, f"{DOC.name} example {number}", "exec"), namespace)
