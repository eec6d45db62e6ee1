"""``tooluse serve --workers N``'s sockets: on Linux each worker listens on a socket of its
own bound with SO_REUSEPORT (the kernel spreads the connections among them; on one shared
socket one worker could take most of a burst), the supervisor holding the port without
listening; ``--worker-sockets shared`` (and any other system) keeps uvicorn's one socket."""

from __future__ import annotations

import argparse
import io
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from multiprocessing.reduction import ForkingPickler
from pathlib import Path

import httpx
import pytest

from _ports import free_port
from _service_helpers import default_sigint
from test_service_workers import wait_until_serving
from tooluse.cli import serve
from tooluse.cli._options import OptionError

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="SO_REUSEPORT spreads on Linux")


def handed_to_a_worker(listener: socket.socket) -> socket.socket:
    """``listener`` as a worker of uvicorn's supervisor receives it (multiprocessing's spawn
    pickles the worker's arguments with its ForkingPickler)."""
    buffer = io.BytesIO()
    ForkingPickler(buffer).dump(listener)
    received: socket.socket = pickle.loads(buffer.getvalue())
    return received


@linux_only
def test_the_supervisors_socket_reaches_each_worker_as_one_of_its_own() -> None:
    held = serve.bind_port("127.0.0.1", 0, socket_per_worker=True)
    own = [handed_to_a_worker(held) for _ in range(2)]
    try:
        for worker in own:
            assert worker.getsockname() == held.getsockname()
            assert worker.fileno() != held.fileno()
            assert worker.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 1
            worker.listen(64)
            worker.setblocking(False)
        clients = [socket.create_connection(held.getsockname(), timeout=5) for _ in range(40)]
        accepted = []
        for worker in own:
            count = 0
            while True:
                try:
                    worker.accept()[0].close()
                except BlockingIOError:
                    break
                count += 1
            accepted.append(count)
        for client in clients:
            client.close()
        # Both workers get connections (all 40 on one: odds of 2**-39), all of them.
        assert sum(accepted) == 40 and min(accepted) > 0, accepted
        with pytest.raises(OSError):  # the supervisor's socket never listens
            held.accept()
    finally:
        for sock in (held, *own):
            sock.close()


@linux_only
def test_another_service_cannot_take_the_port_while_the_workers_listen() -> None:
    held = serve.bind_port("127.0.0.1", 0, socket_per_worker=True)
    worker = handed_to_a_worker(held)
    worker.listen(8)
    try:
        with pytest.raises(OptionError, match="already in use"):
            serve.bind_port("127.0.0.1", held.getsockname()[1], socket_per_worker=True)
    finally:
        worker.close()
        held.close()


@linux_only
def test_a_second_service_cannot_take_the_port_before_the_first_ones_workers_listen() -> None:
    held = serve.bind_port("127.0.0.1", 0, socket_per_worker=True)
    port = held.getsockname()[1]
    try:
        with pytest.raises(OptionError, match="already in use"):
            serve.bind_port("127.0.0.1", port, socket_per_worker=True)
    finally:
        held.close()
    serve.bind_port("127.0.0.1", port, socket_per_worker=True).close()  # released with it


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_a_system_whose_reuseport_does_not_spread_shares_one_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(serve, "SPREADS_CONNECTIONS", False)
    assert serve._socket_per_worker(parsed("--workers", "2")) is False
    with pytest.raises(OptionError, match="--worker-sockets own needs Linux"):
        serve._socket_per_worker(parsed("--workers", "2", "--worker-sockets", "own"))
    monkeypatch.setattr(serve, "SPREADS_CONNECTIONS", True)
    assert serve._socket_per_worker(parsed("--workers", "2")) is True
    assert serve._socket_per_worker(parsed("--workers", "2", "--worker-sockets", "shared")) is False
    assert serve._socket_per_worker(parsed("--workers", "1", "--worker-sockets", "own")) is False


def sockets_on(port: int, pid: int) -> dict[str, list[str]]:
    """The TCP sockets on local ``port`` that process ``pid`` holds, by state ("0A":
    listening, "01": established): their inodes."""
    states: dict[str, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rpartition(":")[2], 16) == port:
                states[fields[9]] = fields[3]
    held: dict[str, list[str]] = {}
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(descriptor)
        except FileNotFoundError:  # closed since it was listed
            continue
        inode = link.removeprefix("socket:[").removesuffix("]")
        if inode in states:
            held.setdefault(states[inode], []).append(inode)
    return held


