"""The child process of :class:`~tooluse.models._llama_engine.LlamaEngine`: llama.cpp's
server (``xllamacpp.Server``) on a free loopback port.

It reads its settings as one JSON line on stdin, starts the server, writes ``{"url": ...}``
as one line on stdout once the model is loaded and the port listens, then waits for stdin
to close: its parent closing the pipe, or dying, ends it, so it never outlives its owner.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    settings = json.loads(sys.stdin.readline())
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = settings["model_path"]
    params.model_alias = {settings["alias"]}
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the system picks a free port; the server reports it
    # llama.cpp divides n_ctx among the slots: each gets context_size tokens.
    params.n_parallel = settings["slots"]
    params.n_ctx = settings["context_size"] * settings["slots"]
    params.cpuparams.n_threads = settings["threads"]
    params.cpuparams_batch.n_threads = settings["threads"]
    params.use_jinja = True
    if settings["chat_template"] is not None:
        params.chat_template = settings["chat_template"]
    params.warmup = False  # a warm-up run costs seconds of start-up and buys nothing here
    server = xllamacpp.Server(params)
    sys.stdout.write(json.dumps({"url": server.listening_address}) + "\n")
    sys.stdout.flush()
    while sys.stdin.read(1 << 10):  # nothing more is sent: wait for the parent to close it
        pass
    # The server's threads hold no state worth saving: end now, without waiting on them.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
