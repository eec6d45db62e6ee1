"""``OpenAIEmbeddingModel`` against a local server speaking OpenAI's ``/v1/embeddings``: the
request limits (2,048 inputs, 300,000 tokens), empty inputs, and the SDK's errors as
``ProviderError``; the blocking and the async forms alike."""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import numpy as np
import openai
import pytest

from provider_server import ProviderServer, RecordedRequest, Reply, shared_server
from tooluse._sync import run_sync
from tooluse.embedding import OpenAIEmbeddingModel, Vectors
from tooluse.models import ProviderError
from tooluse.search import ToolReference, ToolSearchRequest, VectorToolIndex


def _embeddings(request: RecordedRequest) -> Reply:
    """OpenAI's answer: one vector per input (its length, then 1 and 0), in base64 float32
    when the SDK asks for it (it does unless told otherwise)."""
    body = request.body
    data = []
    for index, text in enumerate(body["input"]):
        vector = np.array([len(text), 1.0, 0.0], dtype=np.float32)
        embedding: Any = vector.tolist()
        if body.get("encoding_format") == "base64":
            embedding = base64.b64encode(vector.astype("<f4").tobytes()).decode()
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    usage = {"prompt_tokens": 1, "total_tokens": 1}
    return Reply.json({"object": "list", "data": data, "model": body["model"], "usage": usage})


@pytest.fixture
def server() -> ProviderServer:
    return shared_server()


@pytest.fixture
async def make_model(
    server: ProviderServer,
) -> AsyncIterator[Callable[..., OpenAIEmbeddingModel]]:
    """Models over clients of the local server (no retries), closed when the test ends."""
    sync_clients = openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0)
    clients = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0)

    def make(**settings: Any) -> OpenAIEmbeddingModel:
        settings = {"dimensions": 3, "client": clients, "sync_client": sync_clients, **settings}
        return OpenAIEmbeddingModel("text-embedding-3-small", **settings)

    yield make
    sync_clients.close()
    await clients.close()


@pytest.fixture(params=["sync", "async"])
def blocking(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "sync")


async def documents(model: OpenAIEmbeddingModel, texts: Sequence[str], blocking: bool) -> Vectors:
    return model.embed_documents(texts) if blocking else await model.aembed_documents(texts)


async def query(model: OpenAIEmbeddingModel, text: str, blocking: bool) -> Vectors:
    return model.embed_query(text) if blocking else await model.aembed_query(text)


def sizes(server: ProviderServer) -> list[int]:
    return [len(request.body["input"]) for request in server.requests]


# -- request limits ----------------------------------------------------------------------------


async def test_more_than_2048_inputs_go_in_several_requests_within_the_token_cap(
    server: ProviderServer, make_model: Callable[..., OpenAIEmbeddingModel], blocking: bool
) -> None:
    server.expect(*[_embeddings] * 4)
    short = [f"tool {i}" for i in range(2049)]
    vectors = await documents(make_model(batch_size=2048), short, blocking)
    assert vectors.shape == (2049, 3) and sizes(server) == [2048, 1]
    assert vectors[2048, 0] > vectors[0, 0]  # rows in the order of the texts
    server.reset()
    server.expect(*[_embeddings] * 4)
    longer = [f"{i:0200d}" for i in range(2049)]  # 200 bytes each: 1,500 fill 300,000
    await documents(make_model(batch_size=2048), longer, blocking)
    assert sizes(server) == [1500, 549]
    assert all(len(request.body["input"][0]) == 200 for request in server.requests)


async def test_long_texts_are_split_by_their_utf8_bytes_and_an_oversized_one_goes_alone(
    server: ProviderServer, make_model: Callable[..., OpenAIEmbeddingModel], blocking: bool
) -> None:
    server.expect(*[_embeddings] * 8)
    model = make_model()  # default: 256 texts, 300,000 tokens
    await documents(model, ["a" * 120_000] * 5, blocking)
    assert sizes(server) == [2, 2, 1]
    server.reset()
    server.expect(*[_embeddings] * 8)
    # 60,000 characters, 180,000 UTF-8 bytes: each may be as many tokens
    await documents(model, ["天" * 60_000] * 3, blocking)
    assert sizes(server) == [1, 1, 1]
    server.reset()
    server.expect(*[_embeddings] * 8)
    await documents(model, ["short", "a" * 400_000, "short", "short"], blocking)
    assert sizes(server) == [1, 1, 2]  # the server judges the oversized one itself


