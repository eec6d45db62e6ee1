"""The slow reliability checks of ``tooluse serve``, against the real command over real HTTP
(the fast ones are ``tests/reliability/``, run by ``make test``):

    .venv/bin/python benchmarks/reliability.py                 # all three
    .venv/bin/python benchmarks/reliability.py mcp-kill        # one of them
    make reliability                                           # all three

- ``mcp-kill``: ``tooluse serve --mcp`` with the PyPI ``mcp-server-time``; its process is
  killed with SIGKILL; the next question fails at once, and once the reconnect interval (5 s)
  has passed the following one is answered through a new server process, ``/healthz`` says
  ``connected``, and Ctrl+C shuts the service down cleanly.
- ``big-question``: a 1 MB question to ``/v1/chat/completions`` with the bundled embedding
  model, and a small one 0.2 s later: how much longer the small one takes than alone.
- ``schemathesis``: ``schemathesis run --checks all`` over ``/openapi.json``, with the
  allowances of ``benchmarks/schemathesis.toml`` (needs ``pip install schemathesis``).

Each prints its figures and exits 1 when its expectation failed.
"""

from __future__ import annotations

import argparse
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
from contextlib import contextmanager
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
TOOLUSE = [sys.executable, "-m", "tooluse.cli"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def _serving(directory: Path, *options: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``tooluse serve`` on a free port until it answers ``/healthz``; its log in
    ``directory/serve.log``. Stopped with Ctrl+C (SIGINT) at the end."""
    port = _free_port()
    command = [*TOOLUSE, "serve", "--port", str(port), "--db", str(directory / "s.db"), *options]
    env = {name: value for name, value in os.environ.items() if name != "TOOLUSE_MODEL"}
    with (directory / "serve.log").open("w") as log:
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
                    raise RuntimeError(f"tooluse serve did not start: see {directory}/serve.log")
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
