"""Cold-process import cost of tooluse: ``import tooluse`` and the loop's names.

    .venv/bin/python benchmarks/bench_import.py                          # this checkout
    .venv/bin/python benchmarks/bench_import.py --compare /work/main/src # side by side

Each sample is a fresh interpreter (``python -c STATEMENT``), interleaved across the source
trees compared, so machine load hits each alike. Reported per statement: the child's CPU time
(user + system, from ``resource.getrusage(RUSAGE_CHILDREN)``: robust to other jobs on the
machine) and wall time, medians, minus an empty interpreter's (``python -c pass``) cost, plus
the number of modules the statement leaves loaded. ``-X importtime`` shows where the rest goes.

Every tree is imported from its ``src`` through ``PYTHONPATH`` (this checkout's too: the
editable install's path hook would cost this one alone), and with its bytecode cached, as an
installed package has it (pip compiles on install): the children run without
``PYTHONDONTWRITEBYTECODE`` and a first, untimed import of each tree writes the ``.pyc``
files (an environment that sets ``PYTHONDONTWRITEBYTECODE=1`` would otherwise compile
every module of the package from source in every process: that was a third of the
instructions measured before).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

STATEMENTS = {
    "import tooluse": "import tooluse",
    "loop names": (
        "from tooluse import ChatClient, Prompt, Usage, tool; "
        "from tooluse.messages import AssistantMessage, ChatResponse, ToolCall"
    ),
}
_COUNT = "; import sys; print(len(sys.modules))"


THIS_SOURCE = str(Path(__file__).resolve().parents[1] / "src")


def _child(statement: str, source: str | None) -> tuple[float, float, int]:
    """CPU seconds, wall seconds and modules loaded of one fresh interpreter."""
    environment = dict(os.environ)
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    if source is not None:
        environment["PYTHONPATH"] = source
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    output = subprocess.run(
        [sys.executable, "-c", statement + _COUNT],
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, int(output.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument(
        "--compare", nargs="*", default=[], help="other src/ trees to measure alongside this one"
    )
    args = parser.parse_args()
    sources = [THIS_SOURCE, *(str(Path(s).resolve()) for s in args.compare)]
    names = ["this checkout", *args.compare]
    for source in sources:  # writes the trees' .pyc files
        for statement in STATEMENTS.values():
            _child(statement, source)
    baseline = [_child("pass", None) for _ in range(args.samples)]
    base_cpu = statistics.median(c for c, _, _ in baseline)
    base_wall = statistics.median(w for _, w, _ in baseline)
    print(f"empty interpreter: CPU {base_cpu * 1000:.0f} ms, wall {base_wall * 1000:.0f} ms")
    print("| source | statement | CPU ms (median) | wall ms (median) | modules |")
    print("|---|---|---:|---:|---:|")
    for label, statement in STATEMENTS.items():
        samples: dict[int, list[tuple[float, float, int]]] = {i: [] for i in range(len(sources))}
        for _ in range(args.samples):
            for index, source in enumerate(sources):
                samples[index].append(_child(statement, source))
        for index, name in enumerate(names):
            cpu = statistics.median(c for c, _, _ in samples[index]) - base_cpu
            wall = statistics.median(w for _, w, _ in samples[index]) - base_wall
            modules = samples[index][0][2]
            print(f"| {name} | {label} | {cpu * 1000:.0f} | {wall * 1000:.0f} | {modules} |")


if __name__ == "__main__":
    main()
