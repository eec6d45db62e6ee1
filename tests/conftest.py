"""Fixtures shared by several test modules, a fresh embedding cache for each run, and how a
skip is treated under ``CI=true``.

Skips under CI. ``.ci/run`` installs everything the suite needs (Redis,
Chromium, the Python packages), so under ``CI=true`` a test that skips, for a missing browser,
server or package, FAILS: a green CI then says every test ran. A skip that is fine on any
machine (a test for another operating system: POSIX signals, ``/proc``) is declared on the
test, its class or its module's ``pytestmark``, with why it may skip::

    @pytest.mark.optional_skip("Windows has no POSIX signals")

Declared skips stay skips; the run's closing output lists them ("declared optional skips")
before the closing line, whose "N skipped" counts them. Without ``CI=true`` an undeclared skip
stays a skip too, and is listed as one that CI would fail. A module that skips while it is
collected (a module-level ``pytest.importorskip``) cannot be declared: skip in the test.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tooluse import _tracing

if TYPE_CHECKING:  # imported where used: tests/test_ci_skips.py runs this file on its own
    from _servers import PostgresServer, RedisServer

# Hypothesis' timing checks (a slow example, slow input generation) measure the machine, not the
# code: on a busy 2-core machine they failed tests whose properties held. Its checks of the
# strategies themselves stay on.
settings.register_profile("tooluse", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tooluse")

# Helper modules whose asserts should report their values like the tests' own.
pytest.register_assert_rewrite("_memory_helpers")

_CACHE_DIRECTORY = pytest.StashKey[str]()
_OPTIONAL_SKIPS = pytest.StashKey[list[str]]()
_UNDECLARED_SKIPS = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    # The bundled model's vectors go to a cache of this run, as on a fresh machine: vectors
    # left in ~/.cache by an earlier run (another version, another CPU) would hide what this
    # machine computes, and the tests would write into the user's cache.
    config.stash[_CACHE_DIRECTORY] = tempfile.mkdtemp(prefix="tooluse-test-cache-")
    os.environ["TOOLUSE_CACHE_DIR"] = config.stash[_CACHE_DIRECTORY]
    config.addinivalue_line(
        "markers",
        "optional_skip(why): this test may skip under CI=true (tests/conftest.py says when)",
    )
    config.stash[_OPTIONAL_SKIPS] = []
    config.stash[_UNDECLARED_SKIPS] = []


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(config.stash[_CACHE_DIRECTORY], ignore_errors=True)


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # (path, line, "Skipped: why")
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _failed_under_ci(report: pytest.TestReport | pytest.CollectReport, reason: str) -> None:
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI=true: {reason}\n"
        "CI must run every test: install what it needs in .ci/run, or, if the skip is fine on "
        "any machine, declare it with @pytest.mark.optional_skip(why) (tests/conftest.py)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if not report.skipped or hasattr(report, "wasxfail"):  # an xfail is no skip
        return report
    reason = _skip_reason(report)
    declared = item.get_closest_marker("optional_skip")
    if declared is not None:
        why = declared.args[0] if declared.args else declared.kwargs.get("why", "")
        item.config.stash[_OPTIONAL_SKIPS].append(f"{item.nodeid}: {reason} (optional: {why})")
    elif _under_ci():
        _failed_under_ci(report, reason)
    else:
        item.config.stash[_UNDECLARED_SKIPS].append(f"{item.nodeid}: {reason}")
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    if report.skipped:
        if _under_ci():
            _failed_under_ci(report, _skip_reason(report))
        else:
            collector.config.stash[_UNDECLARED_SKIPS].append(
                f"{collector.nodeid}: {_skip_reason(report)}"
            )
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    config = terminalreporter.config
    for title, lines in (
        ("declared optional skips", config.stash[_OPTIONAL_SKIPS]),
        ("skips that fail under CI=true", config.stash[_UNDECLARED_SKIPS]),
    ):
        if lines:
            terminalreporter.write_sep("=", f"{title}: {len(lines)}")
            for line in lines:
                terminalreporter.write_line(line)


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """Records the spans tooluse starts during this test.

    Only tooluse's tracer is swapped for one of a private SDK provider: setting the global
    tracer provider would make every later test (and library) in the process trace too.
    """
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    monkeypatch.setattr(_tracing, "_tracer", provider.get_tracer("tooluse"))
    return memory


@pytest.fixture
def no_resource_warnings() -> Iterator[None]:
    """Fails the test if a socket, transport or event loop was left unclosed (garbage is
    collected first, so what was dropped unclosed is found)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        yield
        gc.collect()
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert unclosed == []


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server (with pgvector) for the session, started on first use."""
    from _servers import PostgresServer

    server = PostgresServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of a database of this test's own on the session's server."""
    url = postgres_server.new_database()
    try:
        yield url
    finally:
        postgres_server.drop_database(url)


@pytest.fixture(params=["sqlite", "postgres"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store that runs on either engine keeps its tables: a SQLite file, or a
    PostgreSQL database of this test's own."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def open_store(store_location: str) -> Iterator[Callable[..., Any]]:
    """``open_store(SqliteClass, PostgresClass, **options)``: a store on this test's
    ``store_location``, of the class for its engine. Each call opens one more on the same
    tables, as another worker would (a connection or a pool of its own); all are closed
    after the test."""
    opened: list[Any] = []

    def open_(sqlite: type[Any], postgres: type[Any], **options: Any) -> Any:
        kind = postgres if store_location.startswith("postgresql://") else sqlite
        store = kind(store_location, **options)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One Redis server for the session, started on first use."""
    from _servers import RedisServer

    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session's Redis server, emptied for this test."""
    import redis

    with redis.Redis.from_url(redis_server.url) as client:
        client.flushall()
    return redis_server.url
