"""Does the local model's translation of a question into the catalogue's language find the tools?

    nice -n 15 .venv/bin/python benchmarks/bench_search_translate.py translate --model MODEL
    .venv/bin/python benchmarks/bench_search_translate.py score --model MODEL

``translate``: for each question of the datasets (default: the cross-lingual dev sets,
Chinese questions, simplified and traditional, over English tools) that
``HybridToolIndex(query_translator=...)`` would translate (one its tools can match less than
half of: all of those sets', 21 of bfcl-v4's), the local model (``--model``, temperature 0, one
thread, one slot) is asked to translate it into English: by default (``--prompt system``)
with ``QueryTranslator``'s instruction as the system text and the question as the user's
message; ``--prompt spring``: Spring AI's ``TranslationQueryTransformer`` prompt, as one user
message (the 0.5B repeated its instructions back). Each translation is cached on disk
(``--cache``, keyed by model, prompt and question) with its cost: wall seconds, the engine's
CPU seconds, tokens in and out; a rerun translates only what is missing.

``score``: ranks each question with ``HybridToolIndex`` over its catalogue as (a question
not translated: as asked)

- ``question``: the question as asked (today's default),
- ``translation``: the translation alone,
- ``question + translation``: one query, the question followed by its translation,
- ``rrf(question, translation)``: both ranked, fused by reciprocal rank (k 60, equal weights),
- ``source_query``: the English original of the question (the ceiling; the cross-lingual
  sets),
- ``HybridToolIndex(query_translator)``: the library's path, its ``QueryTranslator``'s model
  answering with the cached translations (the same figures as ``question + translation``),

and prints R@1 / R@5 / complete@5 / complete@10 of all questions and of those with several
gold tools, then the translations' cost (p50 / p90 / max). Needs the local model's weights
(``make models``) for ``translate`` only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tooluse.messages import ChatOptions, Message, Prompt, SystemMessage, UserMessage
from tooluse.models import LocalChatModel
from tooluse.search import HybridToolIndex, QueryTranslator
from tooluse.search._translate import DEFAULT_INSTRUCTION
from tooluse.search.bench import BenchQuery, Dataset, load_dataset, make_index, run_index, score
from tooluse.testing import FunctionModel

DATA = Path(__file__).parent / "data" / "tool-search"
DATASETS = (
    "crosslingual/zh-bfcl-v4",
    "crosslingual/zh-acebench-en",
    "crosslingual/zh-tw-bfcl-v4",
    "crosslingual/zh-tw-acebench-en",
)
CACHE = Path.home() / ".cache" / "tooluse" / "bench-translations.jsonl"
# (system text, user message template) by name.
PROMPTS: dict[str, tuple[str | None, str]] = {
    # Spring AI's TranslationQueryTransformer default prompt, targetLanguage filled in, as one
    # user message (as its ChatClient sends it).
    "spring": (
        None,
        "Given a user query, translate it to English.\n"
        "If the query is already in English, return it unchanged.\n"
        "If you don't know the language of the query, return it unchanged.\n"
        "Do not add explanations nor any other text.\n\n"
        "Original query: {query}\n\n"
        "Translated query:\n",
    ),
    # QueryTranslator's: the instruction as the system text and the question alone as the
    # user's message (the 0.5B echoed the instructions of the one-message form).
    "system": (DEFAULT_INSTRUCTION.replace("{language}", "English"), "{query}"),
}
MAX_TOKENS = 384  # the longest question (500 characters of Chinese) takes about 250 in English
RRF_K = 60.0
METRICS = ("recall@1", "recall@5", "complete@5", "complete@10")


def cache_key(model: str, prompt: str, question: str) -> str:
    system, user = PROMPTS[prompt]
    return hashlib.sha256(f"{model}\0{system}\0{user}\0{question}".encode()).hexdigest()


def prompt_of(prompt: str, question: str, options: ChatOptions) -> Prompt:
    system, user = PROMPTS[prompt]
    messages: list[Message] = [SystemMessage(text=system)] if system is not None else []
    return Prompt([*messages, UserMessage(text=user.format(query=question))], options)


def load_cache(path: Path) -> dict[str, dict[str, object]]:
    if not path.is_file():
        return {}
    entries = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not JSON ({exc})") from exc
        entries[entry["key"]] = entry
    return entries


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc (the engine runs in a child process)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def asked(dataset: Dataset) -> set[str]:
    """The questions ``HybridToolIndex(query_translator=...)`` asks its model to translate:
    those its tools can match less than half of (all of a cross-lingual set's)."""
    questions: set[str] = set()

    def record(prompt: Prompt) -> str:
        question = prompt.messages[-1]
        assert isinstance(question, UserMessage)
        questions.add(question.text)
        return "?"  # any translation: only the questions asked are kept

    index = HybridToolIndex(query_translator=QueryTranslator(FunctionModel(record, keep=0)))
    run_index(index, dataset.tools, dataset.queries)
    return questions


def translate(model_name: str, prompt: str, names: Sequence[str], cache_path: Path) -> None:
    cache = load_cache(cache_path)
    questions = {q for name in names for q in asked(load_dataset(DATA / name))}
    missing = sorted(q for q in questions if cache_key(model_name, prompt, q) not in cache)
    print(f"{len(questions)} questions, {len(missing)} to translate", flush=True)
    if not missing:
        return
    model = LocalChatModel(model_name, threads=1, slots=1, context_size=4096)
    assert model.engine is not None
    options = ChatOptions(temperature=0.0, max_tokens=MAX_TOKENS)
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with cache_path.open("a", encoding="utf-8") as out:
            for number, question in enumerate(missing, 1):
                cpu = process_cpu_seconds(model.engine.pid)
                started = time.perf_counter()
                response = model.call(prompt_of(prompt, question, options))
                wall = time.perf_counter() - started
                cpu = process_cpu_seconds(model.engine.pid) - cpu
                usage = response.usage
                text = response.generations[0].message.text or ""
                entry = {
                    "key": cache_key(model_name, prompt, question),
                    "model": model_name,
                    "prompt": prompt,
                    "question": question,
                    "translation": text,
                    "wall_s": round(wall, 3),
                    "cpu_s": round(cpu, 3),
                    "tokens_in": usage.prompt_tokens if usage else None,
                    "tokens_out": usage.completion_tokens if usage else None,
                }
                out.write(json.dumps(entry, ensure_ascii=False) + "\n")
                out.flush()
                print(f"{number:4} {wall:5.1f} s  {question[:30]!r} -> {text[:70]!r}", flush=True)
    finally:
        model.close()


def rrf(*rankings: Sequence[str]) -> list[str]:
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, name in enumerate(ranking):
            fused[name] = fused.get(name, 0.0) + 1.0 / (RRF_K + rank + 1)
    return sorted(fused, key=lambda name: -fused[name])


def rankings_of(dataset: Dataset, texts: Mapping[str, str]) -> dict[str, list[str]]:
    queries = [BenchQuery(q.id, texts[q.id], q.gold, q.fields) for q in dataset.queries]
    return run_index(make_index("hybrid"), dataset.tools, queries).rankings


def row(label: str, queries: Sequence[BenchQuery], rankings: Mapping[str, Sequence[str]]) -> str:
    several = [query for query in queries if len(query.gold) > 1]
    cells = [score(queries, rankings), score(several, rankings)]
    figures = " | ".join(f"{cell.get(m, math.nan):.3f}" for cell in cells for m in METRICS)
    return f"| | {label} | {figures} |"


def percentiles(values: Sequence[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]
    return f"{statistics.median(ordered):.2f} / {p90:.2f} / {ordered[-1]:.2f}"


def translated_by_index(
    dataset: Dataset, translations: Mapping[str, str], model_name: str
) -> dict[str, list[str]]:
    """The questions ranked by ``HybridToolIndex(query_translator=...)``, its model answering
    with the cached translations: the figures of the library's own path."""

    def answer(prompt: Prompt) -> str:
        question = prompt.messages[-1]
        assert isinstance(question, UserMessage)
        return translations[question.text or ""]

    translator = QueryTranslator(FunctionModel(answer, keep=0), "English")
    if translator.instruction != PROMPTS["system"][0]:
        raise SystemExit(f"QueryTranslator's instruction is not the cached {model_name}'s")
    index = HybridToolIndex(query_translator=translator)
    return run_index(index, dataset.tools, dataset.queries).rankings


def score_all(model_name: str, prompt: str, names: Sequence[str], cache_path: Path) -> None:
    cache = load_cache(cache_path)
    header = " | ".join(f"{metric}{side}" for side in ("", " (several)") for metric in METRICS)
    print(f"| dataset | searched with | {header} |")
    print("|---|---|" + "---:|" * 2 * len(METRICS))
    used: dict[str, dict[str, object]] = {}
    for name in names:
        dataset = load_dataset(DATA / name)
        keys = {question: cache_key(model_name, prompt, question) for question in asked(dataset)}
        if any(key not in cache for key in keys.values()):
            raise SystemExit(
                f"{name}: translations missing; run `translate --model {model_name} "
                f"--prompt {prompt}`"
            )
        used.update((key, cache[key]) for key in keys.values())
        # A question not asked about, or answered with nothing, is searched as asked, as
        # QueryTranslator leaves it.
        translated = {
            q.id: str(cache[keys[q.query]]["translation"]).strip() if q.query in keys else ""
            for q in dataset.queries
        }
        question = rankings_of(dataset, {q.id: q.query for q in dataset.queries})
        translation = rankings_of(
            dataset, {q.id: translated[q.id] or q.query for q in dataset.queries}
        )
        variants = {
            "question": question,
            "translation": translation,
            "question + translation": rankings_of(
                dataset,
                {q.id: f"{q.query}\n{translated[q.id]}".strip() for q in dataset.queries},
            ),
            "rrf(question, translation)": {
                q.id: rrf(question[q.id], translation[q.id]) if translated[q.id] else question[q.id]
                for q in dataset.queries
            },
        }
        if all("source_query" in q.fields for q in dataset.queries):
            variants["source_query (ceiling)"] = rankings_of(
                dataset, {q.id: str(q.fields["source_query"]) for q in dataset.queries}
            )
        if prompt == "system":
            by_question = {q: str(cache[key]["translation"]) for q, key in keys.items()}
            variants["HybridToolIndex(query_translator)"] = translated_by_index(
                dataset, by_question, model_name
            )
        several = sum(len(q.gold) > 1 for q in dataset.queries)
        print(
            f"| {name} ({len(dataset.queries)} / {several}, {len(keys)} translated) | | "
            + "| " * 2 * len(METRICS)
        )
        for label, rankings in variants.items():
            print(row(label, dataset.queries, rankings))
    print(f"\n{model_name}, prompt {prompt!r}, {len(used)} translations, p50 / p90 / max:")
    for field in ("wall_s", "cpu_s", "tokens_in", "tokens_out"):
        values = [entry[field] for entry in used.values()]
        print(f"  {field}: {percentiles([float(v) for v in values if isinstance(v, int | float)])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("translate", "score"))
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--dataset", action="append", help="default: the four cross-lingual sets")
    parser.add_argument("--prompt", choices=sorted(PROMPTS), default="system")
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args()
    names = args.dataset or list(DATASETS)
    if args.step == "translate":
        translate(args.model, args.prompt, names, args.cache)
    else:
        score_all(args.model, args.prompt, names, args.cache)


if __name__ == "__main__":
    main()
