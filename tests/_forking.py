"""Running a check in a forked child, for the fork-safety tests: the child kills itself after a
while, so a hang fails the test instead of stalling the suite."""

from __future__ import annotations

import json
import os
import signal
import warnings
from collections.abc import Callable
from typing import Any

_CHILD_SECONDS = 20


def in_child(check: Callable[[], Any]) -> Any:
    """``check()`` run in a forked child; its JSON result, or the test fails with the child's
    error (or its death by the alarm, if it hung)."""
    read, write = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns about forking a threaded process
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        signal.alarm(_CHILD_SECONDS)  # SIGALRM's default action ends the process
        try:
            payload, code = json.dumps({"result": check()}), 0
        except BaseException as exc:
            payload, code = json.dumps({"error": f"{type(exc).__name__}: {exc}"}), 1
        with os.fdopen(write, "w") as pipe:
            pipe.write(payload)
        os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        output = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert not os.WIFSIGNALED(status), f"the child hung and was killed ({os.WTERMSIG(status)})"
    answer = json.loads(output)
    assert "error" not in answer, answer["error"]
    return answer["result"]
