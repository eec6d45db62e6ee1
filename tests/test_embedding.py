"""Embedding models and the content-hash caches."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from tooluse.embedding import (
    CachedEmbeddingModel,
    E5EmbeddingModel,
    EmbeddingCache,
    EmbeddingModel,
    InMemoryEmbeddingCache,
    OpenAIEmbeddingModel,
    PostgresEmbeddingCache,
    QueryBatchEmbeddingModel,
    QuerySpanEmbeddingModel,
    SqliteEmbeddingCache,
    TieredEmbeddingCache,
    Vectors,
    default_cache_path,
    embedding_key,
)


class CountingModel:
    """A deterministic fake: one-hot-ish vectors from the text's hash; counts what it embeds."""

    model_id = "counting/v1"
    dimensions = 8

    def __init__(self) -> None:
        self.documents: list[str] = []
        self.queries: list[str] = []

    def _vector(self, text: str) -> Vectors:
        rng = np.random.default_rng(abs(hash(text)) % 2**32)
        vector = rng.normal(size=self.dimensions).astype(np.float32)
        return vector / np.linalg.norm(vector)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.documents.extend(texts)
        return np.stack([self._vector(t) for t in texts]) if texts else np.empty((0, 8), np.float32)

    def embed_query(self, text: str) -> Vectors:
        self.queries.append(text)
        return self._vector(text)


def test_keys_depend_on_model_kind_and_text() -> None:
    keys = {
        embedding_key("m1", "document", "a"),
        embedding_key("m2", "document", "a"),
        embedding_key("m1", "query", "a"),
        embedding_key("m1", "document", "b"),
    }
    assert len(keys) == 4
    assert embedding_key("m1", "document", "a") == embedding_key("m1", "document", "a")


def test_unchanged_catalogue_is_never_embedded_twice() -> None:
    inner = CountingModel()
    model = CachedEmbeddingModel(inner, InMemoryEmbeddingCache())
    first = model.embed_documents(["get weather", "send email", "get weather"])
    assert inner.documents == ["get weather", "send email"]  # duplicates embedded once
    again = model.embed_documents(["send email", "get weather"])
    assert inner.documents == ["get weather", "send email"]
    np.testing.assert_array_equal(again, first[[1, 0]])
    model.embed_documents(["get weather", "book flight"])
    assert inner.documents[-1:] == ["book flight"]
    assert model.embedded_texts == 3


def test_queries_are_cached_apart_from_documents() -> None:
    inner = CountingModel()
    model = CachedEmbeddingModel(inner, InMemoryEmbeddingCache())
    model.embed_documents(["weather"])
    model.embed_query("weather")
    model.embed_query("weather")
    assert inner.queries == ["weather"]


class BatchingModel(CountingModel):
    """A :class:`CountingModel` that also embeds queries in batches; records each batch."""

    model_id = "batching/v1"

    def __init__(self, dimensions: int = 8) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        self.batch_dimensions = dimensions

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        self.batches.append(list(texts))
        vectors = np.stack([self._vector(t) for t in texts])
        return vectors[:, : self.batch_dimensions]


def test_queries_not_cached_are_embedded_in_one_call_when_the_model_can() -> None:
    inner = BatchingModel()
    model = CachedEmbeddingModel(inner, InMemoryEmbeddingCache())
    assert isinstance(inner, QueryBatchEmbeddingModel)
    assert isinstance(model, QueryBatchEmbeddingModel)
    known = model.embed_query("b")
    vectors = model.embed_queries(["a", "b", "c", "a"])
    assert inner.batches == [["a", "c"]]  # the cached one left out, a repeat embedded once
    assert inner.queries == ["b"]
    np.testing.assert_array_equal(vectors[1], known)
    np.testing.assert_array_equal(vectors[0], vectors[3])
    np.testing.assert_array_equal(vectors[2], inner._vector("c"))
    assert model.embedded_texts == 3
    model.embed_queries(["c", "a"])
    assert inner.batches == [["a", "c"]]  # now all cached
    np.testing.assert_array_equal(model.embed_query("c"), vectors[2])
    assert inner.queries == ["b"]
    assert model.embed_queries([]).shape == (0, 8)


