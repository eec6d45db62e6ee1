"""Ingestion: idempotent re-runs, changed files replace their chunks, pruning, the CLI."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from _rag_helpers import HashingEmbeddingModel
from _servers import run_sql
from tooluse.cli import main
from tooluse.rag import (
    IngestReport,
    InMemoryVectorStore,
    PostgresVectorStore,
    SqliteVectorStore,
    TextSplitter,
    UndecodableFileError,
    ingest_directory,
)


@pytest.fixture
def knowledge(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    (root / "zh").mkdir(parents=True)
    (root / "faq.md").write_text(
        "# FAQ\n## Returns\nReturns are free for 30 days.\n## Refunds\nRefunds take 5 days.\n",
        encoding="utf-8",
    )
    (root / "zh" / "积分.txt").write_text("积分两年有效。", encoding="utf-8")
    (root / "notes.rst").write_text("not matched by the default patterns", encoding="utf-8")
    return root


def chunk_ids(store: InMemoryVectorStore | SqliteVectorStore) -> list[str]:
    return sorted(d.id for d in store.find())


def test_first_run_adds_every_matching_file(knowledge: Path) -> None:
    store = InMemoryVectorStore(HashingEmbeddingModel())
    seen: list[str] = []
    report = ingest_directory(knowledge, store, on_file=seen.append)
    assert report == IngestReport(added=("faq.md", "zh/积分.txt"), chunks_written=3)
    assert seen == ["faq.md", "zh/积分.txt"]
    assert chunk_ids(store) == ["faq.md#s0#0", "faq.md#s1#0", "zh/积分.txt#0"]
    [refunds] = store.find({"title": "FAQ > Refunds"})
    assert refunds.text == "FAQ > Refunds\nRefunds take 5 days."
    assert refunds.metadata["source"] == "faq.md"
    assert len(refunds.metadata["source_sha256"]) == 64


def test_an_unchanged_directory_is_not_embedded_again(knowledge: Path) -> None:
    model = HashingEmbeddingModel()
    store = InMemoryVectorStore(model)
    ingest_directory(knowledge, store)
    embedded = len(model.embedded)
    report = ingest_directory(knowledge, store)
    assert report == IngestReport(unchanged=("faq.md", "zh/积分.txt"))
    assert not report.changed
    assert len(model.embedded) == embedded


def test_a_changed_file_replaces_its_chunks(knowledge: Path, tmp_path: Path) -> None:
    model = HashingEmbeddingModel()
    with SqliteVectorStore(tmp_path / "kb.db", model) as store:
        ingest_directory(knowledge, store)
        (knowledge / "faq.md").write_text("# FAQ\nOnly one answer now.\n", encoding="utf-8")
        embedded = len(model.embedded)
        report = ingest_directory(knowledge, store)
        assert report.updated == ("faq.md",) and report.unchanged == ("zh/积分.txt",)
        assert model.embedded[embedded:] == ["FAQ\nOnly one answer now."]
        assert chunk_ids(store) == ["faq.md#s0#0", "zh/积分.txt#0"]
        assert store.find({"source": "faq.md"})[0].text == "FAQ\nOnly one answer now."


def test_other_splitter_settings_count_as_a_change(knowledge: Path) -> None:
    store = InMemoryVectorStore(HashingEmbeddingModel())
    ingest_directory(knowledge, store)
    report = ingest_directory(knowledge, store, splitter=TextSplitter(64, 8))
    assert report.updated == ("faq.md", "zh/积分.txt")


def test_prune_and_force(knowledge: Path) -> None:
    store = InMemoryVectorStore(HashingEmbeddingModel())
    ingest_directory(knowledge, store)
    (knowledge / "faq.md").unlink()
    assert ingest_directory(knowledge, store).removed == ()
    assert len(store.find({"source": "faq.md"})) == 2  # kept without prune
    report = ingest_directory(knowledge, store, prune=True)
    assert report.removed == ("faq.md",)
    assert chunk_ids(store) == ["zh/积分.txt#0"]
    assert ingest_directory(knowledge, store, force=True).updated == ("zh/积分.txt",)


def test_files_without_text_do_not_count_as_added_on_every_run(knowledge: Path) -> None:
    (knowledge / "blank.txt").write_text("  \n", encoding="utf-8")
    (knowledge / "headings.md").write_text("# Only a heading\n", encoding="utf-8")
    store = InMemoryVectorStore(HashingEmbeddingModel())
    assert ingest_directory(knowledge, store).added == ("faq.md", "zh/积分.txt")
    assert not ingest_directory(knowledge, store).changed
    (knowledge / "zh" / "积分.txt").write_text("", encoding="utf-8")  # emptied: chunks go once
    assert ingest_directory(knowledge, store).updated == ("zh/积分.txt",)
    assert store.find({"source": "zh/积分.txt"}) == []
    report = ingest_directory(knowledge, store)
    assert not report.changed
    assert report.unchanged == ("blank.txt", "faq.md", "headings.md", "zh/积分.txt")


def test_a_missing_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError, match="not a directory"):
        ingest_directory(tmp_path / "nope", InMemoryVectorStore(HashingEmbeddingModel()))


def run_cli(*argv: str) -> int:
    return main(["ingest", *argv])


def test_cli_ingests_with_the_bundled_model(
    knowledge: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TOOLUSE_CACHE_DIR", str(tmp_path / "cache"))
    database = str(tmp_path / "kb.db")
    assert run_cli(str(knowledge), "--db", database) == 0
    captured = capsys.readouterr()
    assert "2 added, 0 updated, 0 unchanged, 0 removed; 3 chunks written" in captured.out
    assert "2/2" in captured.err  # the progress bar
    assert run_cli(str(knowledge), "--db", database, "--quiet") == 0
    assert "0 added, 0 updated, 2 unchanged" in capsys.readouterr().out
    with SqliteVectorStore(database) as store:
        [best] = store.similarity_search("How long do refunds take?", top_k=1)
        assert best.id == "faq.md#s1#0"


def test_cli_ingests_into_postgresql_with_the_shared_embedding_cache(
    knowledge: Path,
    tmp_path: Path,
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--database-url``: the knowledge base of ``tooluse serve --database-url``, embedded
    with the bundled model through the database's embedding cache (the service's)."""
    monkeypatch.setenv("TOOLUSE_CACHE_DIR", str(tmp_path / "cache"))
    assert run_cli(str(knowledge), "--database-url", postgres_url, "--quiet") == 0
    written = capsys.readouterr().out
    assert f"3 chunks written to {postgres_url} (collection 'default')" in written
    assert run_cli(str(knowledge), "--database-url", postgres_url, "--quiet") == 0
    assert "0 added, 0 updated, 2 unchanged" in capsys.readouterr().out
    with PostgresVectorStore(postgres_url) as store:
        [best] = store.similarity_search("How long do refunds take?", top_k=1)
        assert best.id == "faq.md#s1#0"
    assert run_sql(postgres_url, "SELECT count(*) FROM embedding_cache") == [(3,)]
    unreachable = "postgresql://someone:secret@127.0.0.1:1/none"
    assert run_cli(str(knowledge), "--database-url", unreachable, "--quiet") == 2
    err = capsys.readouterr().err
    assert err.startswith("tooluse ingest: --database-url postgresql://someone:***@127.0.0.1:1")
    assert "Connection refused" in err and "secret" not in err and "Traceback" not in err
    with pytest.raises(SystemExit) as usage:
        run_cli(str(knowledge), "--database-url", "mysql://someone:secret@x/y")
    err = capsys.readouterr().err
    assert usage.value.code == 2 and "expected a PostgreSQL URL" in err and "secret" not in err