def workers_of(supervisor: int) -> list[int]:
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
    spawned = [int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]
    return sorted(spawned)


def listeners(port: int, supervisor: int) -> dict[int, list[str]]:
    """Per worker of ``supervisor``, the inodes of its listening sockets on ``port``."""
    return {pid: sockets_on(port, pid).get("0A", []) for pid in workers_of(supervisor)}


def served_by(port: int, supervisor: int, count: int) -> dict[int, int]:
    """``count`` requests, each on a connection of its own (the kernel picks a worker per
    connection), all answered: the connections each worker held while they were open."""
    clients = [httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) for _ in range(count)]
    try:
        for client in clients:
            assert client.get("/healthz").status_code == 200
        return {pid: len(sockets_on(port, pid).get("01", [])) for pid in workers_of(supervisor)}
    finally:
        for client in clients:
            client.close()


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.2)


@pytest.fixture
def two_workers_on(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """``tooluse serve --workers 2`` (SQLite, the TestModel) with ``request.param``'s
    options: its port and process; stopped with SIGTERM, which must stop every worker."""
    port = free_port()
    env = {**os.environ, "TOOLUSE_CACHE_DIR": str(tmp_path / "cache")}
    for name in ("TOOLUSE_MODEL", "TOOLUSE_DATABASE_URL", "TOOLUSE_REDIS_URL"):
        env.pop(name, None)
    command = [sys.executable, "-m", "tooluse.cli", "serve", "--model", "test"]
    command += ["--port", str(port), "--workers", "2", "--db", str(tmp_path / "w.db")]
    command += ["--no-sample-knowledge", *request.param]
    server = subprocess.Popen(
        command, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint
    )
    try:
        wait_until_serving(server, f"http://127.0.0.1:{port}")
        wait_for(lambda: len(workers_of(server.pid)) == 2, "two workers")
        yield port, server
        workers = workers_of(server.pid)
    finally:
        server.send_signal(signal.SIGTERM)
        _, log = server.communicate(timeout=60)
    assert server.returncode == 0, log
    assert "Traceback" not in log, log
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()], "a worker outlived it"


@linux_only
@pytest.mark.parametrize("two_workers_on", [()], indirect=True)
def test_each_worker_listens_on_its_own_socket_and_one_killed_is_replaced(
    two_workers_on: tuple[int, subprocess.Popen[str]],
) -> None:
    port, server = two_workers_on
    url = f"http://127.0.0.1:{port}"

    def both_listen() -> bool:
        return [len(inodes) for inodes in listeners(port, server.pid).values()] == [1, 1]

    # The first worker serving does not mean the second listens yet: on a loaded machine it
    # may still be importing (a spawned process).
    wait_for(both_listen, "both workers listening")
    own = listeners(port, server.pid)
    assert len({inode for inodes in own.values() for inode in inodes}) == 2, own
    assert "0A" not in sockets_on(port, server.pid)  # the supervisor does not listen
    spread = served_by(port, server.pid, 30)
    # Both take connections (all 30 on one: odds of 2**-29), all of them.
    assert sum(spread.values()) == 30 and min(spread.values()) > 0, spread

    killed = min(own)
    os.kill(killed, signal.SIGKILL)
    # Its socket goes with it: the kernel hands new connections to the other worker only.
    wait_for(lambda: killed not in listeners(port, server.pid), "the killed worker gone")
    assert sum(served_by(port, server.pid, 20).values()) == 20
    wait_for(both_listen, "a new worker listening")
    assert killed not in listeners(port, server.pid)
    wait_until_serving(server, url)
    spread = served_by(port, server.pid, 30)
    assert sum(spread.values()) == 30 and min(spread.values()) > 0, spread


@linux_only
@pytest.mark.parametrize("two_workers_on", [("--worker-sockets", "shared")], indirect=True)
def test_shared_worker_sockets_keep_uvicorns_one_socket(
    two_workers_on: tuple[int, subprocess.Popen[str]],
) -> None:
    port, server = two_workers_on
    shared = listeners(port, server.pid)
    assert len(shared) == 2 and len({i for inodes in shared.values() for i in inodes}) == 1
    assert sum(served_by(port, server.pid, 10).values()) == 10
