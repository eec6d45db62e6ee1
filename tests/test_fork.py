"""A forked child (a pre-fork server, a multiprocessing pool with the fork start method) can
use what its parent built: thread pools, locks, SQLite stores, the sync API, chat models and a
tool index whose catalogue was still being embedded at the fork. Each check runs in a real
child process (``_forking.in_child``)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from _forking import in_child
from provider_models import ask
from provider_payloads import openai_completion
from provider_server import Reply, shared_server
from search_fakes import BagOfWordsModel
from tooluse import ChatClient, tool
from tooluse._fork import ForkGate, ProcessLock, ThreadPool
from tooluse._sync import run_sync, thread_loop
from tooluse.embedding import SqliteEmbeddingCache, Vectors
from tooluse.memory import CONVERSATION_ID
from tooluse.models import OpenAIChatModel
from tooluse.search import (
    HybridToolIndex,
    LruEvictionStrategy,
    RegexToolIndex,
    ToolReference,
    ToolSearchRequest,
    ToolSearchToolCallingAdvisor,
)
from tooluse.testing import FunctionModel, ScriptedModel
from tooluse.tools._function import run_in_tool_thread


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


def test_a_fork_waits_until_no_thread_is_inside_the_gate() -> None:
    gate = ForkGate()
    inside = threading.Event()
    left_at: list[float] = []

    def work() -> None:
        with gate:
            inside.set()
            time.sleep(0.3)
            left_at.append(time.monotonic())

    worker = threading.Thread(target=work)
    worker.start()
    inside.wait(timeout=5)
    forked_at = in_child(time.monotonic)  # CLOCK_MONOTONIC is one clock for all processes
    worker.join()
    assert forked_at >= left_at[0]


def test_a_thread_inside_the_gate_enters_again_while_a_fork_waits() -> None:
    gate = ForkGate()
    inside, fork_waiting = threading.Event(), threading.Event()
    entered_again = threading.Event()

    def work() -> None:
        with gate:
            inside.set()
            fork_waiting.wait(timeout=5)
            time.sleep(0.05)  # the fork is waiting for this section now
            with gate:  # would deadlock if it waited for the fork
                entered_again.set()

    worker = threading.Thread(target=work)
    worker.start()
    inside.wait(timeout=5)
    fork_waiting.set()
    assert in_child(lambda: "forked") == "forked"
    worker.join(timeout=5)
    assert entered_again.is_set()


def test_a_fork_from_inside_the_gate_does_not_wait_for_itself() -> None:
    gate = ForkGate()

    def child() -> str:
        with gate:  # the child's gate is open again, with the forking thread still inside
            return "entered"

    with gate:
        assert in_child(child) == "entered"
    with gate:  # and the parent's gate is open after the fork
        pass


def test_children_forked_while_threads_write_sqlite_never_hang(tmp_path: Path) -> None:
    # Before the gate, 4 of 100 such children hung in sqlite3.connect on a mutex that a
    # writing thread of the parent held at the fork.
    cache = SqliteEmbeddingCache(tmp_path / "parent.sqlite3")
    stop = threading.Event()

    def write(thread: int) -> None:
        batch = 0
        while not stop.is_set():
            keys = [f"{thread}-{batch}-{n}" for n in range(50)]
            cache.put_many({key: np.ones(384, np.float32) for key in keys})
            cache.get_many(keys)
            batch += 1

    writers = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    for writer in writers:
        writer.start()
    hung = 0
    try:
        for number in range(100):
            time.sleep(0.002)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:
                signal.alarm(5)
                child = SqliteEmbeddingCache(tmp_path / f"child{number}.sqlite3")
                child.put_many({"key": np.ones(4, np.float32)})
                cache.get_many(["0-0-0"])
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            hung += os.WIFSIGNALED(status)
    finally:
        stop.set()
        for writer in writers:
            writer.join()
    assert hung == 0, f"{hung} of 100 children hung"


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
    # The parent has used its client, its event loop and the loop's thread pool.
    assert model.call(ask()).text == "a"
    assert client.prompt("hi").call().content() == "b"

    def clients() -> tuple[int]:  # the client of this thread's sync-API loop
        loop = thread_loop()
        async_client = model._clients.made_for(loop) if loop is not None else None
        assert async_client is not None
        return (id(async_client),)

    parent_clients = clients()

    def child() -> list[Any]:
        texts = [model.call(ask()).text, client.prompt("hi").call().content()]
        return [
            *texts,
            [mine != parents for mine, parents in zip(clients(), parent_clients, strict=True)],
        ]

    assert in_child(child) == ["c", "d", [True]]
    model.close()


def test_a_session_whose_turn_was_under_way_at_the_fork_is_evicted_in_the_child() -> None:
    # The parent's turn never ends in the child: counted there, its session would be kept
    # from eviction for the child's whole life.
    @tool
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return "sunny"

    index = RegexToolIndex()
    advisor = ToolSearchToolCallingAdvisor(
        tool_index=index, eviction_strategy=LruEvictionStrategy(1)
    )
    waiting, release = threading.Event(), threading.Event()

    def respond(prompt: object) -> str:
        waiting.set()
        assert release.wait(15)
        return "done"

    def turn(model: FunctionModel | ScriptedModel, conversation: str) -> None:
        client = ChatClient(model, tools=[get_weather], tool_calling_advisor=advisor)
        client.prompt().user("weather?").context({CONVERSATION_ID: conversation}).call()

    parent_turn = threading.Thread(target=turn, args=(FunctionModel(respond), "c1"))
    parent_turn.start()
    try:
        assert waiting.wait(15)

        def evicting_c1() -> int:
            turn(ScriptedModel(["hi"]), "c2")  # LRU(1) evicts c1, whose turn is not here
            return index.size("c1")

        assert in_child(evicting_c1) == 0
        assert index.size("c1") == 1  # in the parent its turn is still under way
    finally:
        release.set()
        parent_turn.join(15)
