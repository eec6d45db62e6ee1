"""A forked child (a pre-fork server, a multiprocessing pool with the fork start method) can
use what its parent built: thread pools, locks, SQLite stores, the sync API, chat models and a
tool index whose catalogue was still being embedded at the fork. Each check runs in a real
child process (``_forking.in_child``)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from _forking import in_child
from provider_models import ask
from provider_payloads import openai_completion
from provider_server import Reply, shared_server
from search_fakes import BagOfWordsModel
from tooluse import ChatClient
from tooluse._fork import ProcessLock, ThreadPool
from tooluse._sync import run_sync
from tooluse.embedding import SqliteEmbeddingCache, Vectors
from tooluse.models import OpenAIChatModel
from tooluse.search import HybridToolIndex, ToolReference, ToolSearchRequest
from tooluse.tools._threads import run_in_tool_thread


def test_a_thread_pool_used_before_the_fork_runs_work_in_the_child() -> None:
    pool = ThreadPool(2, "test-pool")
    both = threading.Barrier(2, timeout=5)  # two tasks at once: both threads start
    assert sorted(f.result(timeout=5) for f in [pool.submit(both.wait) for _ in range(2)]) == [0, 1]

    def child() -> list[int]:
        return list(pool.map(lambda n: n * n, range(4), timeout=5))

    assert in_child(child) == [0, 1, 4, 9]
    assert pool.submit(lambda: 3).result(timeout=5) == 3  # the parent's pool is untouched


def test_a_lock_another_thread_held_at_the_fork_is_free_in_the_child() -> None:
    lock = ProcessLock()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(timeout=30)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(timeout=5)
    try:

        def child() -> str:
            with lock:
                return "acquired"

        assert in_child(child) == "acquired"
    finally:
        release.set()
        holder.join()


def test_the_sqlite_cache_opens_its_own_connection_in_the_child(tmp_path: Path) -> None:
    cache = SqliteEmbeddingCache(tmp_path / "cache.sqlite3")
    cache.put_many({"parent": np.array([1.0, 2.0])})  # the parent's connection is open and used
    parent_connection = id(cache._connection)

    def child() -> dict[str, Any]:
        cache.put_many({"child": np.array([3.0])})
        return {
            "own_connection": id(cache._connection) != parent_connection,
            "sees_parent_rows": cache.get_many(["parent"])["parent"].tolist(),
        }

    assert in_child(child) == {"own_connection": True, "sees_parent_rows": [1.0, 2.0]}
    assert cache.get_many(["child"])["child"].tolist() == [3.0]
    assert len(cache) == 2
    cache.close()


def test_an_in_memory_sqlite_cache_keeps_its_rows_in_the_child() -> None:
    # No file, so no lock to protect: the child uses its copy of the parent's database.
    cache = SqliteEmbeddingCache(":memory:")
    cache.put_many({"parent": np.array([1.0])})

    def child() -> list[float]:
        return cache.get_many(["parent"])["parent"].tolist()

    assert in_child(child) == [1.0]


def test_sync_tools_run_in_a_child_after_the_parent_ran_some() -> None:
    assert asyncio.run(run_in_tool_thread(lambda: "parent")) == "parent"
    assert in_child(lambda: asyncio.run(run_in_tool_thread(lambda: "child"))) == "child"


class GatedModel(BagOfWordsModel):
    """Embeds documents once ``gate`` is set: the parent's embedding waits at the fork."""

    def __init__(self) -> None:
        super().__init__(aliases={"forecast": "weather"})
        self.gate = threading.Event()

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        assert self.gate.wait(15), "the test never opened the gate"
        return super().embed_documents(texts)


def test_a_child_forked_while_the_catalogue_embeds_embeds_it_and_searches_with_vectors() -> None:
    tools = [
        ToolReference("get_weather", None, "Current weather conditions for a city"),
        ToolReference("send_email", None, "Send an email message to a recipient"),
        ToolReference("convert_units", None, "Convert a value between units of measure"),
    ]
    model = GatedModel()
    index = HybridToolIndex(model, background_embedding=True)
    index.index_tools("s", tools)
    # "forecast" shares no word with any tool: only the vector side (the alias) finds it.
    request = ToolSearchRequest("s", "forecast", max_results=3)
    assert index.search(request).tool_references == ()  # BM25 alone while embedding

    def child() -> list[str]:
        model.gate.set()  # the child's copy: the parent's embedding still waits
        index.build("s")  # waits for the child's own embedding of the catalogue
        return [found.tool_name for found in index.search(request).tool_references]

    assert in_child(child)[0] == "get_weather"
    assert index.search(request).tool_references == ()  # the parent's is still under way
    model.gate.set()
    index.build("s")
    assert index.search(request).tool_references[0].tool_name == "get_weather"


def test_the_sync_api_runs_a_child_on_its_own_event_loop() -> None:
    def in_a_thread() -> int:  # through the loop's default thread pool
        return run_sync(asyncio.to_thread(os.getpid), sync_name="f", async_name="af")

    assert in_a_thread() == os.getpid()  # the parent's loop has started its pool's threads
    parent = os.getpid()
    child_pid = in_child(in_a_thread)
    assert child_pid != parent


def test_a_chat_model_and_the_sync_api_work_in_a_child_with_their_own_clients() -> None:
    server = shared_server()
    server.reset()
    server.expect(*(Reply.json(openai_completion(text)) for text in ("a", "b", "c", "d")))
    model = OpenAIChatModel("gpt-test", base_url=f"{server.url}/v1", api_key="sk-test")
    client = ChatClient(model)
    # The parent has used both clients, its event loop and the loop's thread pool.
    assert model.call(ask()).text == "a"
    assert client.prompt("hi").call().content() == "b"
    parent_clients = (id(model._client), id(model._blocking_client()))

    def child() -> list[Any]:
        texts = [model.call(ask()).text, client.prompt("hi").call().content()]
        return [*texts, (id(model._client), id(model._blocking_client())) != parent_clients]

    assert in_child(child) == ["c", "d", True]
    model.close()