async def test_the_token_cap_is_configurable_and_can_be_lifted(
    server: ProviderServer, make_model: Callable[..., OpenAIEmbeddingModel], blocking: bool
) -> None:
    server.expect(*[_embeddings] * 8)
    await documents(make_model(max_batch_tokens=12, document_prefix="p: "), ["abc"] * 5, blocking)
    assert sizes(server) == [2, 2, 1]
    assert server.requests[0].body["input"] == ["p: abc", "p: abc"]  # 6 bytes each
    server.reset()
    server.expect(*[_embeddings] * 4)
    await documents(make_model(max_batch_tokens=None), ["a" * 120_000] * 5, blocking)
    assert sizes(server) == [5]


def test_limits_beyond_the_apis_are_refused() -> None:
    for size in (2049, 0):
        message = (
            "batch_size must be between 1 and 2048 (the most inputs OpenAI's embeddings API "
            f"takes in one request), got {size}"
        )
        with pytest.raises(ValueError, match=re.escape(message)):
            OpenAIEmbeddingModel("m", dimensions=3, batch_size=size)
    with pytest.raises(ValueError, match="max_batch_tokens must be at least 1 or None, got 0"):
        OpenAIEmbeddingModel("m", dimensions=3, max_batch_tokens=0)
    OpenAIEmbeddingModel("m", dimensions=3, batch_size=2048, max_batch_tokens=None)


# -- empty inputs ------------------------------------------------------------------------------


async def test_an_empty_text_is_refused_before_any_request(
    server: ProviderServer, make_model: Callable[..., OpenAIEmbeddingModel], blocking: bool
) -> None:
    model = make_model(batch_size=1)
    with pytest.raises(ValueError, match=r"texts\[2\] is empty; embedding endpoints refuse"):
        await documents(model, ["a", "b", "", "d"], blocking)
    with pytest.raises(ValueError, match="embed_query got an empty text"):
        await query(model, "", blocking)
    assert server.requests == []
    # A prefix makes the input non-empty; whitespace is text to the endpoint.
    server.expect(*[_embeddings] * 3)
    prefixed = make_model(query_prefix="query: ", document_prefix="passage: ")
    assert (await documents(prefixed, [""], blocking)).shape == (1, 3)
    assert (await query(prefixed, "", blocking)).shape == (3,)
    assert (await query(model, " ", blocking)).shape == (3,)
    inputs = [request.body["input"] for request in server.requests]
    assert inputs == [["passage: "], ["query: "], [" "]]


async def test_a_blank_query_to_a_vector_index_sends_no_request(
    server: ProviderServer, make_model: Callable[..., OpenAIEmbeddingModel]
) -> None:
    server.expect(_embeddings)
    index = VectorToolIndex(make_model())
    index.index_tools("s", [ToolReference("get_weather"), ToolReference("send_email")])
    for blank in ("", "   "):
        found = index.search(ToolSearchRequest("s", blank)).tool_references
        assert [(t.tool_name, t.relevance_score) for t in found] == [
            ("get_weather", 0.0),
            ("send_email", 0.0),
        ]
    assert len(server.requests) == 1  # the tools' texts only


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (500, True)], ids=["bad-request", "server-error"]
)
async def test_an_error_status_is_a_provider_error_with_the_providers_message(
    server: ProviderServer,
    make_model: Callable[..., OpenAIEmbeddingModel],
    blocking: bool,
    status: int,
    retryable: bool,
) -> None:
    error = {"error": {"message": "'$.input' is invalid.", "type": "invalid_request_error"}}
    server.expect(Reply.json(error, status=status), Reply.json(error, status=status))
    model = make_model()
    for embed in (documents(model, ["a"], blocking), query(model, "a", blocking)):
        with pytest.raises(ProviderError) as raised:
            await embed
        assert str(raised.value) == f"openai: HTTP {status}: '$.input' is invalid."
        assert raised.value.provider == "openai" and raised.value.status_code == status
        assert raised.value.provider_message == "'$.input' is invalid."
        assert raised.value.retryable is retryable
        assert isinstance(raised.value.__cause__, openai.APIStatusError)


async def test_a_dropped_connection_is_a_provider_error(
    server: ProviderServer, make_model: Callable[..., OpenAIEmbeddingModel], blocking: bool
) -> None:
    server.expect(Reply.dropped())
    with pytest.raises(ProviderError, match="openai: Connection error") as raised:
        await documents(make_model(), ["a"], blocking)
    assert raised.value.status_code is None and raised.value.retryable
    assert raised.value.provider_message == "Connection error."
    assert isinstance(raised.value.__cause__, openai.APIConnectionError)


