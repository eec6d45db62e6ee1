"""What one tool question on ``/api/chat`` asks of its stores, counted: each round trip to
PostgreSQL and Redis with the statements or commands it carried, or on SQLite each hop to
a thread with its statements.

    .venv/bin/python benchmarks/count_round_trips.py                 # PostgreSQL + Redis
    .venv/bin/python benchmarks/count_round_trips.py --engine sqlite # the embedded default

The app of ``tooluse serve`` (as ``bench_service.py`` builds it, with its fake model: the
router's call of ``get_weather``, then the answer) runs in this process over ASGI; the
questions go one at a time in one conversation, so that what is counted is one question's.
PostgreSQL (the tests' throwaway server) and Redis (``redis-server``) are reached through a
proxy of this script that reads the protocols' messages: a round trip is what the worker
sends before it reads the server's reply. The proxy's own work is not measured: this
counts, it does not time."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import struct
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1] / "tests")]

QUESTION = "What's the weather in Paris?"
# Questions before the count: the first turns create things, and a window is full (20
# messages) after 10, from when each turn also drops the window's oldest messages.
_WARM_UP = 12


class _Trips:
    """The round trips seen, each a list of what it carried, per server."""

    def __init__(self) -> None:
        self.trips: dict[str, list[list[str]]] = {}
        self.lock = threading.Lock()

    def add(self, server: str, items: list[str]) -> None:
        with self.lock:
            self.trips.setdefault(server, []).append(items)

    def take(self) -> dict[str, list[list[str]]]:
        with self.lock:
            trips, self.trips = self.trips, {}
        return trips


def _postgres_messages(data: bytes, prepared: dict[bytes, str]) -> tuple[list[str], bytes]:
    """The statements of the frontend messages in ``data`` (a ``Query``'s text, a
    ``Parse``'s query unless it prepares one, a ``Bind`` of a prepared one), and what is
    left of an unfinished message; ``prepared``: the connection's statements by name."""
    items = []
    while len(data) >= 5:
        kind, length = data[:1], struct.unpack("!I", data[1:5])[0]
        if len(data) < 1 + length:
            break
        body, data = data[5 : 1 + length], data[1 + length :]
        if kind == b"Q":
            items.append(body.rstrip(b"\0").decode())
        elif kind == b"P":  # name, then the query
            name, query = body.split(b"\0")[:2]
            if name:  # psycopg prepares a statement at its 5th run, a round trip of its own
                prepared[name] = query.decode()
                items.append("(prepare) " + query.decode())
            else:
                items.append(query.decode())
        elif kind == b"B":  # portal, then the statement's name (empty: the Parse before)
            name = body.split(b"\0")[1]
            if name:
                items.append(prepared[name])
    return items, data


def _untyped(data: bytes) -> tuple[bytes, bool]:
    """What follows PostgreSQL's untyped messages at the start of ``data`` (an SSL or GSS
    request, the start-up message), and whether the start-up is still to come."""
    while len(data) >= 8:
        length, code = struct.unpack("!II", data[:8])
        data = data[length:]
        if code == _PROTOCOL_3:
            return data, False
    return data, True


_PROTOCOL_3 = 196608  # the start-up message's protocol version (3.0)


def _redis_commands(data: bytes) -> list[str]:
    """The command names of the RESP arrays in ``data`` (the first bulk string of each)."""
    names = []
    for line_start in range(len(data)):
        if data[line_start : line_start + 1] == b"*" and (
            line_start == 0 or data[line_start - 2 : line_start] == b"\r\n"
        ):
            rest = data[line_start:].split(b"\r\n", 3)
            if len(rest) > 2 and rest[1].startswith(b"$"):
                names.append(rest[2].decode(errors="replace").upper())
    return names


async def _proxy(server: str, target: tuple[str, int], trips: _Trips) -> asyncio.Server:
    """A TCP proxy to ``target``; each burst from a client after the server last answered
    it is one round trip (its messages after the start-up's not split by replies)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*target)
        state: dict[str, Any] = {"sent": [], "pending": b"", "startup": server == "postgres"}
        prepared: dict[bytes, str] = {}

        async def client_to_server() -> None:
            while data := await reader.read(65536):
                if state["startup"]:  # the SSL request and the start-up have no type byte
                    data_left, state["startup"] = _untyped(data)
                    items = _postgres_messages(data_left, prepared)[0] if data_left else []
                elif server == "postgres":
                    items, state["pending"] = _postgres_messages(state["pending"] + data, prepared)
                else:
                    items = _redis_commands(data)
                if items or not state["startup"]:
                    state["sent"] = [*state["sent"], *items] or ["(no statement)"]
                upstream_writer.write(data)
                await upstream_writer.drain()
            upstream_writer.close()

        async def server_to_client() -> None:
            while data := await upstream_reader.read(65536):
                if state["sent"]:
                    trips.add(server, state["sent"])
                    state["sent"] = []
                writer.write(data)
                await writer.drain()
            writer.close()

        with contextlib.suppress(ConnectionError):
            await asyncio.gather(client_to_server(), server_to_client())

    return await asyncio.start_server(handle, "127.0.0.1", 0)


@contextlib.contextmanager
def _proxies(targets: dict[str, tuple[str, int]], trips: _Trips) -> Iterator[dict[str, int]]:
    """The proxies' ports, served by a loop in a thread of their own."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    servers = {
        name: asyncio.run_coroutine_threadsafe(_proxy(name, target, trips), loop).result()
        for name, target in targets.items()
    }
    try:
        yield {name: server.sockets[0].getsockname()[1] for name, server in servers.items()}
    finally:
        asyncio.run_coroutine_threadsafe(_stopped(list(servers.values())), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


async def _stopped(servers: list[asyncio.Server]) -> None:
    """The proxies closed, and the connections they still carry."""
    for server in servers:
        server.close()
    carrying = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in carrying:
        task.cancel()
    await asyncio.gather(*carrying, return_exceptions=True)


def _statement(text: str) -> str:
    return " ".join(text.split())[:110]


async def _questions(config: Any, trips: _Trips, count: int, hops: list[list[str]]) -> None:
    """``count`` tool questions in one conversation, one at a time, after a warm-up whose
    round trips and hops are dropped."""
    from _service_helpers import running  # type: ignore[import-not-found]
    from tooluse.service import create_app

    async with running(create_app(config)) as client:
        for number in range(_WARM_UP + count):
            if number == _WARM_UP:
                trips.take()
                hops.clear()
            response = await client.post(
                "/api/chat", json={"message": QUESTION, "conversation_id": "c1"}
            )
            if response.status_code != 200 or "event: done" not in response.text:
                raise RuntimeError(f"the question failed: {response.status_code} {response.text}")


_LABELS = {"postgres": "PostgreSQL round trips", "redis": "Redis round trips"}


def _report(trips: dict[str, list[list[str]]], count: int) -> None:
    for server, seen in sorted(trips.items()):
        # A statement's preparation is once per pooled connection: not a question's.
        prepares = [items for items in seen if all(i.startswith("(prepare)") for i in items)]
        seen = [items for items in seen if items not in prepares]
        preparing = f" (and {len(prepares)} preparing a statement)" if prepares else ""
        label = _LABELS.get(server, server)
        print(f"\n{label}: {len(seen) / count:g} per question{preparing}")
        for number, items in enumerate(seen, 1):
            print(f"  {number}. " + " | ".join(_statement(item) for item in items))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--questions", type=int, default=5)
    args = parser.parse_args()

    from bench_service import _FixedLatencyModel

    from _rag_helpers import HashingEmbeddingModel  # type: ignore[import-not-found]
    from _servers import PostgresServer, RedisServer  # type: ignore[import-not-found]
    from tooluse.service import ServiceConfig

    trips = _Trips()
    hops: list[list[str]] = []
    directory = tempfile.mkdtemp(prefix="count-trips-")
    settings: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        if args.engine == "postgres":
            postgres, redis_server = PostgresServer(), RedisServer()
            stack.callback(postgres.stop)
            stack.callback(redis_server.stop)
            database, redis_url = postgres.new_database(), redis_server.url
            targets = {
                "postgres": _host_port(database),
                "redis": _host_port(redis_url),
            }
            ports = stack.enter_context(_proxies(targets, trips))
            settings["database_url"] = _with_port(database, ports["postgres"])
            settings["redis_url"] = _with_port(redis_url, ports["redis"])
        else:
            stack.enter_context(_sqlite_hops(hops))
        config = ServiceConfig(
            db=Path(directory) / "s.db",
            model=_FixedLatencyModel(0),
            embedding_model=HashingEmbeddingModel(),
            sample_knowledge=False,
            **settings,
        )
        asyncio.run(_questions(config, trips, args.questions, hops))
        if args.engine == "postgres":
            _report(trips.take(), args.questions)
        else:
            _report({"SQLite: hops to a thread": [h for h in hops if h]}, args.questions)
            bare = sum(1 for hop in hops if not hop) / args.questions
            print(f"  and {bare:g} hops without a SQLite statement per question")


def _host_port(url: str) -> tuple[str, int]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _with_port(url: str, port: int) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    netloc = parts.netloc.rsplit(":", 1)[0] + f":{port}"
    return urlunsplit(parts._replace(netloc=netloc))


@contextlib.contextmanager
def _sqlite_hops(hops: list[list[str]]) -> Iterator[None]:
    """Each hop to a thread (``asyncio.to_thread``) as the SQLite statements it ran."""
    import sqlite3

    import tooluse._sqlite as sqlite_module

    local = threading.local()
    connect = sqlite_module.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = connect(*args, **kwargs)
        connection.set_trace_callback(
            lambda text: getattr(local, "hop", []).append(text)  # statements outside hops: none
        )
        return connection

    to_thread = asyncio.to_thread

    async def counted(function: Any, /, *args: Any, **kwargs: Any) -> Any:
        hop: list[str] = []
        hops.append(hop)

        def run() -> Any:
            local.hop = hop
            try:
                return function(*args, **kwargs)
            finally:
                del local.hop

        return await to_thread(run)

    sqlite_module.connect = traced
    asyncio.to_thread = counted
    try:
        yield
    finally:
        sqlite_module.connect = connect
        asyncio.to_thread = to_thread


if __name__ == "__main__":
    main()
