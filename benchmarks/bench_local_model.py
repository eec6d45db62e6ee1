"""A local model on this machine: engine load, first request with the QA router's tools,
the following tool-call requests (the tools prompt cached), prompt and generation tokens per
second, and the engine's resident memory.

The router's system message and the four sample tools, at temperature 0; four questions
(two English, two Chinese) that each need one call. Tokens per second are llama.cpp's own
timings of a plain answer of about 100 tokens.

    .venv/bin/python benchmarks/bench_local_model.py qwen2.5-coder-1.5b
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import urllib.request

from tooluse.messages import ChatOptions, Prompt, SystemMessage, UserMessage
from tooluse.models import LocalChatModel
from tooluse.qa import ROUTER_SYSTEM
from tooluse.service._samples import SAMPLE_TOOLS
from tooluse.tools import tool_callbacks

QUESTIONS = (
    "What's the weather in Paris right now?",
    "Where is my order A1001?",
    "北京现在几点？",
    "东京天气怎么样？",
)


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS"))
    return int(line.split()[1]) / 1024


async def measure(name: str) -> dict[str, object]:
    started = time.monotonic()
    model = LocalChatModel(name, default_options=ChatOptions(temperature=0))
    load = time.monotonic() - started
    try:
        options = ChatOptions(tool_callbacks=tuple(tool_callbacks(*SAMPLE_TOOLS)))
        latencies, calls = [], 0
        for question in QUESTIONS:
            prompt = Prompt(
                (SystemMessage(text=ROUTER_SYSTEM), UserMessage(text=question)), options
            )
            began = time.monotonic()
            response = await model.acall(prompt)
            latencies.append(time.monotonic() - began)
            calls += len(response.generations[0].message.tool_calls)
        body = {
            "model": name,
            "messages": [
                {"role": "user", "content": "Explain in about 80 words what a REST API is."}
            ],
            "temperature": 0,
            "max_tokens": 120,
        }
        engine = model.engine
        assert engine is not None  # started by the first request
        request = urllib.request.Request(
            f"{engine.base_url}/chat/completions",
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request) as reply:
            timings = json.load(reply)["timings"]
        return {
            "model": name,
            "threads": engine.threads,
            "load_s": round(load, 1),
            "first_tool_request_s": round(latencies[0], 1),
            "later_tool_requests_s": [round(latency, 1) for latency in latencies[1:]],
            "tool_calls": f"{calls}/{len(QUESTIONS)}",
            "prompt_tokens_per_s": round(timings["prompt_per_second"], 1),
            "generation_tokens_per_s": round(timings["predicted_per_second"], 1),
            "engine_rss_mb": round(_rss_mb(engine.pid)),
        }
    finally:
        model.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", metavar="MODEL", help="e.g. qwen2.5-coder-1.5b")
    for name in parser.parse_args().models:
        print(json.dumps(asyncio.run(measure(name)), ensure_ascii=False))


if __name__ == "__main__":
    main()
