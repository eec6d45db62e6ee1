"""The smaller findings of issue 22: the version, told everywhere it is asked for; the
database's side files ignored by git; /v1/models dated, and named as completions name it;
the offline notice said once by `tooluse chat`; a port in use said before anything starts;
the sample documents gone as soon as yours are ingested, in a running service too."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _rag_helpers import HashingEmbeddingModel
from _service_helpers import config, fake_llm, parse_sse, running
from tooluse import __version__
from tooluse.cli import main
from tooluse.mcp import InProcessServer, McpToolProvider, mcp_server
from tooluse.rag import SqliteVectorStore
from tooluse.service import create_app
from tooluse.service._offline import OFFLINE_ANSWER_HEADING, OFFLINE_NOTICE
from tooluse.tools import tool

ROOT = Path(__file__).resolve().parents[2]


def test_tooluse_says_its_version() -> None:
    assert __version__ and __version__[0].isdigit()
    done = subprocess.run(
        [sys.executable, "-m", "tooluse.cli", "--version"], capture_output=True, text=True
    )
    assert (done.returncode, done.stdout.strip()) == (0, f"tooluse {__version__}")


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


async def test_the_mcp_server_and_client_say_their_version() -> None:
    server = InProcessServer(mcp_server(ping), name="served")
    async with McpToolProvider(server) as provider:
        info = provider.connections[0].server_info
    assert info is not None and (info.name, info.version) == ("tooluse", __version__)


def test_the_database_files_sqlite_writes_beside_it_are_ignored(tmp_path: Path) -> None:
    names = ["tooluse.db", "tooluse.db-wal", "tooluse.db-shm", "tooluse.db-journal"]
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", *names], cwd=ROOT, capture_output=True, text=True
    )
    assert done.stdout.split() == names


async def test_the_listed_model_says_when_it_was_created(tmp_path: Path) -> None:
    before = int(time.time())
    async with running(create_app(config(tmp_path / "s.db"))) as http:
        listed = (await http.get("/v1/models")).json()["data"][0]
    assert before <= listed["created"] <= time.time()


async def test_completions_name_the_model_as_v1_models_lists_it(tmp_path: Path) -> None:
    user = {"role": "user", "content": "What's the weather in Paris?"}
    async with running(create_app(config(tmp_path / "s.db", model=fake_llm()))) as http:
        (listed,) = (await http.get("/v1/models")).json()["data"]
        completion = (await http.post("/v1/chat/completions", json={"messages": [user]})).json()
        streamed = await http.post(
            "/v1/chat/completions", json={"messages": [user], "stream": True}
        )
    chunks = [json.loads(line[6:]) for line in streamed.text.splitlines() if line[6:7] == "{"]
    assert chunks and {chunk["model"] for chunk in chunks} == {listed["id"]}
    assert completion["model"] == listed["id"]


def test_chat_says_once_that_it_runs_the_offline_test_model(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "tooluse.cli", "chat", "--model", "test"]
    options = ["--db", str(tmp_path / "c.db"), "--no-sample-knowledge"]
    done = subprocess.run(
        [*command, *options],
        input="What's the weather in Paris?\nAnd in Rome?\n\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert said.count(OFFLINE_NOTICE) == 1
    assert done.stdout.count(OFFLINE_ANSWER_HEADING) == 2  # each answer says what it is


def test_a_port_in_use_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        options = ["--port", str(port), "--db", str(tmp_path / "s.db"), "--no-sample-knowledge"]
        done = subprocess.run(
            [sys.executable, "-m", "tooluse.cli", "serve", "--model", "test", *options],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"tooluse serve: port {port} on 127.0.0.1 is already in use (another tooluse serve?): "
        "stop what listens there, or choose another port with --port "
        '(make serve ARGS="--port 9000")\n'
    )
    assert not (tmp_path / "s.db").exists()  # nothing was opened


async def test_the_samples_make_way_for_ingested_documents_while_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    db = tmp_path / "s.db"
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / "returns.md").write_text("# Returns\nReturns are taken for 90 days.\n")
    question = {"message": "How many days do I have to return an item?"}
    async with running(create_app(config(db, model=fake_llm()))) as http:
        while (health := (await http.get("/healthz")).json())["knowledge"] == "loading":
            await asyncio.sleep(0.05)
        samples = health["documents"]
        assert await asyncio.to_thread(main, ["ingest", str(ours), "--db", str(db)]) == 0
        counted = (await http.get("/healthz")).json()["documents"]
        answered = parse_sse((await http.post("/api/chat", json=question)).text)[-1][1]
    assert samples > 1 and counted == 1
    assert [source["source"] for source in answered["sources"]] == ["returns.md"]
    with SqliteVectorStore(db, HashingEmbeddingModel()) as store:
        assert [d.metadata["source"] for d in store.find()] == ["returns.md"]
