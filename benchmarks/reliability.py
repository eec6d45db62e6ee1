"""The slow reliability checks of ``tooluse serve``, against the real command over real HTTP
(the fast ones are ``tests/reliability/``, run by ``make test``):

    .venv/bin/python benchmarks/reliability.py                 # all four
    .venv/bin/python benchmarks/reliability.py resume-kill     # one of them
    make reliability                                           # all four

- ``mcp-kill``: ``tooluse serve --mcp`` with the PyPI ``mcp-server-time``; its process is
  killed with SIGKILL; the next question fails at once, and once the reconnect interval (5 s)
  has passed the following one is answered through a new server process, ``/healthz`` says
  ``connected``, and Ctrl+C shuts the service down cleanly.
- ``big-question``: a 1 MB question to ``/v1/chat/completions`` with the bundled embedding
  model, and a small one 0.2 s later: how much longer the small one takes than alone.
- ``resume-kill``: ``tooluse serve --model test`` with a write tool that records each run
  in a file; a question pauses on its approval, the approval is sent, and the server is
  killed with SIGKILL as soon as the tool has acted (while it still runs: the window between
  an effect and its record). Restarted on its database: the run stays ``resuming`` and a
  second decision is refused, the conversation says "Outcome unknown: it may have run", and
  the question asked again and approved does not run the tool again (its idempotency key is
  claimed in the journal). Repeated ``ROUNDS`` times; the tool must have run once in each.
- ``schemathesis``: ``schemathesis run --checks all`` over ``/openapi.json``, with the
  allowances of ``benchmarks/schemathesis.toml`` (needs ``pip install schemathesis``).

Each prints its figures and exits 1 when its expectation failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
TOOLUSE = [sys.executable, "-m", "tooluse.cli"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def _serving(
    directory: Path, *options: str, log_name: str = "serve.log"
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``tooluse serve`` on a free port until it answers ``/healthz``; its log in
    ``directory/log_name``. Stopped with Ctrl+C (SIGINT) at the end, unless it was killed."""
    port = _free_port()
    command = [*TOOLUSE, "serve", "--port", str(port), "--db", str(directory / "s.db"), *options]
    env = {name: value for name, value in os.environ.items() if name != "TOOLUSE_MODEL"}
    with (directory / log_name).open("w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 180
            while True:
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"tooluse serve did not start: see {directory}/{log_name}")
                time.sleep(0.2)
            yield url, server
        finally:
            if server.poll() is None:
                server.send_signal(signal.SIGINT)
                try:
                    server.wait(30)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()