class SpanModel(CountingModel):
    """A :class:`CountingModel` that embeds a query's spans from one call: each span's
    vector is its substring's; texts over 20 characters are refused (None)."""

    model_id = "spans/v1"

    def __init__(self, shape: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.calls: list[tuple[str, list[tuple[int, int]]]] = []
        self.shape = shape

    def embed_query_spans(self, text: str, spans: Sequence[tuple[int, int]]) -> Vectors | None:
        self.calls.append((text, list(spans)))
        if len(text) > 20:
            return None
        vectors = np.stack([self._vector(text), *(self._vector(text[a:b]) for a, b in spans)])
        return vectors if self.shape is None else np.zeros(self.shape, dtype=np.float32)


def test_query_spans_are_cached_with_the_query() -> None:
    inner = SpanModel()
    model = CachedEmbeddingModel(inner, InMemoryEmbeddingCache())
    assert isinstance(inner, QuerySpanEmbeddingModel)
    text, spans = "check mail, then go", [(0, 10), (17, 19)]
    vectors = model.embed_query_spans(text, spans)
    assert vectors is not None
    expected = [inner._vector(t) for t in (text, "check mail", "go")]
    np.testing.assert_array_equal(vectors, np.stack(expected))
    again = model.embed_query_spans(text, spans)
    assert again is not None and len(inner.calls) == 1  # all cached
    np.testing.assert_array_equal(again, vectors)
    np.testing.assert_array_equal(model.embed_query(text), vectors[0])  # the query's key
    assert inner.queries == []
    model.embed_query_spans(text, [(0, 10)])  # its spans cached one by one
    assert len(inner.calls) == 1
    model.embed_query_spans(text, [(0, 5)])  # another span: embedded
    assert len(inner.calls) == 2 and model.embedded_texts == 2
    assert model.embed_query_spans("a text longer than twenty", [(0, 6)]) is None


def test_query_spans_of_a_model_without_them_are_none_and_bad_shapes_refused() -> None:
    assert (
        CachedEmbeddingModel(CountingModel(), InMemoryEmbeddingCache()).embed_query_spans(
            "check mail", [(0, 5)]
        )
        is None
    )
    model = CachedEmbeddingModel(SpanModel(shape=(1, 8)), InMemoryEmbeddingCache())
    with pytest.raises(
        ValueError, match=r"embed_query_spans returned shape \(1, 8\), expected \(2, 8\)"
    ):
        model.embed_query_spans("check mail", [(0, 5)])


def test_queries_of_a_model_without_batches_are_embedded_one_by_one() -> None:
    inner = CountingModel()
    model = CachedEmbeddingModel(inner, InMemoryEmbeddingCache())
    assert not isinstance(inner, QueryBatchEmbeddingModel)
    vectors = model.embed_queries(["x", "y", "x"])
    assert inner.queries == ["x", "y"]
    np.testing.assert_array_equal(vectors, np.stack([inner._vector(t) for t in "xyx"]))


def test_a_batch_of_the_wrong_size_and_a_string_are_refused() -> None:
    model = CachedEmbeddingModel(BatchingModel(dimensions=5), InMemoryEmbeddingCache())
    with pytest.raises(ValueError, match=r"BatchingModel.embed_queries returned shape \(2, 5\)"):
        model.embed_queries(["a", "b"])
    with pytest.raises(TypeError, match="not one string"):
        model.embed_queries("ab")  # type: ignore[arg-type]


def open_cache(location: str) -> SqliteEmbeddingCache | PostgresEmbeddingCache:
    if location.startswith("postgresql://"):
        return PostgresEmbeddingCache(location)
    return SqliteEmbeddingCache(Path(location).parent / "nested" / "embeddings.sqlite3")


def test_a_database_cache_survives_a_restart(store_location: str) -> None:
    first = CountingModel()
    cache = open_cache(store_location)
    vectors = CachedEmbeddingModel(first, cache).embed_documents(["a", "b"])
    cache.close()
    second = CountingModel()
    reopened = open_cache(store_location)
    restored = CachedEmbeddingModel(second, reopened).embed_documents(["b", "a"])
    assert second.documents == []
    np.testing.assert_array_equal(restored, vectors[[1, 0]])
    assert len(reopened) == 2
    reopened.close()


@pytest.fixture(params=["in-memory", "sqlite", "postgres"])
def any_cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddingCache]:
    """An embedding cache of each engine, closed after the test."""
    if request.param == "in-memory":
        yield InMemoryEmbeddingCache()
        return
    location = str(tmp_path / "store.db")
    if request.param == "postgres":
        location = request.getfixturevalue("postgres_url")
    cache = open_cache(location)
    yield cache
    cache.close()


def test_a_cache_reads_more_keys_than_one_statement_binds(any_cache: EmbeddingCache) -> None:
    cache = any_cache
    items = {f"k{i}": np.full(2, i, dtype=np.float32) for i in range(1200)}
    cache.put_many(items)
    cache.put_many({"k0": np.full(2, -1, dtype=np.float32)})  # a key written again
    found = cache.get_many([*items, "absent"])
    assert len(found) == 1200
    assert found["k1199"].tolist() == [1199.0, 1199.0]
    assert found["k0"].tolist() == [-1.0, -1.0]


