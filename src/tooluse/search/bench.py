"""``tooluse bench search``: build an index over a benchmark catalogue, rank every query, write a
run file that the dataset's ``evaluate.py`` scores, and print the metrics.

A dataset directory holds ``tools.jsonl`` (``name``, ``description``, ``parameters``,
``category``, optional ``original_name``) and ``queries.jsonl`` (``id``, ``query``, ``gold``,
optional ``lang`` and ``category``), the format of ``benchmarks/data/tool-search/``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import resource
import statistics
import sys
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tooluse.search._sessions import SessionToolIndex
from tooluse.search._types import ToolIndex, ToolReference, ToolSearchRequest, check_count

if TYPE_CHECKING:
    from tooluse.search._advisor import ToolSearchToolCallingAdvisor

__all__ = [
    "BenchQuery",
    "Dataset",
    "IndexRun",
    "add_arguments",
    "complete_within",
    "load_dataset",
    "load_tools",
    "make_index",
    "offered_by_turn",
    "run",
    "run_index",
    "score",
    "write_run",
]

INDEX_KINDS = ("regex", "bm25", "vector", "hybrid")
RANKED_DEPTH = 20  # evaluate.py wants at least 10 names per query
SESSION = "bench"
KS = (1, 3, 5, 10)


@dataclasses.dataclass(frozen=True, slots=True)
class BenchQuery:
    id: str
    query: str
    gold: tuple[str, ...]
    fields: Mapping[str, Any]  # every other key of the line (lang, category, ...)


@dataclasses.dataclass(frozen=True, slots=True)
class Dataset:
    path: Path
    tools: tuple[ToolReference, ...]
    queries: tuple[BenchQuery, ...]


def _jsonl(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"{path}:{number}: not UTF-8 ({exc})") from exc
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc})") from exc
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{number}: expected a JSON object")
            yield number, row


def _tool(path: Path, number: int, row: dict[str, Any]) -> ToolReference:
    name = row.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{path}:{number}: 'name' must be a non-blank string")
    description = row.get("description") or ""
    # A renamed tool's real name (e.g. a Chinese name) is part of what users would search.
    original = row.get("original_name")
    if isinstance(original, str) and original and original != name:
        description = f"{original}: {description}" if description else original
    parameters = row.get("parameters")
    category = row.get("category")
    return ToolReference(
        name,
        None,
        str(description),
        parameters if isinstance(parameters, dict) else None,
        str(category) if category is not None else None,
    )


def load_tools(path: str | Path) -> tuple[ToolReference, ...]:
    """The tools of a ``tools.jsonl`` file (one JSON object per line: name, description,
    parameters, category, optional original_name)."""
    path = Path(path)
    tools = []
    names: dict[str, int] = {}  # name -> its line
    for number, row in _jsonl(path):
        tool = _tool(path, number, row)
        if tool.tool_name in names:  # an index keeps one tool of a name: which is gold?
            raise ValueError(
                f"{path}:{number}: the name {tool.tool_name!r} is already on line "
                f"{names[tool.tool_name]}"
            )
        names[tool.tool_name] = number
        tools.append(tool)
    return tuple(tools)


def load_dataset(directory: str | Path) -> Dataset:
    path = Path(directory)
    for required in ("tools.jsonl", "queries.jsonl"):
        if not (path / required).is_file():
            raise FileNotFoundError(f"{path} has no {required}; expected a tool-search dataset")
    tools = load_tools(path / "tools.jsonl")
    names = {tool.tool_name for tool in tools}
    queries = []
    ids: dict[str, int] = {}  # id -> its line
    for number, row in _jsonl(path / "queries.jsonl"):
        where = f"{path / 'queries.jsonl'}:{number}"
        if not isinstance(row.get("id"), str) or not isinstance(row.get("query"), str):
            raise ValueError(f"{where}: 'id' and 'query' must be strings")
        if row["id"] in ids:  # rankings are keyed by id: both would get the last one's
            raise ValueError(f"{where}: the id {row['id']!r} is already on line {ids[row['id']]}")
        ids[row["id"]] = number
        gold = row.get("gold")
        if not isinstance(gold, list) or not gold or not all(isinstance(g, str) for g in gold):
            raise ValueError(f"{where}: 'gold' must be a non-empty list of tool names")
        unknown = [name for name in gold if name not in names]
        if unknown:
            raise ValueError(f"{where}: gold tools not in tools.jsonl: {unknown}")
        extra = {k: v for k, v in row.items() if k not in ("id", "query", "gold")}
        queries.append(BenchQuery(row["id"], row["query"], tuple(gold), extra))
    if not tools or not queries:
        raise ValueError(f"{path}: a dataset needs at least one tool and one query")
    return Dataset(path, tools, tuple(queries))


@dataclasses.dataclass(frozen=True, slots=True)
class IndexRun:
    rankings: dict[str, list[str]]
    build_seconds: float
    latencies_ms: list[float]
    peak_rss_mb: float

    def latency_percentile(self, percentile: float) -> float:
        ordered = sorted(self.latencies_ms)
        if not ordered:
            return math.nan
        return ordered[min(len(ordered) - 1, math.ceil(percentile / 100 * len(ordered)) - 1)]


def run_index(
    index: ToolIndex,
    tools: Sequence[ToolReference],
    queries: Sequence[BenchQuery],
    *,
    depth: int = RANKED_DEPTH,
) -> IndexRun:
    """Index ``tools`` and build the index (timed, embeddings included), then rank every query
    (each search timed)."""
    index.clear_index(SESSION)
    started = time.perf_counter()
    index.index_tools(SESSION, tools)
    if isinstance(index, SessionToolIndex):
        index.build(SESSION)  # embeddings included
    else:
        index.search(ToolSearchRequest(SESSION, "", max_results=1))
    build_seconds = time.perf_counter() - started
    rankings: dict[str, list[str]] = {}
    latencies: list[float] = []
    for query in queries:
        started = time.perf_counter()
        response = index.search(ToolSearchRequest(SESSION, query.query, max_results=depth))
        latencies.append((time.perf_counter() - started) * 1000.0)
        rankings[query.id] = response.tool_names
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return IndexRun(rankings, build_seconds, latencies, peak_kb / 1024.0)


def score(queries: Sequence[BenchQuery], rankings: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """The metrics of ``evaluate.py``, macro-averaged over queries (missing ranking = empty)."""
    totals: dict[str, float] = {}
    for query in queries:
        for key, value in _score_one(rankings.get(query.id, []), query.gold).items():
            totals[key] = totals.get(key, 0.0) + value
    return {key: value / len(queries) for key, value in totals.items()} if queries else {}


def _score_one(ranked: Sequence[str], gold_names: Sequence[str]) -> dict[str, float]:
    gold = set(gold_names)
    metrics: dict[str, float] = {}
    for k in KS:
        hits = len(gold & set(ranked[:k]))
        metrics[f"recall@{k}"] = hits / len(gold)
        metrics[f"complete@{k}"] = 1.0 if hits == len(gold) else 0.0
    dcg = sum(1 / math.log2(rank + 2) for rank, name in enumerate(ranked[:10]) if name in gold)
    ideal = sum(1 / math.log2(rank + 2) for rank in range(min(len(gold), 10)))
    metrics["ndcg@10"] = dcg / ideal
    metrics["mrr"] = next((1 / (rank + 1) for rank, name in enumerate(ranked) if name in gold), 0.0)
    return metrics


def offered_by_turn(
    advisor: ToolSearchToolCallingAdvisor,
    conversations: Iterable[Sequence[str]],
    rankings: Mapping[str, Sequence[str]],
    k: int,
    attached: Collection[str],
) -> dict[str, list[str]]:
    """The tools ``advisor`` offers at each turn of ``conversations`` (each the ids of its
    queries, in turn order) when every turn searches once and finds the top ``k`` of its
    ranking: its own and the earlier turns' found tools, as the advisor's
    :meth:`~ToolSearchToolCallingAdvisor.offered_tool_names` keeps them (cap, eviction
    order, ``accumulate``) with a memory that replays every earlier turn."""
    check_count("k", k)
    if advisor.defer_loading:
        # It loads every found tool while its search result is in the conversation: no cap.
        raise ValueError(
            "offered_by_turn counts what an advisor offers without deferred loading; this one "
            "has defer_loading=True"
        )
    offered: dict[str, list[str]] = {}
    for turns in conversations:
        rounds: list[list[str]] = []
        for query_id in turns:
            if query_id in offered:
                raise ValueError(f"query {query_id!r} is a turn of more than one conversation")
            rounds.append(list(rankings.get(query_id, ())[:k]))
            offered[query_id] = advisor.offered_tool_names(rounds, attached)
    return offered


def complete_within(queries: Sequence[BenchQuery], offered: Mapping[str, Collection[str]]) -> float:
    """The share of ``queries`` whose gold tools are all in their ``offered`` set (a query
    with none offered counts as incomplete)."""
    if not queries:
        raise ValueError("complete_within needs at least one query")
    return statistics.fmean(set(q.gold) <= set(offered.get(q.id, ())) for q in queries)


def write_run(path: str | Path, rankings: Mapping[str, Sequence[str]]) -> None:
    """One ``{"id", "ranked"}`` line per query, the format ``evaluate.py --run`` reads."""
    with Path(path).open("w", encoding="utf-8") as out:
        for query_id, ranked in rankings.items():
            out.write(json.dumps({"id": query_id, "ranked": list(ranked)}, ensure_ascii=False))
            out.write("\n")


def make_index(kind: str) -> ToolIndex:
    """The index of ``kind`` with its defaults (the vector indexes use the default model)."""
    from tooluse.search import BM25ToolIndex, HybridToolIndex, RegexToolIndex, VectorToolIndex

    factories: dict[str, Callable[[], ToolIndex]] = {
        "regex": RegexToolIndex,
        "bm25": BM25ToolIndex,
        "vector": VectorToolIndex,
        "hybrid": HybridToolIndex,
    }
    if kind not in factories:
        raise ValueError(f"unknown index {kind!r}; choose one of {', '.join(INDEX_KINDS)}")
    return factories[kind]()


METRIC_COLUMNS = (
    ("R@1", "recall@1"),
    ("R@3", "recall@3"),
    ("R@5", "recall@5"),
    ("R@10", "recall@10"),
    ("All@5", "complete@5"),
    ("NDCG@10", "ndcg@10"),
    ("MRR", "mrr"),
)


def format_report(name: str, kind: str, metrics: Mapping[str, float], result: IndexRun) -> str:
    header = " | ".join(label for label, _ in METRIC_COLUMNS)
    values = " | ".join(f"{metrics[key]:.3f}" for _, key in METRIC_COLUMNS)
    return (
        f"| dataset | index | {header} | build s | p50 ms | p99 ms | peak RSS MB |\n"
        f"| {name} | {kind} | {values} | {result.build_seconds:.2f} | "
        f"{result.latency_percentile(50):.2f} | {result.latency_percentile(99):.2f} | "
        f"{result.peak_rss_mb:.0f} |"
    )


_SEARCH_DESCRIPTION = (
    "Build one tool-search index over a benchmark dataset, rank every query, write a run file "
    "that the dataset's evaluate.py scores, and print the metrics. The dataset directory holds "
    "tools.jsonl (name, description, parameters, category, optional original_name) and "
    "queries.jsonl (id, query, gold, optional lang and category), the format of "
    "benchmarks/data/tool-search/."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``tooluse bench search ...`` (``bench`` has one benchmark per subcommand)."""
    benchmarks = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    search = benchmarks.add_parser(
        "search",
        help="rank a tool-search dataset with one index, write a run file, print the metrics",
        description=_SEARCH_DESCRIPTION,
    )
    search.add_argument(
        "--dataset", required=True, help="directory with tools.jsonl and queries.jsonl"
    )
    search.add_argument("--index", choices=INDEX_KINDS, default="hybrid", help="the index to build")
    search.add_argument("--out", help="run file to write (default: run-<index>.jsonl)")
    search.add_argument("--json", action="store_true", help="print the metrics as JSON")


