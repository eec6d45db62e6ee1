"""Loop overhead per tool round: tooluse side by side with five peer frameworks (SPEC 12).

Each framework's script in ``benchmarks/peers/`` runs the same task (a tool ``add(a, b)``, a
zero-latency scripted model native to that framework) and prints one JSON line per scenario.
This driver runs them as subprocesses, ours with this repository's interpreter and the peers
with the peer venv's (``benchmarks/peers/README.md`` says how to create it), interleaved in
rounds with a rotating order so that machine drift hits everyone equally, then prints a table:
the median over rounds of each script's per-run wall-time median, p90 and CPU-time median (the
process's CPU time, all threads: less sensitive to other jobs on the machine), and the ratio to
ours.

    .venv/bin/python benchmarks/bench_loop_peers.py --rounds 5 --iterations 200

Scenarios: A = one tool round + final answer (2 model calls, 1 tool call);
B = five rounds of three parallel calls + answer (6 model calls, 15 tool calls).
Each is run with ``add`` as a plain ``def`` (most frameworks run it in a worker thread) and as
``async def`` (no thread hop; smolagents has no async form and is left out there).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PEERS_DIR = Path(__file__).resolve().parent / "peers"
OURS = "tooluse"
SCENARIOS = ("A", "B")
TOOL_KINDS = ("sync", "async")


@dataclasses.dataclass(frozen=True)
class Framework:
    name: str
    script: str
    peer: bool  # runs under the peer venv's interpreter
    # ours from another source tree (--compare): its src on PYTHONPATH, its peers/ scripts
    source: Path | None = None


FRAMEWORKS = (
    Framework(OURS, "tooluse_loop.py", peer=False),
    Framework("tooluse-inline", "tooluse_inline_loop.py", peer=False),
    Framework("haystack", "haystack_loop.py", peer=True),
    Framework("pydantic-ai", "pydantic_ai_loop.py", peer=True),
    Framework("langchain", "langchain_loop.py", peer=True),
    Framework("openai-agents", "openai_agents_loop.py", peer=True),
    Framework("smolagents", "smolagents_loop.py", peer=True),
)


def _default_peer_python() -> str:
    return os.environ.get(
        "PEER_PYTHON", str(REPO.parent / "peerbench" / ".venv" / "bin" / "python")
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--iterations", type=int, default=200, help="timed runs per script call")
    parser.add_argument("--warmup", type=int, default=30, help="untimed runs per script call")
    parser.add_argument(
        "--only",
        action="append",
        choices=[f.name for f in FRAMEWORKS],
        help="run only these frameworks (repeatable; ratios need ours among them)",
    )
    parser.add_argument(
        "--our-python",
        default=sys.executable,
        help="interpreter with tooluse installed (default: this one)",
    )
    parser.add_argument(
        "--peer-python",
        default=_default_peer_python(),
        help="interpreter of the peer venv (default: $PEER_PYTHON or "
        "../peerbench/.venv/bin/python next to the repository)",
    )
    parser.add_argument(
        "--tool",
        action="append",
        choices=TOOL_KINDS,
        help="declare add as a plain def (sync) or async def; repeatable; default both",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        action="append",
        default=[],
        help="another checkout's src/ (e.g. a worktree of main): its tooluse scripts run too, "
        "as NAME@TREE, with its src and its benchmarks/peers/ scripts",
    )
    parser.add_argument("--json", type=Path, help="also write every raw result line here")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.iterations < 1 or args.warmup < 0:
        parser.error("--rounds and --iterations must be >= 1, --warmup >= 0")
    return args


def run_script(
    framework: Framework, python: str, tool_kind: str, args: argparse.Namespace
) -> list[dict[str, Any]]:
    scripts = (
        PEERS_DIR
        if framework.source is None
        else framework.source.parent / PEERS_DIR.relative_to(REPO)
    )
    environment = dict(os.environ)
    if framework.source is not None:
        environment["PYTHONPATH"] = str(framework.source)
    command = [
        python,
        str(scripts / framework.script),
        "--tool",
        tool_kind,
        "--warmup",
        str(args.warmup),
        "--iterations",
        str(args.iterations),
    ]
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=1800, check=False, env=environment
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"{framework.name} failed (exit {completed.returncode}): {' '.join(command)}\n"
            f"{completed.stderr.strip()}"
        )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{framework.name} printed no result: {completed.stdout!r}")
    return [json.loads(line) for line in lines]


def summarise(results: list[dict[str, Any]], names: list[str], tool_kind: str) -> str:
    """A Markdown table for one tool kind: medians over rounds, p90, ratios to ours, target."""
    timed: dict[tuple[str, str], list[dict[str, Any]]] = {}
    probes: dict[str, bool] = {}
    versions: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for row in results:
        if row["tool"] != tool_kind:
            continue
        name = row["framework"]
        versions[name] = row["version"]
        if "skipped" in row:
            skipped[name] = row["skipped"]
        elif row["scenario"] == "probe":
            probes[name] = bool(row["validates_arguments"])
        else:
            timed.setdefault((name, row["scenario"]), []).append(row)
    ran = [n for n in names if n not in skipped]

    def median_of(name: str, scenario: str, key: str = "per_run_ms_median") -> float:
        return float(statistics.median(r[key] for r in timed[(name, scenario)]))

    lines = [
        f"Tool declared as {'a plain def' if tool_kind == 'sync' else 'async def'}"
        " (ms per run: wall median, wall p90, CPU median; ratio = wall median / ours):",
        "",
        "| framework | version | validates args | A wall | A p90 | A CPU | A vs ours "
        "| B wall | B p90 | B CPU | B vs ours |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ours = {s: median_of(OURS, s) for s in SCENARIOS} if OURS in ran else {}
    for name in ran:
        cells = [name, versions[name], "yes" if probes[name] else "**no**"]
        for scenario in SCENARIOS:
            median = median_of(name, scenario)
            cells += [
                f"{median:.2f}",
                f"{median_of(name, scenario, 'p90'):.2f}",
                f"{median_of(name, scenario, 'cpu_ms_median'):.2f}",
                f"{median / ours[scenario]:.1f}x" if ours else "-",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.extend(f"\n{name}: skipped ({reason})." for name, reason in skipped.items())
    ours_too = {f.name for f in FRAMEWORKS if not f.peer}  # ours with an option set
    peers = [n for n in ran if n.partition("@")[0] not in ours_too]  # (@: another tree)
    if ours and peers:
        for scenario in SCENARIOS:
            fastest = min(peers, key=lambda n: median_of(n, scenario))
            target = median_of(fastest, scenario) / 2
            verdict = "met" if ours[scenario] <= target else "NOT met"
            lines.append(
                f"\nScenario {scenario}: fastest peer {fastest} {median_of(fastest, scenario):.2f}"
                f" ms; target (half) {target:.2f} ms; ours {ours[scenario]:.2f} ms: {verdict}."
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    chosen = [f for f in FRAMEWORKS if not args.only or f.name in args.only]
    chosen += [
        dataclasses.replace(f, name=f"{f.name}@{tree.parent.name}", source=tree.resolve())
        for tree in args.compare
        for f in chosen
        if not f.peer
    ]
    tool_kinds = args.tool or list(TOOL_KINDS)
    for python in {args.our_python, *(args.peer_python for f in chosen if f.peer)}:
        if not Path(python).exists():
            print(
                f"interpreter not found: {python} (see benchmarks/peers/README.md)", file=sys.stderr
            )
            return 2
    load_before = os.getloadavg()[0]
    results: list[dict[str, Any]] = []
    jobs = [(f, kind) for kind in tool_kinds for f in chosen]
    for round_index in range(args.rounds):
        # Rotate the order each round so no framework always runs first (or last).
        shift = round_index % len(jobs)
        for framework, kind in jobs[shift:] + jobs[:shift]:
            python = args.peer_python if framework.peer else args.our_python
            rows = run_script(framework, python, kind, args)
            for row in rows:  # a compared tree's script names itself as ours does
                row["framework"] = framework.name
            results.extend(rows)
            medians = ", ".join(
                f"{r['scenario']} {r['per_run_ms_median']:.2f} ms"
                for r in rows
                if "per_run_ms_median" in r
            )
            print(
                f"round {round_index + 1}/{args.rounds} {framework.name} ({kind} tool): "
                f"{medians or 'skipped'}",
                file=sys.stderr,
                flush=True,
            )
    if args.json:
        args.json.write_text("\n".join(json.dumps(r) for r in results) + "\n")
    print(
        f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs; "
        f"{args.rounds} rounds x {args.iterations} runs (+{args.warmup} warm-up) per framework; "
        f"1-min load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    for kind in tool_kinds:
        print()
        print(summarise(results, [f.name for f in chosen], kind))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
