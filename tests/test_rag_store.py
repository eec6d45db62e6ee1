"""Vector stores: the shared contract (in memory, SQLite, PostgreSQL with pgvector), what the
stores kept in a database share (persistence, collections, the embedding model recorded), and
what is SQLite's own (its file, other processes, forks)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _forking import in_child
from _rag_helpers import HashingEmbeddingModel
from tooluse.embedding import EmbeddingModel
from tooluse.rag import (
    Document,
    InMemoryVectorStore,
    PostgresVectorStore,
    SqliteVectorStore,
    VectorStore,
)

FRUIT = [
    Document(id="apple", text="apple pie recipe", metadata={"kind": "recipe", "year": 2021}),
    Document(id="pear", text="pear tart recipe", metadata={"kind": "recipe", "year": 2019}),
    Document(id="bike", text="bike repair guide", metadata={"kind": "guide", "year": 2023}),
    Document(id="tea", text="绿茶 泡法", metadata={"kind": "guide", "lang": "zh"}),
]


OpenStore = Callable[..., Any]  # (model=..., collection=...) -> a store of one database


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenStore]:
    """Opens stores on one database (a SQLite file, a PostgreSQL database), each closed at
    the end of the test."""
    yield from _opener(request, tmp_path, request.param)


@pytest.fixture(params=["in-memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    if request.param == "in-memory":
        yield InMemoryVectorStore(HashingEmbeddingModel())
        return
    for open_one in _opener(request, tmp_path, request.param):
        yield open_one()


def _opener(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> Iterator[OpenStore]:
    opened: list[Any] = []
    if backend == "sqlite":
        location, kind = str(tmp_path / "kb.db"), SqliteVectorStore
    else:
        location, kind = request.getfixturevalue("postgres_url"), PostgresVectorStore

    def open_one(
        model: EmbeddingModel | None = None, *, collection: str = "default"
    ) -> SqliteVectorStore | PostgresVectorStore:
        store = kind(location, model or HashingEmbeddingModel(), collection=collection)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


def ids(documents: list[Document]) -> list[str]:
    return [d.id for d in documents]


def test_stores_implement_the_protocol(store: VectorStore) -> None:
    assert isinstance(store, VectorStore)


def test_search_ranks_by_cosine_and_sets_scores(store: VectorStore) -> None:
    store.add(FRUIT)
    found = store.similarity_search("apple recipe", top_k=2)
    assert ids(found) == ["apple", "pear"]
    assert found[0].score is not None and found[1].score is not None
    assert 1.0 >= found[0].score > found[1].score > 0.0
    assert found[0].text == "apple pie recipe"
    assert found[0].metadata == {"kind": "recipe", "year": 2021}


def test_default_top_k_is_four_and_threshold_cuts(store: VectorStore) -> None:
    store.add([Document(id=f"d{n}", text=f"shared word{n}") for n in range(6)])
    assert len(store.similarity_search("shared")) == 4
    assert store.similarity_search("shared", top_k=0) == []
    assert store.similarity_search("nothing in common", threshold=0.1) == []
    everything = store.similarity_search("shared", top_k=10, threshold=0.0)
    assert len(everything) == 6


@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        ({"kind": "guide"}, ["bike", "tea"]),
        ({"year": {"$gte": 2020}}, ["apple", "bike"]),
        ({"kind": "recipe", "year": {"$lt": 2020}}, ["pear"]),
        ({"$or": [{"lang": "zh"}, {"year": 2019}]}, ["pear", "tea"]),
        ({"lang": {"$exists": False}}, ["apple", "bike", "pear"]),
        ({"kind": {"$in": ["guide", "other"]}, "$not": {"lang": "zh"}}, ["bike"]),
        (lambda metadata: metadata.get("year", 0) > 2022, ["bike"]),
    ],
)
def test_metadata_filters_restrict_the_search(
    store: VectorStore, filter: object, expected: list[str]
) -> None:
    store.add(FRUIT)
    found = store.similarity_search("recipe guide 绿茶", top_k=10, filter=filter)  # type: ignore[arg-type]
    assert sorted(ids(found)) == expected
    assert sorted(ids(store.find(filter))) == expected  # type: ignore[arg-type]


def test_adding_an_existing_id_replaces_the_document(store: VectorStore) -> None:
    store.add(FRUIT)
    store.add([Document(id="apple", text="apple juice", metadata={"kind": "drink"})])
    assert len(store.find()) == 4
    assert store.similarity_search("juice", top_k=1)[0].metadata == {"kind": "drink"}


def test_delete_by_id_and_by_filter(store: VectorStore) -> None:
    store.add(FRUIT)
    assert store.delete(["apple", "missing"]) == 1
    assert store.delete(filter={"kind": "guide"}) == 2
    assert ids(store.find()) == ["pear"]
    assert store.delete([]) == 0


@pytest.mark.parametrize("everything", [{}, {"$and": []}])
def test_a_delete_with_an_empty_filter_deletes_nothing_and_says_why(
    store: VectorStore, everything: dict[str, object]
) -> None:
    """``filter={}`` (e.g. built from an empty selection) matches every document: a delete
    with it emptied the collection, where ``delete()`` without a filter deletes nothing."""
    store.add(FRUIT)
    with pytest.raises(ValueError, match="every document"):
        store.delete(filter=everything)
    assert len(store.find()) == len(FRUIT)
    assert store.delete(filter=lambda metadata: True) == len(FRUIT)  # the explicit way


async def test_async_forms(store: VectorStore) -> None:
    await store.aadd(FRUIT)
    assert ids(await store.asimilarity_search("bike", top_k=1)) == ["bike"]
    assert await store.adelete(filter={"kind": "recipe"}) == 2
    assert sorted(ids(await store.afind())) == ["bike", "tea"]


def test_bad_input_is_rejected_before_anything_is_stored(store: VectorStore) -> None:
    with pytest.raises(ValueError, match=r"duplicate document ids in one batch: \['x'\]"):
        store.add([Document(id="x", text="a"), Document(id="x", text="b")])
    with pytest.raises(ValueError, match="Document 'blank' has no text to embed"):
        store.add([Document(id="ok", text="fine"), Document(id="blank", text="  ")])
    with pytest.raises(TypeError, match=r"documents\[0\] is not a Document"):
        store.add(["just text"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="sequence of Documents"):
        store.add(FRUIT[0])  # type: ignore[arg-type]
    assert store.find() == []
    with pytest.raises(ValueError, match="non-blank query"):
        store.similarity_search(" ")
    with pytest.raises(ValueError, match="top_k must be an int >= 0"):
        store.similarity_search("x", top_k=-1)
    with pytest.raises(ValueError, match=r"threshold must be between 0\.0 and 1\.0"):
        store.similarity_search("x", threshold=1.5)
    with pytest.raises(ValueError, match="unknown operator '\\$like'"):
        store.similarity_search("x", filter={"kind": {"$like": "re%"}})
    with pytest.raises(TypeError, match="not one string"):
        store.delete("apple")


def test_documents_validate_themselves() -> None:
    with pytest.raises(ValueError, match="non-blank string"):
        Document(id="", text="x")
    with pytest.raises(TypeError, match="metadata key 1 is not a str"):
        Document(text="x", metadata={1: "a"})  # type: ignore[dict-item]
    assert Document(text="x").id != Document(text="x").id


def test_a_store_persists_and_reloads(open_store: OpenStore) -> None:
    model = HashingEmbeddingModel()
    open_store(model).add(FRUIT)
    embedded_before = len(model.embedded)
    reopened = open_store(model)
    assert ids(reopened.similarity_search("pear tart", top_k=1)) == ["pear"]
    assert sorted(ids(reopened.find({"kind": "guide"}))) == ["bike", "tea"]
    assert reopened.find({"lang": "zh"})[0].text == "绿茶 泡法"
    assert len(model.embedded) == embedded_before  # reloading embeds nothing


def test_sqlite_store_sees_writes_from_another_process(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    model = HashingEmbeddingModel()
    with SqliteVectorStore(path, model) as store:
        store.add(FRUIT[:1])
        assert len(store) == 1
        script = (
            "import sys\n"
            f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "from _rag_helpers import HashingEmbeddingModel\n"
            "from tooluse.rag import Document, SqliteVectorStore\n"
            "with SqliteVectorStore(sys.argv[1], HashingEmbeddingModel()) as other:\n"
            "    other.add([Document(id='kite', text='kite flying guide')])\n"
            "    other.delete(['apple'])\n"
        )
        subprocess.run([sys.executable, "-c", script, str(path)], check=True)
        assert ids(store.similarity_search("kite", top_k=1)) == ["kite"]
        assert ids(store.find()) == ["kite"]


def test_a_forked_child_sees_what_was_written_before_the_fork(tmp_path: Path) -> None:
    # A pre-fork server: the parent loaded the store, another connection (the ingest CLI)
    # wrote, then a worker was forked. The worker's connection is new, and its data_version
    # numbers say nothing about the parent's: it must load the file, not trust the copy.
    path = tmp_path / "kb.db"
    model = HashingEmbeddingModel()
    with SqliteVectorStore(path, model) as store, SqliteVectorStore(path, model) as other:
        store.add(FRUIT[:1])
        assert len(store) == 1
        other.add(FRUIT[1:2])
        assert in_child(lambda: sorted(ids(store.find()))) == ["apple", "pear"]
        assert sorted(ids(store.find())) == ["apple", "pear"]


def test_collections_are_separate(open_store: OpenStore) -> None:
    a, b = open_store(collection="a"), open_store(collection="b")
    a.add(FRUIT[:2])
    b.add(FRUIT[2:])
    assert sorted(ids(a.find())) == ["apple", "pear"]
    assert sorted(ids(b.find())) == ["bike", "tea"]
    assert ids(a.similarity_search("bike repair", top_k=4)) != ["bike"]
    assert len(a) == 2 and len(b) == 2


def test_a_collection_refuses_another_embedding_model(open_store: OpenStore) -> None:
    open_store(HashingEmbeddingModel())
    with pytest.raises(ValueError, match=r"embedded with hashing-64 \(64 dimensions\)"):
        open_store(HashingEmbeddingModel(32, "hashing-32"))
    with pytest.raises(ValueError, match="use the same model"):
        open_store(HashingEmbeddingModel(64, "other-64"))
    assert open_store(HashingEmbeddingModel(32, "hashing-32"), collection="small").find() == []


def test_metadata_that_cannot_be_stored_is_refused(open_store: OpenStore) -> None:
    store = open_store()
    with pytest.raises(ValueError, match="Document 'x': metadata must be JSON-serialisable"):
        store.add([Document(id="x", text="a", metadata={"when": object()})])
    assert store.find() == []


def test_a_store_answers_the_same_before_and_after_a_reload(open_store: OpenStore) -> None:
    # JSON has no tuples: the database gives a list back, so the writer must index a list too.
    tagged = Document(id="a", text="apple pie", metadata={"tags": ("faq", "en")})
    store = open_store()
    store.add([tagged])
    before = store.find({"tags": ["faq", "en"]})
    after = open_store().find({"tags": ["faq", "en"]})
    assert before == after == [Document(id="a", text="apple pie", metadata={"tags": ["faq", "en"]})]


def test_sqlite_file_records_the_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    SqliteVectorStore(path, HashingEmbeddingModel()).close()
    with sqlite3.connect(path) as connection:
        assert connection.execute(
            "SELECT version FROM tooluse_schema_version WHERE component = 'vector_store'"
        ).fetchone() == (1,)
