"""The service's parts: offline model, knowledge base loading, approval store, options, CLI."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import types
import urllib.error
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import PoolClosed

from _ports import free_port
from _rag_helpers import HashingEmbeddingModel
from _service_helpers import config as service_config
from _service_helpers import default_sigint, read_until, serve_without_listening
from provider_payloads import openai_call, openai_chunk, openai_completion
from provider_server import Reply, openai_sse, shared_server
from tooluse import tool_callbacks
from tooluse.calling import Caller, PendingToolCall
from tooluse.cli import chat as chat_command
from tooluse.cli._options import OptionError, add_service_arguments, config_from_arguments
from tooluse.client import RunState
from tooluse.memory import PostgresDatabase
from tooluse.messages import ChatOptions, Prompt, UserMessage
from tooluse.qa import ROUTER_REMINDER, DeltaEvent, DoneEvent, FetchRecord, QaEvent, QaPause
from tooluse.rag import Document, SqliteVectorStore
from tooluse.service import (
    SAMPLE_TOOLS,
    ApprovalConflict,
    ApprovalStore,
    KnowledgeBase,
    OfflineModel,
    QaService,
    UnknownApproval,
    mentioned_tools,
    sync_sample_documents,
)
from tooluse.service._owners import ConversationOwners
from tooluse.service._service import local_tools, router_reminder
from tooluse.service._sse import named_sse_response, qa_events, sse_response
from tooluse.testing import FunctionModel

DEFINITIONS = [callback.definition for callback in tool_callbacks(*SAMPLE_TOOLS)]


# -- offline model ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What's the weather in Paris?", ["get_weather"]),
        ("What time is it in Tokyo?", ["get_current_time"]),
        ("Where are my orders?", ["get_order_status"]),
        ("Please cancel order A1001", ["get_order_status", "cancel_order"]),
        ("北京今天天气怎么样？", ["get_weather"]),
        ("我的快递到哪了", ["get_order_status"]),
        ("How long do I have to return an item?", []),
        ("The border is closed", []),  # "order" inside a word does not count
    ],
)
def test_offline_router_calls_the_tools_a_question_mentions(
    question: str, expected: list[str]
) -> None:
    assert mentioned_tools(question, DEFINITIONS) == expected


async def test_offline_model_routes_with_tools_and_echoes_without() -> None:
    model = OfflineModel()
    options = ChatOptions(tool_callbacks=tuple(tool_callbacks(*SAMPLE_TOOLS)))
    routed = await model.acall(Prompt([UserMessage(text="weather?")], options))
    assert [call.name for call in routed.generations[0].message.tool_calls] == ["get_weather"]
    answer = await model.acall(Prompt([UserMessage(text="Rules... Question: hi")]))
    assert answer.text.startswith("[offline TestModel: ")
    assert answer.text.endswith("Rules... Question: hi")
    chunks = [chunk async for chunk in model.stream(Prompt([UserMessage(text="x")]))]
    assert "".join(chunk.text for chunk in chunks) == answer.text.replace(
        "Rules... Question: hi", "x"
    )


# -- knowledge base --------------------------------------------------------------------------


def test_sample_documents_are_ingested_once_and_make_way_for_real_ones(tmp_path: Path) -> None:
    embedding = HashingEmbeddingModel()
    with SqliteVectorStore(tmp_path / "k.db", embedding) as store:
        first = sync_sample_documents(store)
        assert first is not None and len(first.added) == 4 and first.chunks_written == len(store)
        embedded = len(embedding.embedded)
        again = sync_sample_documents(store)
        assert again is not None and not again.changed
        assert len(embedding.embedded) == embedded  # nothing embedded twice
        store.add([Document(text="Our own policy.", id="own", metadata={"source": "own.md"})])
        assert sync_sample_documents(store) is None
        assert [d.id for d in store.find()] == ["own"]  # the samples made way


async def test_knowledge_base_loads_in_the_background(tmp_path: Path) -> None:
    knowledge = KnowledgeBase(tmp_path / "k.db", embedding_model=HashingEmbeddingModel())
    assert knowledge.status == "loading"
    knowledge.start()
    found = await knowledge.aretrieve("return an item within days")
    assert knowledge.status == "ready" and knowledge.count_documents() > 0
    assert found and knowledge.retrieve("points expire") != []
    with pytest.raises(RuntimeError, match="already started"):
        knowledge.start()
    knowledge.close()


def test_closing_does_not_wait_for_a_load_under_way(tmp_path: Path) -> None:
    release = threading.Event()

    class SlowToLoad(HashingEmbeddingModel):
        def embed_query(self, text: str) -> Any:
            release.wait(10)  # the warm-up stands for a model that takes long to load
            return super().embed_query(text)

    knowledge = KnowledgeBase(tmp_path / "k.db", embedding_model=SlowToLoad())
    knowledge.start()
    started = time.monotonic()
    knowledge.close()
    assert time.monotonic() - started < 1 and knowledge.status == "loading"
    release.set()
    knowledge.wait(10)
    assert knowledge.status == "ready"


def test_a_service_stopped_while_its_knowledge_base_loads_from_postgres_stops_cleanly(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The service closes the shared pool while the load is under way; the load then fails
    # on the closed pool, which is the stop's doing, not a failure to report.
    caplog.set_level(logging.INFO, logger="tooluse.service")
    release = threading.Event()

    class SlowToLoad(HashingEmbeddingModel):
        def embed_query(self, text: str) -> Any:
            release.wait(10)  # the warm-up stands for a model that takes long to load
            return super().embed_query(text)

    database = PostgresDatabase(postgres_url)
    knowledge = KnowledgeBase(database, embedding_model=SlowToLoad(), samples=False)
    knowledge.start()
    knowledge.close()
    database.close()
    release.set()
    with pytest.raises(PoolClosed):
        knowledge.wait(10)
    records = [r for r in caplog.records if r.name == "tooluse.service"]
    assert [r for r in records if r.levelno >= logging.ERROR or r.exc_info] == []
    assert any("stopped loading" in r.getMessage() for r in records), records


async def test_a_knowledge_base_that_fails_to_load_says_why(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()  # not a file SQLite can open
    knowledge = KnowledgeBase(tmp_path / "dir.db", embedding_model=HashingEmbeddingModel())
    knowledge.start()
    with pytest.raises(Exception, match="unable to open database"):
        await knowledge.aretrieve("anything")
    assert knowledge.status == "failed"
    assert "unable to open database" in str(knowledge.error)
    knowledge.close()


# -- approval store --------------------------------------------------------------------------


def _pause() -> QaPause:
    call = PendingToolCall(id="x", name="cancel_order", arguments='{"order_id": "A1"}', reason="r")
    state = RunState(
        messages=(UserMessage(text="cancel A1"),), history=(), pending_tool_calls=(call,)
    )
    fetched = (FetchRecord("get_order_status", "{}", '{"status": "shipped"}'),)
    return QaPause("cancel A1", "c1", (), state, fetched)


def test_approvals_are_claimed_once_even_when_decisions_race(store_location: str) -> None:
    store = ApprovalStore(store_location)
    approval_id = store.save(_pause()).id
    other = ApprovalStore(store_location)  # another worker's connections
    assert other.get(approval_id).pause == _pause()
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def claim(candidate: ApprovalStore) -> None:
        barrier.wait()
        try:
            candidate.claim(approval_id)
            outcomes.append("claimed")
        except ApprovalConflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=claim, args=(s,)) for s in [store, other] * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["claimed"] + ["conflict"] * 7
    assert store.get(approval_id).status == "resuming"
    store.finish(approval_id, "boom")
    assert (other.get(approval_id).status, other.get(approval_id).error) == ("failed", "boom")
    with pytest.raises(UnknownApproval, match="nope"):
        store.get("nope")
    with pytest.raises(UnknownApproval):
        store.claim("nope")
    store.close()
    other.close()


def test_a_conversation_has_one_owner_when_users_claim_it_on_two_workers_at_once(
    store_location: str,
) -> None:
    workers = [ConversationOwners(store_location), ConversationOwners(store_location)]
    try:
        assert workers[1].owner("c1") == (None, None)  # nobody's yet: anonymous
        seen: list[tuple[str | None, str | None]] = []
        barrier = threading.Barrier(8)

        def claim(owners: ConversationOwners, user: str) -> None:
            barrier.wait()
            seen.append(owners.claim("c1", Caller(user, "t1")))

        threads = [
            threading.Thread(target=claim, args=(workers[n % 2], f"user-{n}")) for n in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        (winner,) = set(seen)  # every claim was told the one owner
        assert winner[0] in {f"user-{n}" for n in range(8)} and winner[1] == "t1"
        assert workers[0].owner("c1") == workers[1].owner("c1") == winner
        assert workers[1].claim("c1", Caller("late")) == winner  # taken: stays the first's
        with pytest.raises(ValueError, match="anonymous caller owns no conversation"):
            workers[0].claim("c2", Caller(None))
        assert workers[1].owner("c2") == (None, None)
    finally:
        for owners in workers:
            owners.close()


# -- options and commands --------------------------------------------------------------------


def _arguments(*argv: str) -> argparse.Namespace:
    """The service options of ``argv``, the offline TestModel unless it names a model."""
    parser = argparse.ArgumentParser()
    add_service_arguments(parser)
    return parser.parse_args(["--model", "test", *argv])


def test_options_build_the_configuration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))  # --tools puts the working directory on it
    config = config_from_arguments(_arguments("--db", str(tmp_path / "x.db")))
    assert config.model is None and config.tools is None and config.mcp_servers == ()
    assert local_tools(config) == SAMPLE_TOOLS
    mine = config_from_arguments(_arguments("--tools", "_qa_helpers:CountingMemory.add"))
    assert len(mine.tools) == 1
    with pytest.raises(OptionError, match="OPENAI_API_KEY"):
        config_from_arguments(_arguments("--model", "openai:gpt-4o-mini"))
    with pytest.raises(OptionError, match="MODULE:ATTRIBUTE"):
        config_from_arguments(_arguments("--tools", "nocolon"))
    with pytest.raises(OptionError, match="cannot import 'no_such_module'"):
        config_from_arguments(_arguments("--tools", "no_such_module:x"))
    with pytest.raises(OptionError, match="has no attribute 'missing'"):
        config_from_arguments(_arguments("--tools", "json:missing"))


@pytest.mark.parametrize(
    ("argv", "grounded", "reminder"),
    [
        (["--model", "openai:gpt-4o-mini"], False, False),  # translates: 北京 -> Beijing
        (["--model", "openai:gpt-4o-mini", "--grounded-arguments"], True, False),
        (["--model", "openai:gpt-4o-mini", "--router-reminder"], False, True),
        (["--model", "local:qwen2.5-coder-0.5b"], True, True),  # fills in the examples shown
        (["--model", "local:qwen2.5-coder-0.5b", "--no-grounded-arguments"], False, True),
        (["--model", "local:qwen2.5-coder-0.5b", "--no-router-reminder"], True, False),
    ],
)
def test_the_small_model_router_options_are_on_for_local_models_unless_asked(
    argv: list[str], grounded: bool, reminder: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tooluse.cli._options as options

    monkeypatch.setattr(options, "_model", lambda spec, args: FunctionModel(lambda _: "ok"))
    config = config_from_arguments(_arguments(*argv))
    assert config.router_grounded_arguments is grounded
    assert config.router_reminder is reminder
    assert router_reminder(config) == (ROUTER_REMINDER if reminder else None)
    offline = dataclasses.replace(config, model=None)  # the TestModel: never
    assert router_reminder(offline) is None


@pytest.mark.parametrize("command", ["serve", "chat"])
def test_startup_failures_are_reported_without_a_traceback(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tooluse.cli import main

    question = ["hi"] if command == "chat" else []
    not_a_database = tmp_path / "notes.db"
    not_a_database.write_text("not SQLite", encoding="utf-8")
    cases = [
        (["--db", str(tmp_path / "missing" / "x.db")], "unable to open database file"),
        (["--db", str(not_a_database)], "file is not a database"),
        (["--tools", "os:sep"], "Cannot make tools from a str"),
        (["--tools", "os:path"], "No @tool methods found"),
    ]
    for options, message in cases:
        assert main([command, "--model", "test", *options, *question]) == 2, options
        err = capsys.readouterr().err
        assert err.startswith(f"tooluse {command}: ") and message in err, err
        assert "Traceback" not in err


@pytest.mark.parametrize("command", ["serve", "chat", "eval"])
def test_a_model_without_its_key_says_which_variable_to_set(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tooluse.cli import main

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    question = ["hi"] if command == "chat" else []
    assert (
        main([command, "--model", "openai:gpt-4o", "--db", str(tmp_path / "k.db"), *question]) == 2
    )
    err = capsys.readouterr().err
    assert err == (
        f"tooluse {command}: --model openai:gpt-4o needs an API key: set the environment "
        "variable OPENAI_API_KEY (e.g. export OPENAI_API_KEY=...)\n"
    )  # not from_config's "or pass api_key=", which the command line has no way to do


@pytest.mark.parametrize(
    ("host", "api_key", "warned"),
    [
        ("0.0.0.0", None, True),
        ("::", None, True),
        ("192.168.1.20", "", True),  # an empty $TOOLUSE_API_KEY is no key
        ("myhost.example", None, True),
        ("0.0.0.0", "k1", False),
        ("127.0.0.1", None, False),
        ("127.0.0.2", None, False),
        ("::1", None, False),
        ("localhost", None, False),
    ],
)
def test_serve_warns_when_it_opens_an_unkeyed_api_beyond_this_machine(
    host: str,
    api_key: str | None,
    warned: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tooluse.cli import main

    if api_key is None:
        monkeypatch.delenv("TOOLUSE_API_KEY", raising=False)
    else:
        monkeypatch.setenv("TOOLUSE_API_KEY", api_key)
    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    bound: list[str] = []

    serve_without_listening(monkeypatch, lambda config: bound.append(config.host))
    argv = [
        "serve",
        "--model",
        "test",
        "--host",
        host,
        "--db",
        str(tmp_path / "s.db"),
        "--no-sample-knowledge",
    ]
    with caplog.at_level(logging.WARNING, logger="tooluse.service"):
        assert main(argv) == 0
    assert bound == [host]  # a warning, not a refusal: a proxy in front may authenticate
    warnings = [r.getMessage() for r in caplog.records if "without an API key" in r.getMessage()]
    if warned:
        assert warnings == [
            f"serving on {host} without an API key: /api/* and /v1/* answer anyone who can "
            "reach this address (chat, tool calls, approvals). Set --api-key or "
            "$TOOLUSE_API_KEY, unless a proxy in front authenticates the requests"
        ]
    else:
        assert warnings == []


def test_serve_refuses_a_port_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tooluse.cli import main

    db = str(tmp_path / "s.db")
    for port in ("65536", "-1", "http"):
        with pytest.raises(SystemExit) as exit_:
            main(["serve", "--model", "test", "--port", port, "--db", db, "--no-sample-knowledge"])
        assert exit_.value.code == 2
        assert "argument --port" in capsys.readouterr().err


def serving_loop(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> asyncio.AbstractEventLoop:
    """The event loop ``tooluse serve`` serves its app on."""
    from tooluse.cli import main

    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    # uvicorn's uvloop module binds the uvloop it imported first: import it afresh.
    monkeypatch.delitem(sys.modules, "uvicorn.loops.uvloop", raising=False)
    loops: list[asyncio.AbstractEventLoop] = []
    serve_without_listening(monkeypatch, lambda config: loops.append(asyncio.get_running_loop()))
    assert (
        main(["serve", "--model", "test", "--db", str(tmp_path / "s.db"), "--no-sample-knowledge"])
        == 0
    )
    return loops[0]


class StandInUvloop(asyncio.SelectorEventLoop):
    """What the stand-in ``uvloop`` module below makes: a loop of a class of its own."""


def test_serve_runs_on_uvloop_when_it_can_be_imported_as_uvicorn_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stand_in = types.ModuleType("uvloop")
    stand_in.new_event_loop = StandInUvloop  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "uvloop", stand_in)
    assert type(serving_loop(monkeypatch, tmp_path)) is StandInUvloop


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop has no Windows build")
@pytest.mark.optional_skip("uvloop has no Windows build (the service extra installs it elsewhere)")
def test_serve_runs_on_uvloop_when_it_is_installed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import uvloop

    assert isinstance(serving_loop(monkeypatch, tmp_path), uvloop.Loop)


def test_serve_runs_on_asyncios_loop_without_uvloop(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # its import fails
    assert type(serving_loop(monkeypatch, tmp_path)) is asyncio.SelectorEventLoop


def test_serve_parses_http_with_httptools_which_the_service_extra_installs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # uvicorn's "auto" takes httptools when it can import it: less CPU per request than h11.
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from tooluse.cli import main

    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    protocols: list[type[asyncio.Protocol]] = []

    def serving(config: Any) -> None:
        config.load()
        protocols.append(config.http_protocol_class)

    serve_without_listening(monkeypatch, serving)
    argv = ["serve", "--model", "test", "--db", str(tmp_path / "s.db"), "--no-sample-knowledge"]
    assert main(argv) == 0
    assert protocols == [HttpToolsProtocol]


def test_serve_takes_how_long_approvals_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tooluse.cli import main

    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    expiries: list[float] = []

    serve_without_listening(
        monkeypatch, lambda config: expiries.append(config.app.state.service.approvals.expire_after)
    )
    db = ["--db", str(tmp_path / "s.db"), "--no-sample-knowledge"]
    assert main(["serve", "--model", "test", *db]) == 0
    assert main(["serve", "--model", "test", "--approval-expiry", "90", *db]) == 0
    assert expiries == [3600.0, 90.0]
    for bad in ("0", "-5", "soon", "inf", "nan"):
        with pytest.raises(SystemExit) as exit_:
            main(["serve", "--model", "test", "--approval-expiry", bad, *db])
        assert exit_.value.code == 2
        error = capsys.readouterr().err
        assert "argument --approval-expiry" in error
        if bad == "inf":  # above 0, but no duration
            assert "a finite number of seconds above 0, got inf" in error


def test_chat_answers_a_question_and_asks_for_approvals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TOOLUSE_MODEL", raising=False)
    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    parser = argparse.ArgumentParser()
    chat_command.add_arguments(parser)
    asked: list[str] = []

    def answer(prompt: str) -> str:
        asked.append(prompt)
        return "y"

    db = str(tmp_path / "c.db")
    args = parser.parse_args(
        ["--model", "test", "--db", db, "--conversation", "c1", "cancel my order"]
    )
    assert chat_command.run(args, ask=answer) == 0
    out = capsys.readouterr()
    assert "-> get_order_status(" in out.out and "-> cancel_order(" in out.out
    assert asked == ['  approve cancel_order({"order_id": "a", "reason": "a"})? [y/N] ']
    assert "<- cancel_order: " in out.out and "[answering from live data]" in out.out
    assert "[offline TestModel: " in out.out  # the notice is logged once (tests/reliability)

    replies = iter(["How long do points last?", ""])
    args = parser.parse_args(["--model", "test", "--db", db, "--conversation", "c1"])
    assert chat_command.run(args, ask=lambda prompt: next(replies)) == 0
    out = capsys.readouterr()
    assert "[answering from the knowledge base]" in out.out
    assert "sources: Membership points" in out.out


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.optional_skip("Windows has no POSIX signals")
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl+C"])
def test_tooluse_serve_binds_at_once_and_loads_the_knowledge_base_in_the_background(
    tmp_path: Path, stop: signal.Signals
) -> None:
    port = free_port()
    env = {**os.environ, "TOOLUSE_CACHE_DIR": str(tmp_path / "cache"), "TOOLUSE_API_KEY": "k1"}
    env.pop("TOOLUSE_MODEL", None)
    command = [sys.executable, "-m", "tooluse.cli", "serve", "--model", "test", "--port", str(port)]
    command += ["--db", str(tmp_path / "serve.db")]
    started = time.monotonic()
    server = subprocess.Popen(
        command, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint
    )
    try:
        health = _wait_for(f"http://127.0.0.1:{port}/healthz", deadline=started + 20)
        bound = time.monotonic() - started
        assert health["offline"] is True and health["knowledge"] in ("loading", "ready")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/") as page:
            assert b'id="chat"' in page.read()
        with pytest.raises(urllib.error.HTTPError) as refused:  # $TOOLUSE_API_KEY is set
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/tools")
        assert refused.value.code == 401
        keyed = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/tools", headers={"Authorization": "Bearer k1"}
        )
        with urllib.request.urlopen(keyed) as tools:
            assert json.loads(tools.read())
    finally:
        server.send_signal(stop)
        _, log = server.communicate(timeout=60)
    assert bound < 15, f"tooluse serve took {bound:.1f} s to answer"
    assert "The service runs the offline TestModel (--model test" in log  # what chose it
    assert "loading the knowledge base" in log
    assert "Application shutdown complete" in log
    assert "Traceback" not in log  # Ctrl+C printed a KeyboardInterrupt's
    assert server.returncode in (0, -stop)  # uvicorn re-raises the signal after a clean stop


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.optional_skip("Windows has no POSIX signals")
def test_ctrl_c_while_tooluse_chat_streams_an_answer_ends_it_quietly(tmp_path: Path) -> None:
    provider = shared_server()
    provider.expect(
        Reply.json(
            openai_completion(
                tool_calls=[openai_call("c1", "get_weather", {"city": "Oslo"})],
                finish_reason="tool_calls",
            )
        ),
        # The router ends after its fetching round (--router-fetch-rounds 1): the answer next.
        openai_sse([openai_chunk({"content": "Oslo is "})], stall_after=(1, 60)),
    )
    env = {**os.environ, "OPENAI_BASE_URL": f"{provider.url}/v1", "OPENAI_API_KEY": "k"}
    command = [sys.executable, "-m", "tooluse.cli", "chat", "--model", "openai:gpt-4o-mini"]
    command += ["--db", str(tmp_path / "c.db"), "--no-sample-knowledge", "Weather in Oslo?"]
    pipe = subprocess.PIPE
    chat = subprocess.Popen(command, env=env, stdout=pipe, stderr=pipe, preexec_fn=default_sigint)
    try:
        read_until(chat, "Oslo is ")  # the answer stalls after its first words
        interrupted = time.monotonic()
        chat.send_signal(signal.SIGINT)
        _, err = chat.communicate(timeout=90)
    finally:
        chat.kill()
    # Not the 60 s the answer stalls for; generous, for two cores shared with a load of 8.
    assert time.monotonic() - interrupted < 30
    assert b"Traceback" not in err, err.decode()
    assert chat.returncode == 130


def _wait_for(url: str, deadline: float) -> dict[str, object]:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                data: dict[str, object] = json.loads(response.read())
                return data
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_a_paused_call_with_a_lone_surrogate_is_stored_and_read_back(tmp_path: Path) -> None:
    # A model's "\ud800" escape, decoded, cannot be UTF-8 encoded; the pause escapes it.
    call = PendingToolCall(
        id="x", name="cancel_order", arguments='{"order_id": "\ud800"}', reason="r"
    )
    state = RunState(messages=(UserMessage(text="cancel"),), history=(), pending_tool_calls=(call,))
    pause = QaPause("cancel", None, (), state, ())
    store = ApprovalStore(tmp_path / "a.db")
    try:
        assert store.get(store.save(pause).id).pause == pause
    finally:
        store.close()


def test_serve_sets_the_collector_for_serving_and_building_an_app_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tooluse serve (one process, and each worker of --workers N) moves what it built out
    # of the collector's generations and raises its thresholds before it serves (one
    # process: until it stops); a library caller's app leaves the caller's collector alone.
    from tooluse.cli import main
    from tooluse.cli import serve as serve_command
    from tooluse.service import create_app
    from tooluse.service._startup import SERVING_GC_THRESHOLDS

    thresholds = gc.get_threshold()
    assert gc.get_freeze_count() == 0 and thresholds != SERVING_GC_THRESHOLDS
    create_app(service_config(tmp_path / "library.db")).state.service.close()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds
    when_serving: list[tuple[int, tuple[int, int, int]]] = []
    serve_without_listening(
        monkeypatch, lambda config: when_serving.append((gc.get_freeze_count(), gc.get_threshold()))
    )
    try:
        argv = ["serve", "--model", "test", "--db", str(tmp_path / "s.db")]
        assert main([*argv, "--no-sample-knowledge"]) == 0
        ((frozen, serving),) = when_serving
        assert frozen > 0 and serving == SERVING_GC_THRESHOLDS
        assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds  # it stopped
        app = object()
        monkeypatch.setattr(serve_command, "_service_app", lambda args: app)
        monkeypatch.setenv("TOOLUSE_SERVE_OPTIONS", json.dumps({"log_level": "info"}))
        assert serve_command.worker_app() is app
        assert gc.get_freeze_count() > 0 and gc.get_threshold() == SERVING_GC_THRESHOLDS
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


async def test_leaving_a_kept_alive_stream_early_cancels_the_run() -> None:
    finished = asyncio.Event()

    async def events() -> AsyncIterator[bytes]:
        try:
            yield b"first"
            await asyncio.sleep(3600)  # a run that would go on
            yield b"never"
        finally:
            finished.set()

    stream = sse_response(events(), keepalive_seconds=10).body_iterator
    assert isinstance(stream, AsyncGenerator)
    assert await anext(stream) == b"first"
    await stream.aclose()  # what the server does when the client goes away
    await asyncio.wait_for(finished.wait(), 1)


@pytest.mark.parametrize("event", [None, "delta"])
def test_an_event_is_written_as_fastapis_formatter_writes_it_whatever_its_text_holds(
    event: str | None,
) -> None:
    from fastapi.sse import format_sse_event

    from tooluse.service._sse import json_text, sse

    data = {"text": "one\ntwo\r\nthree\r \u2028 é \ud83d", "n": [1, {"a": None}]}
    assert sse(event, data) == format_sse_event(event=event, data_str=json_text(data))


async def test_a_client_leaving_an_event_stream_cancels_its_run_and_ends_the_response() -> None:
    # Over ASGI, as uvicorn serves it: the client's disconnect arrives while the run waits
    # (its model thinking); the run is closed, and the response returns normally, its task
    # no longer being cancelled (the cancellation was the response's own).
    finished, left = asyncio.Event(), asyncio.Event()

    async def events() -> AsyncIterator[bytes]:
        try:
            yield b"first"
            await asyncio.sleep(3600)
            yield b"never"
        finally:
            finished.set()

    async def receive() -> dict[str, object]:
        await left.wait()
        return {"type": "http.disconnect"}

    bodies: list[bytes] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body" and message["body"]:
            bodies.append(message["body"])
            left.set()

    response = sse_response(events(), keepalive_seconds=10)

    async def serve() -> int:
        await response({"type": "http", "asgi": {"spec_version": "2.3"}}, receive, send)
        task = asyncio.current_task()
        assert task is not None
        return task.cancelling()

    assert await asyncio.wait_for(serve(), 1) == 0
    assert finished.is_set() and bodies == [b"first"]


async def test_an_event_streams_last_chunk_ends_the_body_in_the_same_message() -> None:
    # Over ASGI: a chunk sent after the run ended carries more_body False itself (no empty
    # message after it); a chunk sent while the run still goes on does not, and a run that
    # ends after its last chunk went out ends the body with an empty message, as before.
    release = asyncio.Event()

    async def events() -> AsyncIterator[bytes]:
        yield b"first"
        await release.wait()
        yield b"second"
        yield b"third"

    async def receive() -> dict[str, object]:
        await asyncio.sleep(3600)  # the client stays
        return {"type": "http.disconnect"}

    sent: list[tuple[bytes, bool]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sent.append((message["body"], message["more_body"]))
            release.set()

    response = sse_response(events(), keepalive_seconds=10)
    scope = {"type": "http", "asgi": {"spec_version": "2.3"}}
    await asyncio.wait_for(response(scope, receive, send), 1)
    assert sent == [(b"first", True), (b"secondthird", False)]

    async def ends_later() -> AsyncIterator[bytes]:
        yield b"only"
        await asyncio.sleep(0.01)  # the chunk went out before the run ended

    sent.clear()
    response = sse_response(ends_later(), keepalive_seconds=10)
    await asyncio.wait_for(response(scope, receive, send), 1)
    assert sent == [(b"only", True), (b"", False)]


async def test_leaving_a_kept_alive_stream_closes_a_run_waiting_to_hand_over_an_event() -> None:
    # The run is held at a yield (the stream's bounded queue is full), not at an await that
    # a cancellation reaches: it is closed at once all the same, so that what it holds (its
    # conversation's turn) is let go now, not whenever the garbage collector finds it.
    finished = asyncio.Event()

    async def events() -> AsyncIterator[bytes]:
        try:
            for number in range(1000):
                yield b"%d," % number
        finally:
            finished.set()

    stream = sse_response(events(), keepalive_seconds=10).body_iterator
    assert isinstance(stream, AsyncGenerator)
    first = await anext(stream)
    assert first.startswith(b"0,1,") and not first.endswith(b"999,")
    await asyncio.sleep(0.01)  # the run goes on until its event waits for the full queue
    await stream.aclose()
    assert finished.is_set()


async def test_events_already_waiting_go_out_as_one_chunk_in_order_before_a_failure() -> None:
    release = asyncio.Event()

    async def events() -> AsyncIterator[bytes]:
        yield b"a"
        await release.wait()  # the client gets what is ready, without waiting for more
        yield b"b"
        yield b"c"
        raise RuntimeError("the model failed")

    stream = sse_response(events(), keepalive_seconds=10).body_iterator
    assert isinstance(stream, AsyncGenerator)
    assert await anext(stream) == b"a"
    release.set()
    assert await anext(stream) == b"bc"
    with pytest.raises(RuntimeError, match="the model failed"):
        await anext(stream)


async def test_a_run_that_ends_waiting_for_its_turn_is_told_so_and_lets_go(
    tmp_path: Path,
) -> None:
    # A decision's run whose client leaves while another turn of its conversation runs:
    # its approval must end (not stay "resuming"), and the conversation keep no lock.
    service = QaService(service_config(tmp_path / "s.db"))
    ended: list[str | None] = []

    async def run() -> AsyncIterator[QaEvent]:
        raise AssertionError("the run started")
        yield  # an async generator

    async def end(error: str | None) -> None:
        ended.append(error)

    try:
        async with service.turns.turn("c1"):  # a turn of c1 is running
            stream = qa_events(service, run(), "c1", "q", on_end=end)
            waiting = asyncio.create_task(anext(stream))
            await asyncio.sleep(0.01)
            assert not waiting.done()
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
        assert ended == ["interrupted: the client went away before the run ended"]
        assert len(service.turns) == 0
    finally:
        service.close()


async def test_a_run_left_at_an_event_is_closed_before_its_turn_is_let_go(
    tmp_path: Path,
) -> None:
    # The client went away while the run was held at an event (the stream's queue full): the
    # run (its router task, the record of a stopped resumed turn) must be closed before the
    # conversation's next turn may start, not whenever the garbage collector finds it.
    service = QaService(service_config(tmp_path / "s.db"))
    turns_held_at_close: list[int] = []

    async def run() -> AsyncIterator[QaEvent]:
        try:
            for number in range(10):
                yield DeltaEvent(str(number))
        finally:
            turns_held_at_close.append(len(service.turns))

    try:
        stream = qa_events(service, run(), "c1", "q")
        assert (await anext(stream))[0] == "delta"
        await stream.aclose()
        assert turns_held_at_close == [1]
        assert len(service.turns) == 0
    finally:
        service.close()


async def test_a_turns_done_comes_once_the_turn_ended_with_the_body_end(tmp_path: Path) -> None:
    # The client that gets done may ask again at once: by then the conversation's turn has
    # let go and the run's end was recorded, and done is the body's last message (one
    # socket write with the end, not two).
    service = QaService(service_config(tmp_path / "s.db"))
    ended: list[str | None] = []
    seen_at_done: list[tuple[int, list[str | None]]] = []
    sent: list[tuple[bytes, bool]] = []

    async def run() -> AsyncIterator[QaEvent]:
        yield DeltaEvent("Sunny")
        await asyncio.sleep(0.01)  # the delta goes out on its own
        yield DoneEvent(answer="Sunny", route="tools", documents=(), usage=None)

    async def end(error: str | None) -> None:
        ended.append(error)

    async def receive() -> dict[str, object]:
        await asyncio.sleep(3600)  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sent.append((message["body"], message["more_body"]))
            if b"event: done" in message["body"]:
                seen_at_done.append((len(service.turns), list(ended)))

    try:
        response = named_sse_response(
            qa_events(service, run(), "c1", "q", on_end=end), keepalive_seconds=10
        )
        scope = {"type": "http", "asgi": {"spec_version": "2.3"}}
        await asyncio.wait_for(response(scope, receive, send), 2)
        assert [more for _, more in sent] == [True, False]
        assert sent[0][0].startswith(b"event: delta") and sent[1][0].startswith(b"event: done")
        assert seen_at_done == [(0, [None])]
    finally:
        service.close()


async def test_an_openai_stream_left_by_its_client_closes_its_run(tmp_path: Path) -> None:
    # /v1/chat/completions streaming: the client went away after the first chunks; the run
    # (router task, tool calls) stops then, not whenever the garbage collector finds it.
    from tooluse.service._openai_api import _chunks
    from tooluse.service._sse import completion_events

    closed: list[str] = []

    async def run() -> AsyncGenerator[QaEvent, None]:
        try:
            for number in range(10):
                yield DeltaEvent(str(number))
        finally:
            closed.append("run")

    service = QaService(service_config(tmp_path / "s.db"))
    try:
        named = completion_events(service, run(), "chat completion chatcmpl-1")
        chunks = _chunks(named, "chatcmpl-1", 0, include_usage=False)
        # The role chunk goes out with the first delta's (one write for both).
        first = await anext(chunks)
        assert first.count(b"data: ") == 2 and first.index(b'"role": "assistant"') < first.index(
            b'"content": "0"'
        )
        assert b'"content": "1"' in await anext(chunks)
        await chunks.aclose()
        assert closed == ["run"]
    finally:
        service.close()


@pytest.mark.parametrize("include_usage", [False, True])
@pytest.mark.parametrize(
    "events",
    [
        [DeltaEvent("Sun"), DeltaEvent('ny "é\n')],
        [],
        [DeltaEvent("Sun"), "error"],
        ["error"],
    ],
)
async def test_an_openai_streams_role_chunk_comes_first_with_the_chunk_after_it(
    tmp_path: Path, events: list[QaEvent | str], include_usage: bool
) -> None:
    # The bytes are those of the role chunk sent alone ahead of the others, whatever
    # follows it: a delta, the stop chunk at once, or a failure; each chunk as json.dumps
    # writes it (a usage null in each with include_usage).
    from tooluse.service._openai_api import _chunks
    from tooluse.service._sse import completion_events

    async def run() -> AsyncGenerator[QaEvent, None]:
        for event in events:
            if event == "error":
                raise ConnectionError("provider unreachable")
            assert not isinstance(event, str)
            yield event

    def data(delta: dict[str, object], finish_reason: str | None = None) -> bytes:
        chunk = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 7,
            "model": "tooluse-qa",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
        if include_usage:
            chunk["usage"] = None
        return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"

    service = QaService(service_config(tmp_path / "s.db"))
    try:
        named = completion_events(service, run(), "chat completion chatcmpl-1")
        chunks = [c async for c in _chunks(named, "chatcmpl-1", 7, include_usage)]
        if include_usage and events[-1:] != ["error"]:  # the usage chunk, checked elsewhere
            assert b'"choices": [], "usage": ' in chunks.pop(-2)
    finally:
        service.close()
    role = data({"role": "assistant", "content": ""})
    if events[:1] == ["error"]:
        assert len(chunks) == 1 and chunks[0].startswith(role)
        assert b'"error": {"message": "ConnectionError: provider unreachable"' in chunks[0]
    elif events == []:
        assert chunks == [role + data({}, "stop"), b"data: [DONE]\n\n"]
    elif events[-1] == "error":
        assert chunks[0] == role + data({"content": "Sun"})
        assert b'"error": {"message": "ConnectionError: provider unreachable"' in chunks[1]
    else:
        assert chunks == [
            role + data({"content": "Sun"}),
            data({"content": 'ny "é\n'}),
            data({}, "stop"),
            b"data: [DONE]\n\n",
        ]


@pytest.mark.parametrize("left_early", [False, True])
async def test_a_kept_alive_stream_leaves_no_reference_cycle(left_early: bool) -> None:
    # Read as the response reads it (to its last chunk, or left after the first one), then
    # closed: what the stream made is freed by reference counting, not left for the
    # collector (whose pauses, at 200 streams, held up every stream in flight).
    async def events() -> AsyncGenerator[bytes, None]:
        yield b"first"
        await asyncio.sleep(0.01)  # the second chunk comes in a write of its own
        yield b"second"

    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        stream = sse_response(events(), keepalive_seconds=10).body_iterator
        assert isinstance(stream, AsyncGenerator)
        chunks = [await anext(stream)]
        if not left_early:
            chunks += [chunk async for chunk in stream]
        await stream.aclose()
        del stream
        gc.collect()
        left = [
            o
            for o in gc.garbage
            if getattr(type(o), "__module__", None) == "tooluse.service._sse"
            or getattr(o, "__module__", None) == "tooluse.service._sse"
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert chunks == ([b"first"] if left_early else [b"first", b"second"])
    assert left == []


async def test_a_failing_run_raises_through_the_kept_alive_stream() -> None:
    async def events() -> AsyncIterator[bytes]:
        yield b"first"
        raise ConnectionError("model went away")

    stream = sse_response(events(), keepalive_seconds=10).body_iterator
    with pytest.raises(ConnectionError, match="model went away"):
        [chunk async for chunk in stream]


@pytest.mark.parametrize("command", ["serve", "chat"])
@pytest.mark.parametrize(
    "component", ["chat_memory", "qa_approval", "qa_turn_display", "vector_store"]
)
def test_a_db_of_another_schema_version_is_reported_without_a_traceback(
    command: str,
    component: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import uvicorn

    from tooluse.cli import main

    def serving(*args: object, **kwargs: object) -> None:
        raise AssertionError("the server started")

    monkeypatch.setattr(uvicorn, "run", serving)
    database = tmp_path / "old.db"
    with sqlite3.connect(database) as connection:
        connection.execute(
            "CREATE TABLE tooluse_schema_version (component TEXT PRIMARY KEY, version INTEGER)"
        )
        connection.execute("INSERT INTO tooluse_schema_version VALUES (?, 99)", (component,))
    connection.close()
    question = ["hi"] if command == "chat" else []
    # The vector store opens in the background: its version is checked before the start.
    assert (
        main(
            [command, "--model", "test", "--db", str(database), "--no-sample-knowledge", *question]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith(f"tooluse {command}: "), err
    reads = 2 if component == "qa_approval" else 1  # version 2: the conversation's column
    assert (
        f"{component} schema version 99, but this version of tooluse reads version {reads}" in err
    )
    assert "Traceback" not in err