def test_cli_reports_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(str(tmp_path / "missing"), "--db", str(tmp_path / "kb.db")) == 2
    assert "not a directory" in capsys.readouterr().err
    assert run_cli(str(tmp_path), "--chunk-size", "10", "--chunk-overlap", "10") == 2
    assert "chunk_overlap must be" in capsys.readouterr().err


def test_cli_reports_unreadable_input_without_a_traceback(
    knowledge: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = str(tmp_path / "kb.db")
    assert run_cli(str(knowledge), "--db", str(tmp_path / "missing" / "kb.db"), "--quiet") == 2
    assert "unable to open database file" in capsys.readouterr().err
    assert run_cli(str(knowledge), "--db", database, "--collection", " ", "--quiet") == 2
    assert "collection must be a non-blank string" in capsys.readouterr().err


def test_a_file_that_is_not_text_is_an_error_or_left_out(knowledge: Path) -> None:
    (knowledge / "latin1.txt").write_bytes("café crème".encode("latin-1"))
    store = InMemoryVectorStore(HashingEmbeddingModel())
    with pytest.raises(UndecodableFileError, match=r"latin1\.txt is not utf-8 text"):
        ingest_directory(knowledge, store)
    store = InMemoryVectorStore(HashingEmbeddingModel())
    report = ingest_directory(knowledge, store, skip_undecodable=True)
    ((source, why),) = report.skipped
    assert source == "latin1.txt" and "latin1.txt is not utf-8 text" in why
    assert report.added == ("faq.md", "zh/积分.txt")


def test_cli_leaves_out_a_file_that_is_not_text_and_ingests_the_rest(
    knowledge: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    (knowledge / "a-latin1.txt").write_bytes("café crème".encode("latin-1"))  # read first
    (knowledge / "notepad.txt").write_bytes("Grüße aus Köln, 积分两年有效。".encode("utf-16"))
    database = tmp_path / "kb.db"
    assert run_cli(str(knowledge), "--db", str(database), "--quiet") == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"tooluse ingest: left out: {knowledge / 'a-latin1.txt'} is not utf-8 text "
        "(invalid continuation byte at byte 3)\n"
    )
    assert captured.out.startswith("3 added, 0 updated, 0 unchanged, 0 removed, 1 left out")
    with SqliteVectorStore(database, HashingEmbeddingModel()) as store:
        sources = {d.metadata["source"]: d.text for d in store.find()}
    assert sources.keys() == {"faq.md", "zh/积分.txt", "notepad.txt"}
    assert sources["notepad.txt"] == "Grüße aus Köln, 积分两年有效。"  # the BOM said UTF-16


def test_cli_says_when_there_is_nothing_to_ingest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    database = tmp_path / "kb.db"
    assert run_cli(str(tmp_path / "empty"), "--db", str(database)) == 1
    assert capsys.readouterr().err == (
        f"tooluse ingest: no files matching *.md *.markdown *.txt under {tmp_path / 'empty'}: "
        "nothing ingested\n"
    )
    assert not database.exists()


def test_cli_reports_a_db_of_another_schema_version(
    knowledge: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = tmp_path / "kb.db"
    with sqlite3.connect(database) as connection:
        connection.execute(
            "CREATE TABLE tooluse_schema_version (component TEXT PRIMARY KEY, version INTEGER)"
        )
        connection.execute("INSERT INTO tooluse_schema_version VALUES ('vector_store', 99)")
    connection.close()
    assert run_cli(str(knowledge), "--db", str(database), "--quiet") == 2
    err = capsys.readouterr().err
    assert err.startswith("tooluse ingest: ") and "Traceback" not in err
    assert "vector_store schema version 99, but this version of tooluse reads version 1" in err
