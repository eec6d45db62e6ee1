"""Where a profiled server's CPU went, by part: each sample of ``py-spy record -f raw`` is
charged to the innermost frame whose file belongs to a part (the server protocol, the
middleware, routing, ...), so a part counts its own code and the library code it calls
directly, not the parts it calls.

    /tmp/spy/bin/py-spy record -p SERVER_PID -d 20 -r 200 --native -f raw -o /tmp/v1.raw
    .venv/bin/python benchmarks/profile_shares.py /tmp/v1.raw

Samples of the event loop waiting in ``epoll`` and of idle pool threads are left out.
"""

from __future__ import annotations

import argparse
from collections import Counter

IDLE = "idle"
# In order: the first part whose patterns a frame holds takes it.
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (IDLE, ("selectors.py", "epoll", "concurrent/futures/thread.py:81)")),
    ("server protocol (uvicorn, h11, socket writes)", ("uvicorn/", "h11/", "selector_events")),
    (
        "middleware",
        (
            "starlette/middleware",
            "fastapi/telemetry",
            "fastapi/_body_limit",
            "fastapi/middleware",
            "starlette/_exception_handler",
            "service/_guards",
            "fastapi/applications",
            "starlette/applications",
        ),
    ),
    (
        "request parsing (dependencies, body, auth)",
        (
            "fastapi/dependencies",
            "fastapi/_compat",
            "email/",
            "starlette/requests",
            "service/_auth",
            "starlette/datastructures",
            "json/decoder",
        ),
    ),
    ("routing", ("fastapi/routing", "starlette/routing", "starlette/_utils")),
    (
        "SSE response and JSON encoding",
        ("service/_sse", "service/_openai_api", "starlette/responses", "json/"),
    ),
    (
        "pipeline (stages, client, stream aggregation)",
        ("tooluse/qa/_pipeline", "tooluse/qa/_events", "tooluse/client", "tooluse/streaming"),
    ),
    (
        "advisors (chain, trace, router guard, RAG, tool loop)",
        (
            "tooluse/advisors",
            "qa/_trace",
            "qa/_router_guard",
            "qa/_text_history",
            "tooluse/rag",
            "qa/_gate",
            "qa/_augmenter",
            "qa/_callbacks",
            "_tracing",
            "opentelemetry",
        ),
    ),
    (
        "tool calling (manager, audit log, tool)",
        ("tooluse/calling", "tooluse/tools", "service/_samples", "sqlite3"),
    ),
    ("messages (pydantic)", ("tooluse/messages", "pydantic")),
    (
        "asyncio (tasks, futures, thread hops)",
        ("asyncio/", "_asynciomodule.c", "concurrent/futures", "threading.py", "contextlib.py"),
    ),
    ("the benchmark's fake model", ("bench_service.py", "tooluse/testing")),
)


def part_of(frame: str) -> str | None:
    return next((name for name, patterns in PARTS if any(p in frame for p in patterns)), None)


def shares(path: str) -> Counter[str]:
    """Samples per part (and ``other`` for stacks no part holds)."""
    counts: Counter[str] = Counter()
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            stack, _, samples = line.rstrip("\n").rpartition(" ")
            frames = reversed(stack.split(";"))
            part = next((p for p in map(part_of, frames) if p is not None), "other")
            counts[part] += int(samples)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("raw", help="py-spy's -f raw output")
    counts = shares(parser.parse_args().raw)
    busy = sum(counts.values()) - counts[IDLE]
    print(f"{busy} samples busy of {sum(counts.values())}")
    print("| part | samples | share |\n|---|---:|---:|")
    for part, samples in counts.most_common():
        if part != IDLE:
            print(f"| {part} | {samples} | {100 * samples / busy:.0f}% |")


if __name__ == "__main__":
    main()
