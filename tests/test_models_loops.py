"""One chat model used from several event loops: ``ChatClient.call()`` (the sync API's private
loop), ``asyncio.run(...)`` after ``asyncio.run(...)``, a loop per thread. The async clients
the model makes are per loop, closed by each loop's shutdown or by ``close()`` / ``aclose()``,
without ``ResourceWarning``s. Against the local wire-format server, through the real SDKs."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest

from provider_models import ask, collect
from provider_payloads import (
    anthropic_block_start,
    anthropic_block_stop,
    anthropic_message,
    anthropic_message_delta,
    anthropic_message_start,
    anthropic_text_delta,
    openai_chunk,
    openai_completion,
    text_block,
)
from provider_server import ProviderServer, Reply, anthropic_sse, openai_sse, shared_server
from tooluse import ChatClient
from tooluse._sync import run_sync
from tooluse.models import AnthropicChatModel, OpenAIChatModel
from tooluse.streaming import merge_chunks

Model = OpenAIChatModel | AnthropicChatModel
NAMES = {"sync_name": "f", "async_name": "af"}  # run_sync's names for its error message


def _openai_reply(text: str) -> Reply:
    return Reply.json(openai_completion(text))


def _openai_stream(text: str) -> Reply:
    return openai_sse([openai_chunk({"content": text}), openai_chunk({}, finish_reason="stop")])


def _anthropic_reply(text: str) -> Reply:
    return Reply.json(anthropic_message(text_block(text)))


def _anthropic_stream(text: str) -> Reply:
    return anthropic_sse(
        [
            anthropic_message_start({"input_tokens": 5, "output_tokens": 1}),
            anthropic_block_start(0, text_block("")),
            anthropic_text_delta(0, text),
            anthropic_block_stop(0),
            anthropic_message_delta("end_turn", 3),
            {"type": "message_stop"},
        ]
    )


# provider -> (model factory, plain reply, streamed reply)
PROVIDERS: dict[str, tuple[Callable[[str], Model], Callable[[str], Reply], Callable[[str], Reply]]]
PROVIDERS = {
    "openai": (
        lambda url: OpenAIChatModel("gpt-test", base_url=f"{url}/v1", api_key="k", max_retries=0),
        _openai_reply,
        _openai_stream,
    ),
    "anthropic": (
        lambda url: AnthropicChatModel("claude-test", base_url=url, api_key="k", max_retries=0),
        _anthropic_reply,
        _anthropic_stream,
    ),
}


@pytest.fixture
def server() -> ProviderServer:
    return shared_server()


@pytest.fixture(params=sorted(PROVIDERS))
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _model(provider: str, server: ProviderServer) -> Model:
    return PROVIDERS[provider][0](server.url)


def _expect(provider: str, server: ProviderServer, *texts: str, stream: bool = False) -> None:
    reply = PROVIDERS[provider][2 if stream else 1]
    server.expect(*(reply(text) for text in texts))


async def _acall_with_client(model: Model) -> tuple[str | None, Any]:
    """The answer, and the async client the model used on this loop."""
    response = await model.acall(ask())
    return response.text, model._client


async def _acall_client(model: Model) -> Any:
    """The async client the model uses on this loop."""
    return model._client


async def _stream_text(model: Model) -> str | None:
    return merge_chunks(await collect(model, ask())).text


def test_one_model_serves_the_sync_api_and_one_asyncio_run_after_another(
    provider: str, server: ProviderServer, no_resource_warnings: None
) -> None:
    model = _model(provider, server)
    client = ChatClient(model)
    try:
        _expect(provider, server, "blocking", "sync api", "first run", "second run")
        assert model.call(ask()).text == "blocking"
        assert client.prompt("hi").call().content() == "sync api"  # on its private loop
        first, first_client = asyncio.run(_acall_with_client(model))
        second, second_client = asyncio.run(_acall_with_client(model))
        assert (first, second) == ("first run", "second run")
        _expect(provider, server, "streamed", stream=True)
        assert asyncio.run(_stream_text(model)) == "streamed"
        _expect(provider, server, "sync api again")
        assert client.prompt("hi").call().content() == "sync api again"
        # Each asyncio.run() had its own client, closed when its loop shut down.
        assert first_client is not second_client
        assert first_client.is_closed() and second_client.is_closed()
    finally:
        model.close()


def test_a_streamed_answer_under_one_asyncio_run_after_another(
    provider: str, server: ProviderServer, no_resource_warnings: None
) -> None:
    model = _model(provider, server)
    _expect(provider, server, "one", "two", stream=True)
    assert asyncio.run(_stream_text(model)) == "one"
    assert asyncio.run(_stream_text(model)) == "two"
    model.close()


def test_a_loop_per_thread_each_with_its_own_client(
    provider: str, server: ProviderServer, no_resource_warnings: None
) -> None:
    model = _model(provider, server)
    client = ChatClient(model)
    _expect(provider, server, *["same"] * 6)
    private: list[Any] = []  # the clients of the threads' sync-API loops
    ran: list[Any] = []  # those of their asyncio.run() loops
    started, finished = threading.Barrier(3), threading.Barrier(3)

    def work() -> None:
        started.wait()
        assert client.prompt("hi").call().content() == "same"  # this thread's private loop
        private.append(run_sync(_acall_client(model), **NAMES))
        text, async_client = asyncio.run(_acall_with_client(model))
        assert text == "same"
        ran.append(async_client)
        finished.wait()  # none ends before all have made their loops

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len({id(c) for c in private + ran}) == 6
    assert all(c.is_closed() for c in ran) and not any(c.is_closed() for c in private)
    model.close()  # the ended threads' loops will never run again: their clients wait
    assert not any(c.is_closed() for c in private)
    # The next thread to use the sync API closes the loops of the threads that have ended.
    newcomer = threading.Thread(target=run_sync, args=(asyncio.sleep(0),), kwargs=NAMES)
    newcomer.start()
    newcomer.join(timeout=60)
    assert all(c.is_closed() for c in private)


def test_aclose_closes_the_running_loops_client_and_the_model_stays_usable(
    provider: str, server: ProviderServer, no_resource_warnings: None
) -> None:
    model = _model(provider, server)
    _expect(provider, server, "one", "two")

    async def use_close_use() -> tuple[Any, Any]:
        _, before = await _acall_with_client(model)
        await model.aclose()
        assert before.is_closed()
        text, after = await _acall_with_client(model)  # a new client for this loop
        assert text == "two" and not after.is_closed()
        await model.aclose()
        return before, after

    before, after = asyncio.run(use_close_use())
    assert before is not after and after.is_closed()


def test_close_from_sync_code_closes_the_sync_apis_client(
    provider: str, server: ProviderServer, no_resource_warnings: None
) -> None:
    model = _model(provider, server)
    client = ChatClient(model)
    _expect(provider, server, "blocking", "sync api", "again")
    assert model.call(ask()).text == "blocking"
    assert client.prompt("hi").call().content() == "sync api"
    async_client = run_sync(_acall_client(model), **NAMES)
    model.close()
    assert async_client.is_closed()
    assert client.prompt("hi").call().content() == "again"  # new clients
    model.close()


def test_a_model_dropped_unclosed_has_its_loops_close_its_clients(
    provider: str, server: ProviderServer, no_resource_warnings: None
) -> None:
    model = _model(provider, server)
    _expect(provider, server, "sync api")
    assert ChatClient(model).prompt("hi").call().content() == "sync api"
    async_client = run_sync(_acall_client(model), **NAMES)
    dropped = weakref.ref(model)
    del model
    gc.collect()  # the model sits in reference cycles
    assert dropped() is None
    assert not async_client.is_closed()  # handed to its loop, which has not run since
    run_sync(asyncio.sleep(0.05), **NAMES)
    assert async_client.is_closed()


def test_on_a_long_running_loop_a_dropped_or_sync_closed_model_closes_its_client_soon(
    provider: str, server: ProviderServer, no_resource_warnings: None
) -> None:
    async def serve() -> None:  # a model per request on a server's loop, never aclose()d
        _expect(provider, server, "one", "two")
        model = _model(provider, server)
        _, dropped_client = await _acall_with_client(model)
        del model
        gc.collect()
        closed = _model(provider, server)
        _, closed_client = await _acall_with_client(closed)
        closed.close()  # the blocking form, from async code: the loop closes it soon
        await asyncio.sleep(0.1)
        assert dropped_client.is_closed() and closed_client.is_closed()

    asyncio.run(serve())


def test_a_loop_closed_without_shutting_down_does_not_keep_its_client(
    provider: str, server: ProviderServer
) -> None:
    model = _model(provider, server)
    _expect(provider, server, "old loop", "new loop")
    loop = asyncio.new_event_loop()
    text, old = loop.run_until_complete(_acall_with_client(model))
    loop.close()  # no shutdown_asyncgens(): the client cannot be closed on it any more
    old_client = weakref.ref(old)
    del old
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # its socket, found by the collector
        text, new = asyncio.run(_acall_with_client(model))
        gc.collect()
    assert text == "new loop" and new.is_closed()
    assert old_client() is None  # dropped when the next loop's client was made
    model.close()


# -- injected clients --------------------------------------------------------------------------


def test_an_injected_async_client_of_the_wrong_kind_is_refused() -> None:
    blocking = openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    asynchronous = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(TypeError) as raised:
        OpenAIChatModel("m", client=blocking)  # type: ignore[arg-type]
    assert str(raised.value) == (
        "OpenAIChatModel(client=...) takes an openai.AsyncOpenAI, got openai.OpenAI; "
        "the model sends every request with the async client (its call() and "
        "ChatClient.call() run it on an event loop of their own)"
    )
    with pytest.raises(TypeError, match=r"takes an openai\.AsyncOpenAI, got builtins\.str$"):
        OpenAIChatModel("m", client="sk-key")  # type: ignore[arg-type]
    assert OpenAIChatModel("m", client=asynchronous).base_url.startswith("http://127.0.0.1:9/v1")
    azure = openai.AsyncAzureOpenAI(
        api_key="k", api_version="2024-10-21", azure_endpoint="https://x.example"
    )
    OpenAIChatModel("m", client=azure)  # a subclass of AsyncOpenAI


def test_an_injected_anthropic_client_of_the_wrong_kind_is_refused() -> None:
    with pytest.raises(TypeError) as raised:
        AnthropicChatModel("m", client=anthropic.Anthropic(api_key="k"))  # type: ignore[arg-type]
    assert str(raised.value) == (
        "AnthropicChatModel(client=...) takes an anthropic.AsyncAnthropic, got "
        "anthropic.Anthropic; the model sends every request with the async client (its "
        "call() and ChatClient.call() run it on an event loop of their own)"
    )
    with pytest.raises(TypeError, match=r"takes an anthropic\.AsyncAnthropic, got openai\."):
        AnthropicChatModel("m", client=openai.AsyncOpenAI(api_key="k"))  # type: ignore[arg-type]
    # The SDK's other async clients (Bedrock, Vertex) do not subclass AsyncAnthropic.
    vertex = anthropic.AsyncAnthropicVertex(region="us-east5", project_id="p", access_token="t")
    AnthropicChatModel("m", client=vertex)  # type: ignore[arg-type]


async def test_an_injected_async_client_is_the_users_on_every_loop(server: ProviderServer) -> None:
    client = openai.AsyncOpenAI(api_key="k", base_url=f"{server.url}/v1", max_retries=0)
    model = OpenAIChatModel("gpt-test", client=client)
    server.expect(_openai_reply("one"))
    text, used = await _acall_with_client(model)
    assert text == "one" and used is client
    await model.aclose()
    assert not client.is_closed()  # left to its owner
    await client.close()


# -- a model shared by tests that each run on their own loop (pytest-asyncio's default) -------


@pytest.fixture(scope="module")
def shared_models() -> Iterator[dict[str, Model]]:
    server = shared_server()
    models = {provider: _model(provider, server) for provider in PROVIDERS}
    yield models
    for model in models.values():
        model.close()


@pytest.mark.parametrize("turn", ["first", "second", "third"])
async def test_a_model_shared_by_tests_each_on_its_own_loop(
    turn: str, provider: str, server: ProviderServer, shared_models: dict[str, Model]
) -> None:
    model = shared_models[provider]
    _expect(provider, server, turn)
    assert (await model.acall(ask())).text == turn
    _expect(provider, server, turn, stream=True)
    assert await _stream_text(model) == turn
