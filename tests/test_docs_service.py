"""docs/service.md's Python examples run as written, in order (with a fast stand-in for the
bundled embedding model, which is not what they show), and its lists of options are the
commands' options."""

import re

import pytest

from _doc_examples import DOCS, command_options, python_examples, run_examples
from _rag_helpers import HashingEmbeddingModel

DOC = DOCS / "service.md"


def test_the_examples_run_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    examples = python_examples(DOC)
    assert len(examples) == 3
    # The third needs a running server.
    run_examples(DOC, examples[:2], {"__name__": "service_doc"})


def _paragraph(text: str, start: str) -> str:
    at = text.index(start)
    return text[at : text.index("\n\n", at)]


def test_the_options_said_to_be_shared_are_the_ones_the_commands_share() -> None:
    text = DOC.read_text(encoding="utf-8")
    shared = re.findall(r"`(--[a-z-]+)", _paragraph(text, "Options shared with `tooluse chat`"))
    serve_only = re.findall(r"`(--[a-z-]+)", _paragraph(text, "Options of `tooluse serve` only"))
    serve, chat, evaluate = (
        command_options("serve"),
        command_options("chat"),
        command_options("eval"),
    )
    assert set(shared) == serve & chat == serve & evaluate, shared
    assert set(serve_only) == serve - chat == serve - evaluate, serve_only