def test_tiered_cache_copies_disk_hits_into_memory(tmp_path: Path) -> None:
    disk = SqliteEmbeddingCache(tmp_path / "e.sqlite3")
    disk.put_many({"k": np.ones(3, dtype=np.float32)})
    memory = InMemoryEmbeddingCache()
    tiered = TieredEmbeddingCache(memory, disk)
    assert set(tiered.get_many(["k", "missing"])) == {"k"}
    assert set(memory.get_many(["k"])) == {"k"}
    tiered.put_many({"n": np.zeros(3, dtype=np.float32)})
    assert set(disk.get_many(["n"])) == {"n"}
    with pytest.raises(ValueError, match="at least one cache"):
        TieredEmbeddingCache()


def test_in_memory_cache_drops_least_recently_used() -> None:
    cache = InMemoryEmbeddingCache(max_entries=2)
    one = np.ones(1, dtype=np.float32)
    cache.put_many({"a": one, "b": one})
    cache.get_many(["a"])
    cache.put_many({"c": one})
    assert set(cache.get_many(["a", "b", "c"])) == {"a", "c"}
    with pytest.raises(ValueError, match="max_entries"):
        InMemoryEmbeddingCache(max_entries=0)


def test_cached_model_rejects_bad_input_with_specific_errors() -> None:
    class Anonymous(CountingModel):
        model_id = ""

    with pytest.raises(ValueError, match="model_id"):
        CachedEmbeddingModel(Anonymous(), InMemoryEmbeddingCache())
    model = CachedEmbeddingModel(CountingModel(), InMemoryEmbeddingCache())
    with pytest.raises(TypeError, match="not one string"):
        model.embed_documents("one text")

    class WrongShape(CountingModel):
        def embed_documents(self, texts: Sequence[str]) -> Vectors:
            return np.zeros((len(texts), 3), dtype=np.float32)

    broken = CachedEmbeddingModel(WrongShape(), InMemoryEmbeddingCache())
    with pytest.raises(ValueError, match=r"returned shape \(1, 3\), expected \(1, 8\)"):
        broken.embed_documents(["x"])


def test_cache_keys_of_different_model_ids_never_collide() -> None:
    # The parts are joined with NUL bytes: a NUL in a model id could make two keys equal.
    with pytest.raises(ValueError, match="NUL"):
        embedding_key("m\x00query", "document", "x")
    assert embedding_key("m", "query", "document\x00x") != embedding_key("m", "document", "x")
    with pytest.raises(ValueError, match="NUL"):
        CachedEmbeddingModel(CountingModel(), InMemoryEmbeddingCache(), model_id="m\x00query")


def test_in_memory_cache_keeps_its_own_copies() -> None:
    import gc
    import weakref

    made: list[weakref.ref[Vectors]] = []

    class Batches(CountingModel):
        def embed_documents(self, texts: Sequence[str]) -> Vectors:
            matrix = super().embed_documents(texts)
            made.append(weakref.ref(matrix))
            return matrix

    model = CachedEmbeddingModel(Batches(), InMemoryEmbeddingCache(max_entries=1))
    model.embed_documents([f"text {i}" for i in range(1000)])
    gc.collect()
    # one cached row must not keep the 1,000-row batch it came from in memory
    assert made[0]() is None
    query = model.embed_query("q")
    query *= 0  # the caller's array is not the cached one
    assert np.linalg.norm(model.embed_query("q")) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="read-only"):
        model.embed_query("q")[0] = 5.0  # nor can a cached one be changed in place


def test_cached_vectors_of_another_size_are_embedded_again() -> None:
    class Smaller(CountingModel):
        dimensions = 4

        def _vector(self, text: str) -> Vectors:
            return super()._vector(text)[:4] / np.linalg.norm(super()._vector(text)[:4])

    cache = InMemoryEmbeddingCache()
    queries = InMemoryEmbeddingCache()
    old = CachedEmbeddingModel(CountingModel(), cache, model_id="mine", query_cache=queries)
    old.embed_documents(["a", "b"])
    old.embed_query("q")
    inner = Smaller()
    new = CachedEmbeddingModel(inner, cache, model_id="mine", query_cache=queries)
    assert new.embed_documents(["a"]).shape == (1, 4)
    assert new.embed_documents(["a", "c"]).shape == (2, 4)
    assert new.embed_query("q").shape == (4,)
    assert inner.documents == ["a", "c"] and inner.queries == ["q"]

    class WrongQuery(CountingModel):
        def embed_query(self, text: str) -> Vectors:
            return np.zeros((1, 8), dtype=np.float32)

    with pytest.raises(ValueError, match=r"embed_query returned shape \(1, 8\), expected \(8,\)"):
        CachedEmbeddingModel(WrongQuery(), InMemoryEmbeddingCache()).embed_query("q")


