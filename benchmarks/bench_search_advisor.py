"""The search advisor's cost per request in a known session, side by side with other trees.

    .venv/bin/python benchmarks/bench_search_advisor.py --compare /tmp/base/src --rounds 5

2,000 tools (the bfcl-v4 catalogue, ``--tools``) behind ``ToolSearchToolCallingAdvisor`` over a
``BM25ToolIndex``, one conversation already indexed; a turn is a model call that calls
``toolSearchTool`` once, then the answer. Each measured process alternates ``--turns`` turns
of that conversation with as many turns of the bare loop (``ChatClient`` with one tool, the
same script), and reports the CPU time per turn (``time.process_time``: every thread of the
process, the tool thread pool's too), medians: the advisor's part is the difference. Each
tree (this checkout's ``src`` and every ``--compare`` one) runs in a process of its own,
interleaved ``--rounds`` times with the order turned each round, and the table gives the
median over rounds with each round's ratio to the first tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("TOOL_SEARCH_DATA", ROOT / "benchmarks/data/tool-search"))


def _measure(tools: int, turns: int) -> dict[str, float]:
    """One tree's medians (ms per turn), in this process."""
    from tooluse.client import ChatClient
    from tooluse.memory import CONVERSATION_ID
    from tooluse.messages import Prompt, ToolResponseMessage
    from tooluse.search import BM25ToolIndex, ToolSearchToolCallingAdvisor
    from tooluse.search.bench import load_dataset
    from tooluse.testing import FunctionModel, chat_response, tool_call
    from tooluse.tools import FunctionToolCallback, ToolCallback

    def callback(name: str, description: str, schema: Mapping[str, Any] | None) -> ToolCallback:
        return FunctionToolCallback(
            lambda arguments: "ok",
            name=name,
            description=description,
            input_schema=dict(schema or {"type": "object", "properties": {}}),
        )

    catalogue = load_dataset(DATA / "bfcl-v4").tools[:tools]
    callbacks = [callback(t.tool_name, t.summary, t.parameters) for t in catalogue]
    search = chat_response(tool_calls=[tool_call("toolSearchTool", {"query": "weather"})])
    call = chat_response(tool_calls=[tool_call(catalogue[0].tool_name, {})])
    answer = chat_response("ok")

    def script(first: Any) -> FunctionModel:
        def respond(prompt: Prompt) -> Any:
            return answer if isinstance(prompt.messages[-1], ToolResponseMessage) else first

        return FunctionModel(respond)

    searching, bare = script(search), script(call)
    advisor = ToolSearchToolCallingAdvisor(tool_index=BM25ToolIndex())
    clients = {
        "advisor": ChatClient(searching, tools=callbacks, tool_calling_advisor=advisor),
        "bare": ChatClient(bare, tools=callbacks[:1]),
    }
    context = {CONVERSATION_ID: "known"}
    cpu: dict[str, list[float]] = {name: [] for name in clients}
    for number in range(turns + 20):  # 20 turns of warm-up: the session is indexed then
        for name, client in clients.items():
            started = time.process_time()
            client.prompt().user("weather?").context(context).call()
            if number >= 20:
                cpu[name].append((time.process_time() - started) * 1000)
        for model in (searching, bare):  # a real model keeps nothing
            model.requests.clear()
            model.responses.clear()
    advisor_ms, bare_ms = (statistics.median(cpu[name]) for name in ("advisor", "bare"))
    return {"advisor": advisor_ms, "bare": bare_ms, "part": advisor_ms - bare_ms}


def _child(source: str, tools: int, turns: int) -> dict[str, float]:
    environment = dict(os.environ, PYTHONPATH=source)
    command = [sys.executable, __file__, "--measure", "--tools", str(tools), "--turns", str(turns)]
    done = subprocess.run(
        command, env=environment, capture_output=True, text=True, check=False, timeout=1800
    )
    if done.returncode != 0:
        raise RuntimeError(f"{source}: exit {done.returncode}\n{done.stderr.strip()}")
    measured: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compare", nargs="*", default=[], help="other src/ trees")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--tools", type=int, default=2000)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(_measure(args.tools, args.turns)))
        return
    sources = [str(ROOT / "src"), *(str(Path(s).resolve()) for s in args.compare)]
    names = ["this checkout", *args.compare]
    results: dict[int, list[dict[str, float]]] = {i: [] for i in range(len(sources))}
    load = os.getloadavg()[0]
    for number in range(args.rounds):
        order = list(range(len(sources)))
        order = order[number % len(order) :] + order[: number % len(order)]
        for index in order:
            results[index].append(_child(sources[index], args.tools, args.turns))
    print(f"{args.tools} tools, {args.turns} turns of each per round, {args.rounds} rounds, ")
    print(f"load {load:.1f} before, {os.getloadavg()[0]:.1f} after (CPU ms per turn, medians)\n")
    print("| tree | advisor turn | bare turn | advisor's part | ratio per round |")
    print("|---|---:|---:|---:|---|")
    for index, name in enumerate(names):
        rows = results[index]
        ratios = ", ".join(
            f"{row['part'] / base['part']:.2f}" for row, base in zip(rows, results[0], strict=True)
        )
        cells = [statistics.median(row[key] for row in rows) for key in ("advisor", "bare", "part")]
        print(f"| {name} | {cells[0]:.2f} | {cells[1]:.2f} | {cells[2]:.2f} | {ratios} |")


if __name__ == "__main__":
    main()
