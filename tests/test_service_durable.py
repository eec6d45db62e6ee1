"""Durable runs (``ServiceConfig(durable_runs=True)``, DBOS in PostgreSQL): a worker killed
with SIGKILL in the middle of a run leaves it to another worker, which finishes it from its
last completed step, without running the completed tool call again."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _ports import free_port
from _service_helpers import parse_sse
from test_service_workers import wait_until_serving
from tooluse.service._turns import DEFAULT_TURN_LEASE

WORKER = Path(__file__).with_name("_durable_worker.py")


def start_worker(port: int, database_url: str, tool_log: Path, *options: str) -> Any:
    env = {**os.environ, "TOOLUSE_CACHE_DIR": str(tool_log.parent / "cache")}
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(port), database_url, str(tool_log), *options],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def tool_log(tmp_path: Path) -> Path:
    return tmp_path / "tool-calls.log"


@contextlib.contextmanager
def two_workers(
    database_url: str, tool_log: Path, *options: str
) -> Iterator[tuple[Any, str, Any, str]]:
    """Worker A, whose model is slow on the answer, and worker B, on one database."""
    ports = [free_port(), free_port()]
    slow = start_worker(ports[0], database_url, tool_log, "--slow-answer", *options)
    fast = start_worker(ports[1], database_url, tool_log, *options)
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        wait_until_serving(slow, urls[0])
        wait_until_serving(fast, urls[1])
        yield slow, urls[0], fast, urls[1]
    finally:
        for worker in (slow, fast):
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        logs = [worker.communicate(timeout=60)[1] for worker in (slow, fast)]
    assert "Traceback" not in logs[1], logs[1]


@pytest.fixture
def workers(postgres_url: str, tool_log: Path) -> Iterator[tuple[Any, str, Any, str]]:
    with two_workers(postgres_url, tool_log) as started:
        yield started


def wait_for_outcome(client: httpx.Client, run_id: str) -> dict[str, Any]:
    """The run as ``GET /api/runs/{id}`` shows it once it ended."""
    deadline = time.monotonic() + 120
    while True:
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
        if run["status"] != "running":
            return run
        assert time.monotonic() < deadline, f"the run {run_id} did not end within 120 s"
        time.sleep(0.2)


def ask_and_kill_slow_worker(slow: Any, slow_url: str, tool_log: Path) -> str | None:
    """Ask worker A in conversation c1, kill it with SIGKILL once the tool ran and the
    answer is being written; the run's id (``None`` without durable runs)."""
    seen: list[str] = []
    with (
        httpx.Client(base_url=slow_url, timeout=60) as client,
        client.stream(
            "POST", "/api/chat", json={"message": "Where is order A1001?", "conversation_id": "c1"}
        ) as response,
    ):
        assert response.status_code == 200
        run_id = response.headers.get("x-run-id")
        for line in response.iter_lines():
            if line.startswith("event:"):
                seen.append(line[6:].strip())
            if "route" in seen:  # the tool round is recorded; the answer is being written
                break
        assert seen == ["tool_call", "tool_result", "route"], seen
        assert tool_log.read_text().splitlines() == ["A1001"]
        slow.send_signal(signal.SIGKILL)
        slow.wait(timeout=30)
    return run_id


def test_a_run_whose_worker_is_killed_is_finished_by_the_other_without_running_its_tool_again(
    workers: tuple[Any, str, Any, str], tool_log: Path
) -> None:
    slow, slow_url, _, fast_url = workers
    run_id = ask_and_kill_slow_worker(slow, slow_url, tool_log)
    assert run_id is not None
    with httpx.Client(base_url=fast_url, timeout=60) as client:
        run = wait_for_outcome(client, run_id)
        assert run["status"] == "done", run
        events = [event["event"] for event in run["events"]]
        assert events == ["tool_call", "tool_result", "route", "done"], run
        assert run["events"][-1]["data"]["answer"] == "Order A1001 has shipped."
        assert tool_log.read_text().splitlines() == ["A1001"]  # ran once, on the dead worker
        conversation = client.get("/api/conversations/c1").json()
        assert [(m["role"], m.get("text")) for m in conversation["messages"]] == [
            ("user", "Where is order A1001?"),
            ("assistant", "Order A1001 has shipped."),
        ]
        results = conversation["messages"][0]["events"]
        assert [event["event"] for event in results][:2] == ["tool_call", "tool_result"], results


def test_a_run_taken_over_does_not_wait_out_the_redis_lease_of_its_dead_worker(
    postgres_url: str, redis_url: str, tool_log: Path
) -> None:
    # The dead worker held the conversation's Redis lock (a 30 s lease); the worker taking
    # its runs over frees its locks, so the run goes on at once.
    with two_workers(postgres_url, tool_log, "--redis", redis_url) as (slow, slow_url, _, fast):
        run_id = ask_and_kill_slow_worker(slow, slow_url, tool_log)
        assert run_id is not None
        killed = time.monotonic()
        with httpx.Client(base_url=fast, timeout=60) as client:
            run = wait_for_outcome(client, run_id)
        finished = time.monotonic() - killed
        assert run["status"] == "done", run
        assert run["events"][-1]["data"]["answer"] == "Order A1001 has shipped."
        assert finished < DEFAULT_TURN_LEASE * 2 / 3, f"{finished:.1f} s after the kill"
        assert tool_log.read_text().splitlines() == ["A1001"]


def wait_for_file(path: Path) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear within 120 s"
        time.sleep(0.05)


