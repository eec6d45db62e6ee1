"""A throwaway PostgreSQL server for the tests: initdb into a temporary directory, listening
only on a Unix socket there. PostgreSQL refuses to run as root, so under root it runs as
``nobody``. Needs PostgreSQL's server programs (initdb, pg_ctl), which this project's machines
have; without them the tests that use it fail, saying so."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def _program(name: str) -> str:
    found = shutil.which(name) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))), None
    )
    if found is None:
        raise RuntimeError(f"PostgreSQL's {name} is not installed (apt-get install postgresql)")
    return found


class PostgresServer:
    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="tooluse-pg-"))
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.directory, "nobody")
            self._as_user = ["runuser", "-u", "nobody", "--"]
        self._data = self.directory / "data"
        self._run(
            _program("initdb"),
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
        settings = f"-k {self.directory} -c listen_addresses='' -c fsync=off"
        self._run(
            _program("pg_ctl"),
            "-D",
            str(self._data),
            "-o",
            settings,
            "-l",
            str(self.directory / "log"),
            "-w",
            "start",
        )
        self.conninfo = f"host={self.directory} port=5432 user=postgres dbname=postgres"

    def _run(self, *command: str) -> None:
        subprocess.run([*self._as_user, *command], check=True, capture_output=True)

    def stop(self) -> None:
        try:
            self._run(_program("pg_ctl"), "-D", str(self._data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.directory)
