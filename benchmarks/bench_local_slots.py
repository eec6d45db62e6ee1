"""The local model's slots: the same two-stage questions through a 1-slot and a 3-slot
engine, with the prompt tokens the engine evaluated (those not read from a slot's cached
prefix), the answer latency and the engine's resident memory.

The two-stage pipeline as ``tooluse serve`` runs a local model (one fetching round, grounded
arguments, the earlier turns as a note) over the sample tools and knowledge base, at
temperature 0. Each question is asked twice; the figures are of the second round, when every
prompt has been seen once.

    .venv/bin/python benchmarks/bench_local_slots.py qwen2.5-coder-1.5b --slots 1 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench_local_model import _rss_mb  # run as a script: benchmarks/ is on the path

from tooluse.messages import ChatOptions
from tooluse.models import LocalChatModel
from tooluse.qa import QaPipeline
from tooluse.service._knowledge import KnowledgeBase
from tooluse.service._samples import SAMPLE_TOOLS

QUESTIONS = (
    "What's the weather in Paris right now?",
    "How long do I have to return an item?",
    "Where is my order A1001?",
    "积分多久过期？",
)


async def measure(name: str, slots: int, directory: Path) -> dict[str, object]:
    model = LocalChatModel(name, slots=slots)
    assert model.engine is not None
    knowledge = KnowledgeBase(directory / f"knowledge-{slots}.db", samples=True)
    knowledge.start()
    qa = QaPipeline(
        model,
        retriever=knowledge,
        tools=list(SAMPLE_TOOLS),
        router_options=ChatOptions(temperature=0),
        answer_options=ChatOptions(temperature=0),
        router_fetch_rounds=1,
        router_grounded_arguments=True,
        router_history_as_text=True,
    )
    try:
        second: list[tuple[int, int, float]] = []
        for round_ in (1, 2):
            for question in QUESTIONS:
                started = time.perf_counter()
                result = await qa.acall(question)
                seconds = time.perf_counter() - started
                usage = result.usage
                assert usage is not None
                evaluated = usage.prompt_tokens - (usage.cache_read_tokens or 0)
                print(
                    f"slots={slots} round {round_} {question!r}: {usage.prompt_tokens} prompt "
                    f"tokens, {evaluated} evaluated, {seconds:.1f} s ({result.route})",
                    flush=True,
                )
                if round_ == 2:
                    second.append((usage.prompt_tokens, evaluated, seconds))
        return {
            "slots": slots,
            "prompt_tokens": sum(row[0] for row in second),
            "evaluated_tokens": sum(row[1] for row in second),
            "median_seconds": round(statistics.median(row[2] for row in second), 1),
            "engine_rss_mb": round(_rss_mb(model.engine.pid)),
        }
    finally:
        await asyncio.to_thread(knowledge.close)
        await model.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="qwen2.5-coder-1.5b")
    parser.add_argument("--slots", type=int, nargs="+", default=[1, 3])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        for slots in args.slots:
            figures = asyncio.run(measure(args.model, slots, Path(directory)))
            print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