def test_a_chat_completion_whose_worker_is_killed_is_finished_by_the_other_and_kept_by_id(
    workers: tuple[Any, str, Any, str], tool_log: Path
) -> None:
    # /v1/chat/completions streaming: the client's stream breaks with its worker; the run
    # goes on on the other worker, and the client reads its outcome by the id it was told.
    slow, slow_url, _, fast_url = workers
    body = {
        "model": "tooluse-qa",
        "messages": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Where is order A1001?"},
        ],
        "stream": True,
    }
    with (
        httpx.Client(base_url=slow_url, timeout=60) as client,
        client.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        assert response.status_code == 200
        run_id = response.headers["x-run-id"]
        # No chunk before the run's first text (the role chunk comes with it), so none is
        # read here: the headers are what the client has when its worker dies.
        lines = response.iter_lines()
        wait_for_file(tool_log.with_suffix(".answering"))  # the tool round is recorded
        assert tool_log.read_text().splitlines() == ["A1001"]
        slow.send_signal(signal.SIGKILL)
        slow.wait(timeout=30)
        with pytest.raises(httpx.TransportError):  # the stream breaks with its worker
            for _ in lines:
                pass

    with httpx.Client(base_url=fast_url, timeout=60) as client:
        run = wait_for_outcome(client, run_id)
        assert run["status"] == "done", run
        assert [event["event"] for event in run["events"]] == [
            "tool_call",
            "tool_result",
            "route",
            "done",
        ], run
        assert run["events"][-1]["data"]["answer"] == "Order A1001 has shipped."
        assert tool_log.read_text().splitlines() == ["A1001"]  # ran once, on the dead worker


def test_a_durable_chat_completion_answers_and_its_outcome_is_kept(
    workers: tuple[Any, str, Any, str],
) -> None:
    _, _, _, fast_url = workers
    body = {"messages": [{"role": "user", "content": "Where is order A1001?"}]}
    with httpx.Client(base_url=fast_url, timeout=60) as client:
        answered = client.post("/v1/chat/completions", json=body)
        assert answered.status_code == 200, answered.text
        answer = answered.json()["choices"][0]["message"]["content"]
        assert answer == "Order A1001 has shipped."
        run = wait_for_outcome(client, answered.headers["x-run-id"])
        assert run["status"] == "done"
        assert run["events"][-1]["data"]["answer"] == answer

        streamed = client.post("/v1/chat/completions", json={**body, "stream": True})
        chunks = [
            json.loads(line.removeprefix("data: "))
            for line in streamed.text.splitlines()
            if line.startswith("data: {")
        ]
        assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == answer
        assert streamed.text.rstrip().endswith("data: [DONE]")
        assert wait_for_outcome(client, streamed.headers["x-run-id"])["status"] == "done"


def test_a_durable_run_streams_from_its_worker_and_its_outcome_is_kept(
    workers: tuple[Any, str, Any, str], tool_log: Path
) -> None:
    _, _, _, fast_url = workers
    with httpx.Client(base_url=fast_url, timeout=60) as client:
        asked = client.post("/api/chat", json={"message": "Where is order A1001?"})
        streamed = parse_sse(asked.text)
        assert [name for name, _ in streamed if name != "delta"] == [
            "tool_call",
            "tool_result",
            "route",
            "done",
        ]
        run = wait_for_outcome(client, asked.headers["x-run-id"])
        assert run["status"] == "done"
        assert run["events"][-1]["data"] == json.loads(json.dumps(streamed[-1][1]))
        assert client.get("/api/runs/no-such-run").status_code == 404


def test_a_durable_chat_completion_is_read_by_its_caller_only(
    postgres_url: str, tool_log: Path
) -> None:
    port = free_port()
    worker = start_worker(port, postgres_url, tool_log, "--users")
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(worker, base)
        with httpx.Client(base_url=base, timeout=60) as client:
            ann = {"Authorization": "Bearer ann-key"}
            bob = {"Authorization": "Bearer bob-key"}
            body = {"messages": [{"role": "user", "content": "Where is order A1001?"}]}
            answered = client.post("/v1/chat/completions", json=body, headers=ann)
            run_id = answered.headers["x-run-id"]
            assert client.get(f"/api/runs/{run_id}", headers=ann).status_code == 200
            assert client.get(f"/api/runs/{run_id}", headers=bob).status_code == 404
    finally:
        worker.send_signal(signal.SIGTERM)
        log = worker.communicate(timeout=60)[1]
    assert "Traceback" not in log, log


def test_without_durable_runs_a_worker_killed_mid_run_leaves_its_conversation_whole(
    postgres_url: str, tool_log: Path
) -> None:
    # The run dies with its worker; the turns committed before it stay as they were, and
    # the conversation goes on on the other worker.
    with two_workers(postgres_url, tool_log, "--not-durable") as (slow, slow_url, _, fast_url):
        with httpx.Client(base_url=fast_url, timeout=60) as client:
            asked = client.post("/api/chat", json={"message": "First?", "conversation_id": "c1"})
            assert parse_sse(asked.text)[-1][0] == "done", asked.text
            before = client.get("/api/conversations/c1").json()["messages"]
        tool_log.unlink()  # the first turn's tool call: the helper counts the killed turn's
        ask_and_kill_slow_worker(slow, slow_url, tool_log)
        with httpx.Client(base_url=fast_url, timeout=60) as client:
            after_kill = client.get("/api/conversations/c1").json()["messages"]
            again = client.post("/api/chat", json={"message": "Again?", "conversation_id": "c1"})
            assert parse_sse(again.text)[-1][0] == "done", again.text
            after = client.get("/api/conversations/c1").json()["messages"]
    assert after_kill == before  # nothing of the killed turn, the first turn whole
    assert after[: len(before)] == before
    assert [(m["role"], m["text"]) for m in after[len(before) :]] == [
        ("user", "Again?"),
        ("assistant", "Order A1001 has shipped."),
    ]