async def test_errors_of_the_response_itself_stay_value_errors(
    server: ProviderServer, make_model: Callable[..., OpenAIEmbeddingModel], blocking: bool
) -> None:
    server.expect(_embeddings)
    with pytest.raises(ValueError, match="size 3, expected dimensions=4"):
        await query(make_model(dimensions=4), "a", blocking)


# -- event loops and clients -------------------------------------------------------------------


def test_one_model_embeds_from_the_sync_api_and_one_asyncio_run_after_another(
    server: ProviderServer, no_resource_warnings: None
) -> None:
    model = OpenAIEmbeddingModel(
        "m", dimensions=3, base_url=f"{server.url}/v1", api_key="k", max_retries=0
    )

    async def embed() -> tuple[Vectors, Any]:
        return await model.aembed_documents(["a", "bb"]), model._aclient()

    async def query() -> Vectors:
        return await model.aembed_query("abc")

    server.expect(*[_embeddings] * 5)
    try:
        assert model.embed_documents(["a"]).shape == (1, 3)  # the blocking client
        vectors, private = run_sync(embed(), sync_name="f", async_name="af")  # a private loop
        first, first_client = asyncio.run(embed())
        second, second_client = asyncio.run(embed())
        assert asyncio.run(query()).shape == (3,)
        np.testing.assert_allclose(first, second)
        np.testing.assert_allclose(first, vectors)
        assert len({id(private), id(first_client), id(second_client)}) == 3
        assert first_client.is_closed() and second_client.is_closed()  # by their loops
        assert not private.is_closed()
    finally:
        model.close()
    assert private.is_closed()
    assert len(server.requests) == 5


async def test_aclose_closes_what_the_model_made_and_it_stays_usable(
    server: ProviderServer, no_resource_warnings: None
) -> None:
    model = OpenAIEmbeddingModel(
        "m", dimensions=3, base_url=f"{server.url}/v1", api_key="k", max_retries=0
    )
    server.expect(*[_embeddings] * 4)
    await model.aembed_query("a")
    await asyncio.to_thread(model.embed_query, "a")
    made, blocking = model._aclient(), model._sync_client()
    await model.aclose()
    assert made.is_closed() and blocking.is_closed()
    await model.aembed_query("a")  # new clients
    await asyncio.to_thread(model.embed_query, "a")
    assert model._aclient() is not made and model._sync_client() is not blocking
    await model.aclose()
    assert model._aclient() is not made  # made again on request; nothing is open
    await model.aclose()


async def test_injected_clients_are_left_open(
    server: ProviderServer, make_model: Callable[..., OpenAIEmbeddingModel]
) -> None:
    model = make_model()
    server.expect(*[_embeddings] * 2)
    await model.aembed_query("a")
    model.embed_query("a")
    await model.aclose()
    model.close()
    assert not model._aclient().is_closed() and not model._sync_client().is_closed()


def test_clients_of_the_wrong_kind_are_refused_with_the_parameter_to_use() -> None:
    blocking = openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    asynchronous = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(TypeError) as raised:
        OpenAIEmbeddingModel("m", dimensions=3, client=blocking)  # type: ignore[arg-type]
    assert str(raised.value) == (
        "OpenAIEmbeddingModel(client=...) takes an openai.AsyncOpenAI, got openai.OpenAI; "
        "pass it as sync_client= instead"
    )
    with pytest.raises(TypeError) as raised:
        OpenAIEmbeddingModel("m", dimensions=3, sync_client=asynchronous)  # type: ignore[arg-type]
    assert str(raised.value) == (
        "OpenAIEmbeddingModel(sync_client=...) takes an openai.OpenAI, got openai.AsyncOpenAI; "
        "pass it as client= instead"
    )
    model = OpenAIEmbeddingModel("m", dimensions=3, client=asynchronous, sync_client=blocking)
    assert model.model_id.startswith("openai/http://127.0.0.1:9/v1//m/3")


def test_the_blocking_forms_need_a_blocking_client_beside_an_injected_async_one() -> None:
    asynchronous = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    model = OpenAIEmbeddingModel("m", dimensions=3, client=asynchronous)
    with pytest.raises(RuntimeError, match=r"pass sync_client=openai\.OpenAI\(\.\.\.\) as well"):
        model.embed_query("a")


def test_the_async_forms_need_an_async_client_beside_an_injected_blocking_one() -> None:
    # Not a client made from settings, which could point at another endpoint.
    blocking = openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    model = OpenAIEmbeddingModel("m", dimensions=3, sync_client=blocking)
    with pytest.raises(RuntimeError, match=r"pass client=openai\.AsyncOpenAI\(\.\.\.\) as well"):
        asyncio.run(model.aembed_query("a"))
