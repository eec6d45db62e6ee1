"""Driving the service's page in headless Chromium, for the page's tests.

Chromium is spoken to with the DevTools protocol over ``--remote-debugging-pipe`` (JSON
messages ending in NUL on file descriptors 3 and 4), so no websocket client is needed. The
service runs on a real port (uvicorn in a thread), since the page fetches from its origin.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn
from fastapi import FastAPI

# Debian's and Ubuntu's names, then Google's build; .ci/run installs Debian's chromium.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
CHROMIUM = next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)


class Browser:
    """One headless Chromium with one page: :meth:`goto`, :meth:`run` JavaScript, wait for a
    condition, read what the console reported."""

    def __init__(self) -> None:
        if CHROMIUM is None:
            raise RuntimeError(f"no Chromium on PATH (looked for {', '.join(CHROMIUM_NAMES)})")
        self._profile = tempfile.mkdtemp(prefix="tooluse-chromium-")
        to_browser, self._to_browser = os.pipe()
        self._from_browser, from_browser = os.pipe()

        def pipes_on_3_and_4() -> None:
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        self._process = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                # No connections of its own: a machine without internet refuses them, slowly.
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-quic",
                "--remote-debugging-pipe",
                "--window-size=1200,900",
                f"--user-data-dir={self._profile}",
                "about:blank",
            ],
            pass_fds=(3, 4),
            preexec_fn=pipes_on_3_and_4,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._next_id = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._events: list[dict[str, Any]] = []
        self._received = threading.Condition()
        self._session: str | None = None
        self._console_from = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        targets = self._send("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        attached = self._send("Target.attachToTarget", targetId=page["targetId"], flatten=True)
        self._session = attached["sessionId"]
        for domain in ("Runtime", "Page", "Log"):
            self._send(f"{domain}.enable")

    def _read(self) -> None:
        buffer = b""
        while chunk := os.read(self._from_browser, 1 << 16):
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            with self._received:
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self._events.append(message)
                self._received.notify_all()

    def _send(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        number = self._next_id
        message: dict[str, Any] = {"id": number, "method": method, "params": params}
        if self._session is not None:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        with self._received:
            if not self._received.wait_for(lambda: number in self._replies, timeout=30):
                raise TimeoutError(f"Chromium did not answer {method}")
            reply = self._replies.pop(number)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply["result"]
        return result

    def run(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        reply = self._send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 10) -> Any:
        """Waits until the expression is truthy in the page; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.run(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false after {timeout} s: {expression}")
            time.sleep(0.05)

    def goto(self, url: str) -> None:
        """Loads ``url``; returns once it has loaded (its scripts ran). The console is read
        from here on."""
        with self._received:
            self._console_from = len(self._events)
        self._loading("Page.navigate", url=url)

    def reload(self) -> None:
        self._loading("Page.reload")

    def _loading(self, method: str, **params: Any) -> None:
        with self._received:
            seen = len(self._events)
        self._send(method, **params)
        with self._received:
            if not self._received.wait_for(
                lambda: any(e["method"] == "Page.loadEventFired" for e in self._events[seen:]),
                timeout=30,
            ):
                raise TimeoutError(f"the page did not load after {method}")

    @contextlib.contextmanager
    def viewport(self, width: int, height: int) -> Iterator[None]:
        """The page laid out as on a phone screen of ``width`` x ``height`` CSS pixels, until
        the block ends."""
        self._send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=2,
            mobile=True,
        )
        try:
            yield
        finally:
            self._send("Emulation.clearDeviceMetricsOverride")

    def console_errors(self) -> list[str]:
        """What the pages reported as errors since the last :meth:`goto`: exceptions,
        ``console.error``, failed requests."""
        with self._received:
            events = self._events[self._console_from :]
        errors = []
        for event in events:
            params = event.get("params", {})
            if event["method"] == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                errors.append(details.get("exception", {}).get("description", details["text"]))
            elif event["method"] == "Runtime.consoleAPICalled" and params["type"] == "error":
                errors.append(
                    " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
                )
            elif event["method"] == "Log.entryAdded" and params["entry"]["level"] == "error":
                errors.append(f"{params['entry']['text']} {params['entry'].get('url', '')}")
        return errors

    def close(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_browser)
        self._reader.join(5)
        os.close(self._from_browser)
        shutil.rmtree(self._profile, ignore_errors=True)


@contextlib.contextmanager
def browser() -> Iterator[Browser]:
    opened = Browser()
    try:
        yield opened
    finally:
        opened.close()


@contextlib.contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """``app`` served on 127.0.0.1 (its lifespan run) in a thread; its base URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the service did not start")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        listener.close()