def _children(pid: int, marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                command_line = (entry / "cmdline").read_bytes()
            except (OSError, IndexError):
                continue
            if parent == pid and marker.encode() in command_line:
                found.append(int(entry.name))
    return found


def _ask(url: str, question: str, timeout: float = 120) -> tuple[float, list[str]]:
    """Seconds to the end of the stream, and its event names."""
    started = time.monotonic()
    response = httpx.post(f"{url}/api/chat", json={"message": question}, timeout=timeout)
    names = [line[6:].strip() for line in response.text.splitlines() if line.startswith("event:")]
    return time.monotonic() - started, names


def _events(text: str) -> list[tuple[str, Any]]:
    """``(name, data)`` of each event of an SSE body."""
    events = []
    for block in text.split("\n\n"):
        lines = block.splitlines()
        names = [line[6:].strip() for line in lines if line.startswith("event:")]
        data = "\n".join(line[6:] for line in lines if line.startswith("data: "))
        if names and data:
            events.append((names[0], json.loads(data)))
    return events


def mcp_kill(directory: Path) -> bool:
    config = directory / "time.json"
    server = {"command": sys.executable, "args": ["-m", "mcp_server_time"]}
    config.write_text(json.dumps({"mcpServers": {"time": server}}))
    with _serving(directory, "--mcp", str(config), "--no-sample-knowledge") as (url, serve):
        before, _ = _ask(url, "what time is it")
        (child,) = _children(serve.pid, "mcp_server_time")
        os.kill(child, signal.SIGKILL)
        failed, failed_events = _ask(url, "what time is it")
        time.sleep(5.5)  # the reconnect interval
        recovered, recovered_events = _ask(url, "what time is it", timeout=60)
        health = httpx.get(f"{url}/healthz").json()["mcp_servers"][0]
        restarted = _children(serve.pid, "mcp_server_time")
    log = (directory / "serve.log").read_text()
    print(
        f"mcp-kill: answered {before:.2f} s; after SIGKILL failed in {failed:.2f} s "
        f"({failed_events[-1]}); after the interval answered in {recovered:.2f} s "
        f"({recovered_events[-1]}, a new process: {restarted != [child] and bool(restarted)}); "
        f"/healthz: {health['state']}; exit {serve.returncode}"
    )
    return (
        failed_events[-1] == "error"
        and recovered_events[-1] == "done"
        and health["state"] == "connected"
        and "Application shutdown failed" not in log
        and "InvalidStateError" not in log
        and serve.returncode == 0
    )


def big_question(directory: Path) -> bool:
    with _serving(directory) as (url, _):
        while httpx.get(f"{url}/healthz").json()["knowledge"] != "ready":
            time.sleep(0.5)

        def completion(question: str) -> float:
            started = time.monotonic()
            body = {"model": "m", "messages": [{"role": "user", "content": question}]}
            response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=600)
            response.raise_for_status()
            return time.monotonic() - started

        alone = completion("How long does shipping take?")
        big = "Please read all of this. " * 40_000 + "What is the return policy?"
        timings: list[float] = []
        thread = threading.Thread(target=lambda: timings.append(completion(big)))
        thread.start()
        time.sleep(0.2)
        beside = completion("How long does shipping take?")
        thread.join()
        too_big = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x" * 1_500_000}]},
            timeout=60,
        )
    print(
        f"big-question: a small question alone {alone:.2f} s, beside a 1 MB one {beside:.2f} s "
        f"(the 1 MB one {timings[0]:.2f} s); 1.5 MB: {too_big.status_code}"
    )
    return beside < alone + 10 and too_big.status_code == 413


ROUNDS = 3

# A write tool (approval by its kind) that appends a line to RUNS each time it runs, then
# takes a moment before returning: the window between an effect and its record, where the
# server is killed.
_WRITE_TOOL = """\
import os
import time

from tooluse import tool

RUNS = {runs!r}


@tool(destructive=True, idempotency_key=True)
def cancel_order(order_id: str) -> dict:
    \"\"\"Cancel an order (a test tool: each run appends a line to a file).\"\"\"
    with open(RUNS, "a") as runs:
        runs.write(order_id + "\\n")
        runs.flush()
        os.fsync(runs.fileno())
    time.sleep(0.5)
    return {{"order_id": order_id, "cancelled": True}}


tools = [cancel_order]
"""