def test_default_cache_path_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TOOLUSE_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_path() == tmp_path / "c" / "embeddings.sqlite3"
    monkeypatch.delenv("TOOLUSE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == tmp_path / "xdg" / "tooluse" / "embeddings.sqlite3"


# -- OpenAI-compatible endpoint, over the real SDK and wire format ---------------------------


def _embeddings_transport(requests: list[dict[str, object]], size: int = 3) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/embeddings")
        body = json.loads(request.content)
        requests.append(body)
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(text)), 0.0, 0.0][:size]}
            for i, text in enumerate(body["input"])
        ]
        data.reverse()  # servers may answer out of order; the index says which is which
        return httpx.Response(
            200,
            json={
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            },
        )

    return httpx.MockTransport(handle)


def test_openai_model_batches_prefixes_and_normalises() -> None:
    requests: list[dict[str, object]] = []
    client = openai.OpenAI(
        api_key="k",
        base_url="http://embed.test/v1",
        http_client=httpx.Client(transport=_embeddings_transport(requests)),
    )
    model = OpenAIEmbeddingModel(
        "e5",
        dimensions=3,
        sync_client=client,
        batch_size=2,
        query_prefix="query: ",
        document_prefix="passage: ",
    )
    assert isinstance(model, EmbeddingModel)
    vectors = model.embed_documents(["a", "bb", "ccc"])
    assert vectors.shape == (3, 3)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert [r["input"] for r in requests] == [["passage: a", "passage: bb"], ["passage: ccc"]]
    assert model.embed_query("q").shape == (3,)
    assert requests[-1]["input"] == ["query: q"]
    del requests[:]
    queries = model.embed_queries(["q", "rr", "sss"])
    assert [r["input"] for r in requests] == [["query: q", "query: rr"], ["query: sss"]]
    np.testing.assert_array_equal(queries[0], model.embed_query("q"))
    assert "dimensions" not in requests[-1]
    assert "e5" in model.model_id


def test_openai_model_reports_a_wrong_vector_size() -> None:
    client = openai.OpenAI(
        api_key="k",
        base_url="http://embed.test/v1",
        http_client=httpx.Client(transport=_embeddings_transport([], size=2)),
    )
    model = OpenAIEmbeddingModel("m", dimensions=3, sync_client=client)
    with pytest.raises(ValueError, match="size 2, expected dimensions=3"):
        model.embed_query("q")
    with pytest.raises(ValueError, match="blank"):
        OpenAIEmbeddingModel(" ", dimensions=3)
    with pytest.raises(ValueError, match="dimensions"):
        OpenAIEmbeddingModel("m", dimensions=0)


async def test_openai_model_async_forms() -> None:
    requests: list[dict[str, object]] = []
    client = openai.AsyncOpenAI(
        api_key="k",
        base_url="http://embed.test/v1",
        http_client=httpx.AsyncClient(transport=_embeddings_transport(requests)),
    )
    model = OpenAIEmbeddingModel("m", dimensions=3, client=client, send_dimensions=True)
    assert (await model.aembed_documents(["a", "b"])).shape == (2, 3)
    assert (await model.aembed_query("a")).shape == (3,)
    assert all(r["dimensions"] == 3 for r in requests)


# -- the bundled model, for real --------------------------------------------------------------


@pytest.fixture(scope="module")
def e5() -> E5EmbeddingModel:
    return E5EmbeddingModel()


def test_bundled_model_embeds_chinese_and_english(e5: E5EmbeddingModel) -> None:
    tools = [
        "查询城市当前天气",
        "发送电子邮件给联系人",
        "Get the current weather for a city",
        "Send an email to a contact",
    ]
    documents = e5.embed_documents(tools)
    assert documents.shape == (4, 384) and documents.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(documents, axis=1), 1.0, atol=1e-3)
    weather_zh = documents @ e5.embed_query("查询天气")
    assert int(np.argmax(weather_zh)) == 0
    mail_en = documents @ e5.embed_query("email my colleague")
    assert int(np.argmax(mail_en)) in (1, 3)
    assert mail_en[3] > mail_en[2]
    assert e5.embed_documents([]).shape == (0, 384)
    with pytest.raises(TypeError):
        e5.embed_documents("one string")  # type: ignore[arg-type]


def test_bundled_model_counts_the_tokens_it_reads(e5: E5EmbeddingModel) -> None:
    short = e5.token_count("weather")
    assert 3 <= short <= 8  # prefix, word and special tokens
    assert e5.token_count("weather " * 20) > short + 15
    assert e5.token_count("weather", query=False) != short  # "passage: " vs "query: "
    with pytest.raises(TypeError, match="one text"):
        e5.token_count(["weather"])  # type: ignore[arg-type]
