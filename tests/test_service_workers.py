"""Two ``tooluse serve`` processes on two ports, one PostgreSQL database and one Redis: a
conversation and an approval go from one worker to the other, as behind a load balancer; and
``tooluse serve --workers 2``, two processes on one port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _ports import free_port
from _service_helpers import default_sigint, names, parse_sse


def start_worker(
    port: int, tmp_path: Path, database_url: str, redis_url: str, *options: str
) -> Any:
    env = {
        **os.environ,
        "TOOLUSE_CACHE_DIR": str(tmp_path / "cache"),
        "TOOLUSE_DATABASE_URL": database_url,
        "TOOLUSE_REDIS_URL": redis_url,
    }
    env.pop(
        "TOOLUSE_MODEL", None
    )  # --model test below: the TestModel calls cancel_order when asked
    command = [sys.executable, "-m", "tooluse.cli", "serve", "--model", "test"]
    command += ["--port", str(port)]
    command += ["--db", str(tmp_path / f"unused-{port}.db"), "--no-sample-knowledge", *options]
    return subprocess.Popen(
        command, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint
    )


def wait_until_serving(worker: Any, url: str) -> None:
    deadline = time.monotonic() + 120  # two processes importing and loading on a busy machine
    while True:
        assert worker.poll() is None, f"the worker exited: {worker.communicate()[1]}"
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the worker did not answer within 120 s"
        time.sleep(0.2)


@pytest.fixture
def two_workers(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    ports = [free_port(), free_port()]
    workers = [start_worker(port, tmp_path, postgres_url, redis_url) for port in ports]
    try:
        clients = [httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) for port in ports]
        for worker, client in zip(workers, clients, strict=True):
            wait_until_serving(worker, str(client.base_url))
        yield clients[0], clients[1]
        for client in clients:
            client.close()
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        logs = [worker.communicate(timeout=60)[1] for worker in workers]
    for log in logs:
        assert "Traceback" not in log, log


def paused_in_c1(client: httpx.Client) -> tuple[str, dict[str, Any]]:
    """Ask ``client`` to cancel an order in conversation c1: the approval id of the paused
    run, and its held call."""
    asked = client.post(
        "/api/chat", json={"message": "Cancel order A1001", "conversation_id": "c1"}
    )
    paused = parse_sse(asked.text)[-1]
    assert paused[0] == "approval_required", asked.text
    (held,) = paused[1]["pending_tool_calls"]
    return paused[1]["approval_id"], held


def test_a_conversation_and_its_approval_go_from_one_worker_to_the_other(
    two_workers: tuple[httpx.Client, httpx.Client],
) -> None:
    first, second = two_workers
    approval_id, held = paused_in_c1(first)
    listed = second.get("/api/approvals", params={"conversation_id": "c1"}).json()
    assert [approval["approval_id"] for approval in listed] == [approval_id]
    decided = second.post(
        f"/api/approvals/{approval_id}", json={"decisions": {held["id"]: {"approve": True}}}
    )
    assert names(parse_sse(decided.text))[-1] == "done", decided.text
    assert first.get(f"/api/approvals/{approval_id}").json()["status"] == "done"
    shown_by_first = first.get("/api/conversations/c1").json()
    assert shown_by_first == second.get("/api/conversations/c1").json()
    assert [m["role"] for m in shown_by_first["messages"]] == ["user", "assistant"]
    assert shown_by_first["pending_approvals"] == []


def test_serve_with_two_workers_runs_two_processes_on_one_port(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> None:
    port = free_port()
    server = start_worker(port, tmp_path, postgres_url, redis_url, "--workers", "2")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(server, url)
        with httpx.Client(base_url=url, timeout=60) as client:
            asked = client.post(
                "/api/chat", json={"message": "Cancel order A1001", "conversation_id": "c1"}
            )
            paused = parse_sse(asked.text)[-1]
            assert paused[0] == "approval_required", asked.text
            (held,) = paused[1]["pending_tool_calls"]
            decided = client.post(
                f"/api/approvals/{paused[1]['approval_id']}",
                json={"decisions": {held["id"]: {"approve": True}}},
            )
            assert names(parse_sse(decided.text))[-1] == "done", decided.text
        children = subprocess.run(
            ["ps", "--ppid", str(server.pid), "-o", "args="],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        assert len([child for child in children if "spawn" in child]) == 2, children
    finally:
        server.send_signal(signal.SIGTERM)
        _, log = server.communicate(timeout=60)
    assert "Traceback" not in log, log


def test_a_page_watching_on_one_worker_sees_the_run_resumed_on_the_other(
    two_workers: tuple[httpx.Client, httpx.Client],
) -> None:
    first, second = two_workers
    approval_id, held = paused_in_c1(first)
    seen: list[tuple[str, Any]] = []
    subscribed = threading.Event()

    def watch() -> None:  # the page on the first worker, watching the conversation
        with first.stream("GET", "/api/events", params={"conversation_id": "c1"}) as response:
            block: list[str] = []
            for line in response.iter_lines():
                if line:
                    block.append(line)
                    continue
                seen.extend(parse_sse("\n".join(block)))
                block = []
                subscribed.set()
                if seen and seen[-1][0] == "done":
                    return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert subscribed.wait(60), "the watcher was not subscribed within 60 s"
    decided = second.post(
        f"/api/approvals/{approval_id}", json={"decisions": {held["id"]: {"approve": True}}}
    )
    streamed = parse_sse(decided.text)
    watcher.join(60)
    assert not watcher.is_alive(), f"the first worker's watcher saw no answer: {seen}"
    assert names(seen) == ["watching", *(n for n in names(streamed) if n != "delta")], seen
    assert seen[-1][1]["answer"] == streamed[-1][1]["answer"]
    assert seen[-1][1]["conversation_id"] == "c1"