def _resume_killed(directory: Path) -> dict[str, Any]:
    """One round of ``resume-kill``: what was seen."""
    runs = directory / "runs.txt"
    (directory / "write_tools.py").write_text(_WRITE_TOOL.format(runs=str(runs)))
    tools = f"{directory / 'write_tools.py'}:tools"
    options = ("--model", "test", "--tools", tools, "--no-sample-knowledge")
    question = {"message": "Please cancel order A1001", "conversation_id": "kill-9"}
    with _serving(directory, *options, log_name="serve-1.log") as (url, serve):
        asked = httpx.post(f"{url}/api/chat", json=question, timeout=120)
        ((_, paused),) = [e for e in _events(asked.text) if e[0] == "approval_required"]
        decisions = {call["id"]: {"approve": True} for call in paused["pending_tool_calls"]}
        decision_url = f"{url}/api/approvals/{paused['approval_id']}"

        def decide() -> None:
            with contextlib.suppress(httpx.HTTPError):  # the server is killed mid-stream
                httpx.post(decision_url, json={"decisions": decisions}, timeout=60)

        deciding = threading.Thread(target=decide)
        deciding.start()
        deadline = time.monotonic() + 60
        while not (runs.exists() and runs.read_text()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the tool did not run: see {directory}/serve-1.log")
            time.sleep(0.01)
        acted = time.monotonic()
        os.kill(serve.pid, signal.SIGKILL)
        killed_after = time.monotonic() - acted  # under the tool's 0.5 s: it was still running
        serve.wait()
        deciding.join()
    with _serving(directory, *options, log_name="serve-2.log") as (url, _):
        decision_url = f"{url}/api/approvals/{paused['approval_id']}"
        status = httpx.get(decision_url).json()["status"]
        again = httpx.post(decision_url, json={"decisions": decisions}, timeout=60).status_code
        messages = httpx.get(f"{url}/api/conversations/kill-9").json()["messages"]
        said = "\n".join(m.get("text") or "" for m in messages if m["role"] == "assistant")
        asked = httpx.post(f"{url}/api/chat", json=question, timeout=120)
        ((_, repaused),) = [e for e in _events(asked.text) if e[0] == "approval_required"]
        redecided = httpx.post(
            f"{url}/api/approvals/{repaused['approval_id']}",
            json={
                "decisions": {c["id"]: {"approve": True} for c in repaused["pending_tool_calls"]}
            },
            timeout=60,
        )
        results = [e[1] for e in _events(redecided.text) if e[0] == "tool_result"]
    return {
        "runs": len(runs.read_text().splitlines()),
        "killed_after": killed_after,
        "status": status,
        "second_decision": again,
        "outcome_unknown": "Outcome unknown: it may have run: cancel_order" in said,
        "asked_again": results[0]["result"] if results else None,
    }


def resume_kill(directory: Path) -> bool:
    rounds = []
    for number in range(ROUNDS):
        (directory / str(number)).mkdir()
        rounds.append(_resume_killed(directory / str(number)))
    once = sum(r["runs"] == 1 for r in rounds)
    unknown = sum(r["outcome_unknown"] for r in rounds)
    kept = sum(r["status"] == "resuming" and r["second_decision"] == 409 for r in rounds)
    not_again = sum(
        r["asked_again"] is not None and "unknown" in r["asked_again"].lower() for r in rounds
    )
    slowest_kill = max(r["killed_after"] for r in rounds)
    print(
        f"resume-kill: {ROUNDS} rounds, SIGKILL at most {slowest_kill * 1000:.0f} ms after the "
        f"tool acted (it returns 500 ms after); the tool ran once in {once}/{ROUNDS}; after "
        f"the restart the run stayed resuming and a second decision got 409 in "
        f"{kept}/{ROUNDS}; the conversation said "
        f'"Outcome unknown: it may have run" in {unknown}/{ROUNDS}; asked again and approved, '
        f"not run again in {not_again}/{ROUNDS} (the tool's result: "
        f"{rounds[0]['asked_again']!r})"
    )
    return bool(once == kept == unknown == not_again == ROUNDS and slowest_kill < 0.5)


def schemathesis(directory: Path) -> bool:
    with _serving(directory, "--no-sample-knowledge") as (url, _):
        run = subprocess.run(
            [
                str(Path(sys.executable).with_name("schemathesis")),
                "--config-file",
                str(HERE / "schemathesis.toml"),
                "run",
                f"{url}/openapi.json",
                "--checks",
                "all",
                "--max-examples",
                "100",
                "--request-timeout",
                "30",
                "--suppress-health-check",
                "all",
            ],
            capture_output=True,
            text=True,
        )
    summary = [line.strip() for line in run.stdout.splitlines() if "generated" in line]
    print(f"schemathesis --checks all: {summary[-1] if summary else '(no summary)'}")
    if run.returncode != 0:
        print(run.stdout[-6000:])
    return run.returncode == 0


CHECKS: dict[str, Callable[[Path], bool]] = {
    "mcp-kill": mcp_kill,
    "big-question": big_question,
    "resume-kill": resume_kill,
    "schemathesis": schemathesis,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checks", nargs="*", metavar="CHECK", help=f"of {', '.join(CHECKS)}")
    args = parser.parse_args()
    unknown = sorted(set(args.checks) - set(CHECKS))
    if unknown:
        parser.error(f"unknown checks {', '.join(unknown)}; the checks are {', '.join(CHECKS)}")
    failed = []
    for name in args.checks or CHECKS:
        with tempfile.TemporaryDirectory(prefix=f"tooluse-{name}-") as directory:
            if not CHECKS[name](Path(directory)):
                failed.append(name)
    if failed:
        print(f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
