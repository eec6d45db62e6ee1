"""``LlamaEngine``: llama.cpp's server (the ``xllamacpp`` wheel) in a child process.

A child process rather than the server inside this one: it is stopped for sure (its memory,
threads and port go with it), a forked worker or a reloading server never holds half of
it, and its logs stay out of this process's output. The child takes a free loopback port
and reports it once the model is loaded; it ends when its stdin closes, so it ends with
its owner even when the owner is killed. Only the process that started it stops it:
a forked child that inherited the engine talks to it and leaves it running.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
import threading
import time
import weakref
from typing import IO

__all__ = ["DEFAULT_SLOTS", "ENGINE_REQUIREMENT", "EngineError", "LlamaEngine", "default_threads"]

logger = logging.getLogger("tooluse.models.local")

ENGINE_REQUIREMENT = "xllamacpp==2026.10.11549"
"""The engine release this module is written and tested against (the ``local`` extra)."""

DEFAULT_SLOTS = 3
"""A local model's slots by default: one each for the two-stage pipeline's router, its
answer stage and its question rewriter (or the single chain), so that their prompts, which
alternate, each keep their cached prefix instead of evicting one another's."""

_STOP_WAIT = 10.0  # seconds a stopping engine gets before it is killed


class EngineError(RuntimeError):
    """The local engine is not installed, or did not start (the message says why)."""


def default_threads() -> int:
    """The engine's threads: 1 on a machine with 2 cores or fewer (with 2 threads on 2
    cores, generation collapsed to under 1 token/s, competing with the service's own
    work), else half the cores, leaving the rest to the service."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    return 1 if cores <= 2 else cores // 2


class LlamaEngine:
    """llama.cpp serving ``model_path`` on ``127.0.0.1`` (:attr:`base_url`: its OpenAI-
    compatible API), started and ready when the constructor returns.

    ``alias``: the model name the server answers to; ``chat_template``: Jinja text replacing
    the GGUF file's own (``None``: the file's); ``threads``: the engine's; ``slots``:
    requests it runs side by side, each in its own slot of ``context_size`` tokens that
    keeps its last prompt cached (a request goes to the slot whose cached prompt it shares
    most of, so prompts that alternate, such as a pipeline's stages, each keep their
    prefix); the KV cache takes ``slots * context_size`` tokens of memory.
    :class:`EngineError` when ``xllamacpp`` is not installed or the engine does not start
    within ``startup_timeout`` seconds (with the end of its log).
    """

    def __init__(
        self,
        model_path: str,
        *,
        alias: str,
        threads: int,
        context_size: int,
        slots: int = 1,
        chat_template: str | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        if context_size < 256:
            raise ValueError(f"context_size must be >= 256 tokens, got {context_size}")
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        if importlib.util.find_spec("xllamacpp") is None:
            raise EngineError(
                f"The local model needs the llama.cpp engine: pip install 'tooluse[local]' "
                f"(or pip install {ENGINE_REQUIREMENT})"
            )
        self.model_path = model_path
        self.threads = threads
        self.context_size = context_size
        self.slots = slots
        self._owner = os.getpid()
        self._log: collections.deque[str] = collections.deque(maxlen=40)
        started = time.monotonic()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tooluse.models._llama_child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # Its own session: Ctrl+C in a terminal reaches the owner, which stops it.
            start_new_session=True,
        )
        self._stopper = weakref.finalize(self, _stop, self._process, self._owner)
        assert self._process.stderr is not None and self._process.stdin is not None
        threading.Thread(target=_drain, args=(self._process.stderr, self._log), daemon=True).start()
        settings = {
            "model_path": model_path,
            "alias": alias,
            "threads": threads,
            "context_size": context_size,
            "slots": slots,
            "chat_template": chat_template,
        }
        try:
            self._process.stdin.write(json.dumps(settings) + "\n")
            self._process.stdin.flush()
            self.url = self._ready_url(startup_timeout)
        except BaseException:
            self.stop()
            raise
        self.load_seconds = time.monotonic() - started
        logger.info(
            "llama.cpp engine (pid %d) serves %s at %s, %d thread(s), %d slot(s) of %d "
            "tokens, loaded in %.1f s",
            self._process.pid,
            model_path,
            self.url,
            threads,
            slots,
            context_size,
            self.load_seconds,
        )

    @property
    def base_url(self) -> str:
        """The engine's OpenAI-compatible API: ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process.poll() is None

    def stop(self) -> None:
        """End the engine (its port is free when this returns); idempotent. In a process
        other than the one that started it, this does nothing."""
        self._stopper()

    def _ready_url(self, timeout: float) -> str:
        line: list[str] = []
        assert self._process.stdout is not None
        reader = threading.Thread(
            target=lambda stream: line.append(stream.readline()),
            args=(self._process.stdout,),
            daemon=True,
        )
        reader.start()
        reader.join(timeout)
        if line and line[0].strip():
            try:
                return str(json.loads(line[0])["url"])
            except (ValueError, KeyError, TypeError):
                pass
        status = self._process.poll()
        why = (
            f"it did not report ready within {timeout:g} s"
            if status is None and not line
            else f"it ended with status {status}"
            if status is not None
            else f"it reported {line[0].strip()[:200]!r}"
        )
        time.sleep(0.2)  # the last lines of its log
        log = "\n".join(self._log)
        raise EngineError(
            f"The llama.cpp engine for {self.model_path} did not start: {why}"
            + (f"; its log ends with:\n{log}" if log else "")
        )

    def __repr__(self) -> str:
        return f"LlamaEngine(model_path={self.model_path!r}, url={getattr(self, 'url', None)!r})"


def _drain(stream: IO[str], tail: collections.deque[str]) -> None:
    """Read the engine's log as it comes (so its pipe never fills): the last lines are kept
    for an error message, every line goes to the debug log."""
    for line in stream:
        line = line.rstrip()
        tail.append(line)
        logger.debug("engine: %s", line)


def _stop(process: subprocess.Popen[str], owner: int) -> None:
    if os.getpid() != owner:
        return
    if process.stdin is not None:
        # The child's signal to end; one that ended already leaves a broken pipe to close.
        with contextlib.suppress(BrokenPipeError):
            process.stdin.close()
    try:
        process.wait(_STOP_WAIT / 2)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(_STOP_WAIT / 2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
