"""The chat page follows a durable run (``--durable-runs``) that goes on on another worker:
the page's stream breaks with its worker (SIGKILL), or the page is reloaded while the run is
under way, and the page shows the run's answer once the other worker has finished it. Both
workers are behind one proxy, as behind a load balancer: one origin, so the page keeps what
it remembers (localStorage) across the switch. Headless Chromium, as in
test_service_page_browser.py."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _browser import CHROMIUM, Browser, browser
from test_service_durable import two_workers, wait_for_file

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium to drive the page (apt-get install chromium; .ci/run installs it)",
)

QUESTION = "Where is order A1001?"
ANSWER = "Order A1001 has shipped."


class Proxy:
    """127.0.0.1 on a port of its own, each connection forwarded to the worker it points at
    when the connection opens (:meth:`point_at`), as a load balancer does once a worker's
    health check fails."""

    def __init__(self, url: str) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.point_at(url)
        threading.Thread(target=self._accept, daemon=True).start()

    def point_at(self, url: str) -> None:
        self._backend = int(url.rsplit(":", 1)[1])

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # closed
            while True:
                client, _ = self._listener.accept()
                try:
                    backend = socket.create_connection(("127.0.0.1", self._backend))
                except OSError:  # the worker is gone: refused, as the proxy's would be
                    client.close()
                    continue
                for source, target in ((client, backend), (backend, client)):
                    threading.Thread(target=_pump, args=(source, target), daemon=True).start()

    def close(self) -> None:
        self._listener.close()


def _pump(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            target.sendall(data)
    for end in (source, target):  # one side ended (a killed worker's reset): both do
        with contextlib.suppress(OSError):
            end.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def behind_proxy(postgres_url: str, tmp_path: Path) -> Iterator[tuple[Proxy, Any, str, Path]]:
    """The proxy pointing at worker A (slow on its answers), worker B's URL, the tool log."""
    tool_log = tmp_path / "tool-calls.log"
    with two_workers(postgres_url, tool_log) as (slow, slow_url, _, fast_url):
        proxy = Proxy(slow_url)
        try:
            yield proxy, slow, fast_url, tool_log
        finally:
            proxy.close()


@pytest.fixture(scope="module")
def page() -> Iterator[Browser]:
    with browser() as opened:
        yield opened


def _ask(page: Browser, tool_log: Path) -> None:
    """The question sent from the page; returns once worker A writes the answer (the tool
    ran and its round is recorded) and the page shows the tool's result."""
    page.run(
        f"document.getElementById('message').value = {QUESTION!r};"
        "document.getElementById('chat').requestSubmit()"
    )
    wait_for_file(tool_log.with_suffix(".answering"))
    page.wait_for("document.querySelector('.bot .route')?.textContent", timeout=30)


def _take_over(proxy: Proxy, slow: Any, fast_url: str) -> None:
    """Worker A killed; the proxy sends what comes next to worker B."""
    slow.send_signal(signal.SIGKILL)
    slow.wait(timeout=30)
    proxy.point_at(fast_url)


def _shown(page: Browser) -> dict[str, Any]:
    result: dict[str, Any] = page.run(
        "({questions: [...document.querySelectorAll('.msg.user')].map(n => n.textContent),"
        " answers: [...document.querySelectorAll('.bot .text')].map(n => n.textContent),"
        " trace: [...document.querySelectorAll('.bot .trace summary')].map(n => n.textContent),"
        " errors: [...document.querySelectorAll('.bot .error')].map(n => n.textContent),"
        " notes: [...document.querySelectorAll('.bot .note')].map(n => n.textContent),"
        " kept: localStorage.getItem('tooluse.run'),"
        " sendable: !document.getElementById('send').disabled})"
    )
    return result


def _answered(page: Browser) -> None:
    page.wait_for(
        f"[...document.querySelectorAll('.bot .text')].some(n => n.textContent === {ANSWER!r})",
        timeout=90,
    )


def test_a_stream_broken_by_its_worker_s_death_shows_the_answer_the_other_worker_finished(
    behind_proxy: tuple[Proxy, Any, str, Path], page: Browser
) -> None:
    proxy, slow, fast_url, tool_log = behind_proxy
    page.goto(proxy.url)
    _ask(page, tool_log)
    _take_over(proxy, slow, fast_url)
    page.wait_for("!!document.querySelector('.bot .note')", timeout=30)  # it follows the run
    _answered(page)
    page.wait_for("!document.getElementById('send').disabled")
    shown = _shown(page)
    assert shown["questions"] == [QUESTION]
    assert shown["answers"] == [ANSWER]
    assert shown["trace"] == ['→ look_up_order {"order_id":"A1001"}  ✓'], shown
    assert shown["errors"] == shown["notes"] == [] and shown["kept"] is None, shown
    assert tool_log.read_text().splitlines() == ["A1001"]  # ran once, on the dead worker


def test_a_page_reloaded_while_its_run_goes_on_follows_it_to_its_end_on_another_worker(
    behind_proxy: tuple[Proxy, Any, str, Path], page: Browser
) -> None:
    proxy, slow, fast_url, tool_log = behind_proxy
    page.goto(proxy.url)
    _ask(page, tool_log)
    page.reload()
    page.wait_for("!!document.querySelector('.bot .note')", timeout=30)
    while_running = _shown(page)
    _take_over(proxy, slow, fast_url)
    _answered(page)
    shown = _shown(page)
    assert while_running["questions"] == [QUESTION] and not while_running["sendable"]
    assert "still being written" in while_running["notes"][0], while_running
    assert shown["questions"] == [QUESTION]
    assert shown["answers"] == [ANSWER]
    assert shown["trace"] == ['→ look_up_order {"order_id":"A1001"}  ✓'], shown
    assert shown["errors"] == shown["notes"] == [] and shown["kept"] is None, shown
    assert shown["sendable"]
    page.reload()  # the turn is in the conversation's memory now: shown once, not followed
    page.wait_for("document.querySelector('.bot .text')?.textContent", timeout=30)
    again = _shown(page)
    assert (again["questions"], again["answers"], again["notes"]) == ([QUESTION], [ANSWER], [])