def _unwritable(path: Path) -> str | None:
    """Why a run file cannot be written at ``path``; None when it can be tried."""
    if path.is_dir():
        return "it is a directory"
    if not path.parent.is_dir():
        return f"no directory {str(path.parent)!r}"
    return None


def run(args: argparse.Namespace) -> int:
    try:
        dataset = load_dataset(args.dataset)
    except (ValueError, OSError) as exc:  # not a dataset, a line that is not JSON, ...
        print(f"tooluse bench search: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out or f"run-{args.index}.jsonl")
    unwritable = _unwritable(out)  # before the run, which can take minutes (embedding)
    if unwritable is not None:
        print(f"tooluse bench search: --out {out}: {unwritable}", file=sys.stderr)
        return 2
    index = make_index(args.index)
    result = run_index(index, dataset.tools, dataset.queries)
    try:
        write_run(out, result.rankings)
    except OSError as exc:
        print(f"tooluse bench search: --out {out}: {exc}", file=sys.stderr)
        return 2
    metrics = score(dataset.queries, result.rankings)
    if args.json:
        print(
            json.dumps(
                {
                    "dataset": str(dataset.path),
                    "index": args.index,
                    "tools": len(dataset.tools),
                    "queries": len(dataset.queries),
                    **{key: round(value, 4) for key, value in metrics.items()},
                    "build_seconds": round(result.build_seconds, 3),
                    "latency_p50_ms": round(result.latency_percentile(50), 3),
                    "latency_p99_ms": round(result.latency_percentile(99), 3),
                    "latency_mean_ms": round(statistics.fmean(result.latencies_ms), 3),
                    "peak_rss_mb": round(result.peak_rss_mb, 1),
                    "run_file": str(out),
                }
            )
        )
    else:
        print(f"{dataset.path}: {len(dataset.tools)} tools, {len(dataset.queries)} queries")
        print(format_report(str(dataset.path), args.index, metrics, result))
        print(f"run file: {out}", file=sys.stderr)
    return 0
