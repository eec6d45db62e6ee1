"""Does the model's own search query find the tools better than the user's question?

    .venv/bin/python benchmarks/bench_search_model_queries.py   # the two cross-lingual sets
    .venv/bin/python benchmarks/bench_search_model_queries.py --dataset crosslingual/zh-bfcl-v4

With ``ToolSearchToolCallingAdvisor`` the model writes the query ``toolSearchTool`` searches
with; the dev sets' figures rank the user's question itself. For each question of a dataset
(Chinese questions over English tools by default) the local model
(``--model``, temperature 0) is given the question, the advisor's system text and
``toolSearchTool``; the query of its first call (the question itself when it makes none) is
ranked by ``HybridToolIndex`` over the dataset's catalogue. Three variants, each scored with
the dev sets' metrics (all questions, and those with several gold tools): the question as
asked, the model's query, and the model's query when the system text also says which
language the tools are described in (``--hint``). Needs the local model's weights (``make
models``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from tooluse.messages import ChatOptions, Prompt, SystemMessage, UserMessage
from tooluse.models import LocalChatModel
from tooluse.search import DEFAULT_SYSTEM_MESSAGE_SUFFIX, BM25ToolIndex, ToolSearchTool
from tooluse.search.bench import BenchQuery, Dataset, load_dataset, make_index, run_index, score

DATA = Path(__file__).parent / "data" / "tool-search"
SYSTEM = "You are a helpful assistant." + DEFAULT_SYSTEM_MESSAGE_SUFFIX
HINT = "The tools are described in English: write the query in English."
METRICS = ("recall@5", "complete@5", "recall@10")


def model_queries(model: LocalChatModel, dataset: Dataset, system: str) -> list[BenchQuery]:
    """Each question of ``dataset`` as the model would search for it."""
    search = ToolSearchTool(BM25ToolIndex()).callback  # only its definition is offered
    options = ChatOptions(temperature=0.0, max_tokens=128, tool_callbacks=(search,))
    queries = []
    for question in dataset.queries:
        started = time.perf_counter()
        prompt = Prompt([SystemMessage(text=system), UserMessage(text=question.query)], options)
        calls = model.call(prompt).generations[0].message.tool_calls
        text = question.query
        if calls:
            arguments = json.loads(calls[0].arguments or "{}")
            if isinstance(arguments, dict) and isinstance(arguments.get("query"), str):
                text = arguments["query"] or question.query
        seconds = time.perf_counter() - started
        print(f"  {seconds:5.1f} s  {question.query[:40]!r} -> {text[:80]!r}", flush=True)
        queries.append(BenchQuery(question.id, text, question.gold, question.fields))
    return queries


def report(name: str, variant: str, dataset: Dataset, queries: list[BenchQuery]) -> str:
    rankings = run_index(make_index("hybrid"), dataset.tools, queries).rankings
    several = [query for query in queries if len(query.gold) > 1]
    cells = [score(queries, rankings), score(several, rankings)]
    figures = " | ".join(f"{cell.get(m, math.nan):.3f}" for cell in cells for m in METRICS)
    return f"| {name} | {variant} | {len(queries)} / {len(several)} | {figures} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dataset",
        action="append",
        help="a dataset under benchmarks/data/tool-search (default: the cross-lingual two)",
    )
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--hint", default=HINT, help="the language hint's sentence")
    args = parser.parse_args()
    names = args.dataset or ["crosslingual/zh-bfcl-v4", "crosslingual/zh-acebench-en"]
    rows = []
    model = LocalChatModel(args.model, slots=1)
    try:
        for name in names:
            dataset = load_dataset(DATA / name)
            variants = {"the question": list(dataset.queries)}
            for variant, system in (
                ("the model's query", SYSTEM),
                ("the model's query, hint", f"{SYSTEM}\n\n{args.hint}"),
            ):
                print(f"{name}: {variant}", flush=True)
                variants[variant] = model_queries(model, dataset, system)
            rows += [report(name, v, dataset, queries) for v, queries in variants.items()]
    finally:
        model.close()
    header = " | ".join(f"{metric}{side}" for side in ("", " (several)") for metric in METRICS)
    print(f"\n| dataset | searched with | queries / several gold | {header} |")
    print("|---|---|---:|" + "---:|" * 2 * len(METRICS))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
