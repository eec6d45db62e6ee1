"""What the provider adapters add to a model call (SPEC 12: no repeated schema work on the
hot path).

1. Request building (``OpenAIChatModel`` / ``AnthropicChatModel`` turning a ``Prompt`` into
   SDK parameters: messages, aliases, tool schemas) for 1, 20 and 100 tools (a fifth of them
   with dotted names, so aliasing runs) and a 10-message history; OpenAI plain and strict. The
   first strict request of a catalogue (shaping every schema) is measured apart from the
   following ones (cached).
2. Response translation: a completion with 3 tool calls; a streamed answer of 40 text chunks
   and 3 calls in fragments (per chunk, SDK objects already parsed).
3. The lookup of the running event loop's async client, done once per ``acall`` / ``stream``
   (the model keeps one client per loop).
4. For scale: one full ``acall`` through the real SDK to the local wire-format server of the
   tests (``tests/provider_server.py``), whose median is mostly SDK and HTTP time.

Adapter internals (``_request``, ``_response``, ``_StreamState``) are called directly so only
the adapter's work is timed. CPU time of this process, median of ``--repeats`` interleaved
runs.

    .venv/bin/python benchmarks/bench_model_adapters.py --repeats 7
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tooluse import (
    AssistantMessage,
    ChatOptions,
    Prompt,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.models import AnthropicChatModel, OpenAIChatModel
from tooluse.models._openai import _StreamState

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from provider_payloads import (  # type: ignore[import-not-found]
    StubTool,
    openai_call,
    openai_call_delta,
    openai_chunk,
    openai_completion,
    openai_usage,
)
from provider_server import Reply, shared_server  # type: ignore[import-not-found]


def tools(count: int) -> tuple[StubTool, ...]:
    result = []
    for i in range(count):
        name = f"crm.contacts.search_{i}" if i % 5 == 0 else f"search_records_{i}"
        schema = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for", "maxLength": 200},
                "limit": {"type": "integer", "default": 10, "minimum": 1},
                "filter": {
                    "anyOf": [{"$ref": "#/$defs/Filter"}, {"type": "null"}],
                    "default": None,
                },
            },
            "required": ["query"],
            "additionalProperties": False,
            "$defs": {
                "Filter": {
                    "type": "object",
                    "properties": {"field": {"type": "string"}, "value": {"type": "string"}},
                    "required": ["field", "value"],
                    "additionalProperties": False,
                }
            },
        }
        result.append(StubTool(ToolDefinition(name, f"Search records, variant {i}.", schema)))
    return tuple(result)


def history() -> list[Any]:
    calls = tuple(
        ToolCall(id=f"c{i}", name="crm.contacts.search_0", arguments='{"query": "x"}')
        for i in range(3)
    )
    return [
        SystemMessage(text="You are a CRM assistant."),
        UserMessage(text="Find Ada and Alan."),
        AssistantMessage(tool_calls=calls),
        ToolResponseMessage(
            responses=tuple(ToolResponse(id=c.id, name=c.name, data="[]") for c in calls)
        ),
        AssistantMessage(text="Nobody found."),
        UserMessage(text="Try again with a wider search."),
    ] * 2


def cpu_us(fn: Callable[[], object], iterations: int) -> float:
    start = time.process_time()
    for _ in range(iterations):
        fn()
    return (time.process_time() - start) / iterations * 1e6


def stream_chunks() -> list[ChatCompletionChunk]:
    raw = [openai_chunk({"role": "assistant", "content": None})]
    raw += [openai_chunk({"content": f"word{i} "}) for i in range(40)]
    for index, name in enumerate(("search_records_1", "search_records_2", "search_records_3")):
        raw.append(
            openai_chunk(
                openai_call_delta(
                    index,
                    id=f"call_{index}",
                    type="function",
                    function={"name": name, "arguments": ""},
                )
            )
        )
        raw += [
            openai_chunk(openai_call_delta(index, function={"arguments": part}))
            for part in ('{"qu', 'ery": ', '"Ada"}')
        ]
    raw.append(openai_chunk({}, finish_reason="tool_calls"))
    raw.append(openai_chunk(None, usage=openai_usage(500, 60)))
    return [ChatCompletionChunk.model_validate(chunk) for chunk in raw]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()

    server = shared_server()
    base = f"{server.url}/v1"
    plain = OpenAIChatModel("gpt-test", base_url=base, api_key="k", max_retries=0)
    strict = OpenAIChatModel("gpt-test", base_url=base, api_key="k", strict_tools=True)
    claude = AnthropicChatModel("claude-test", base_url=server.url, api_key="k")
    messages = history()

    scenarios: dict[str, Callable[[], float]] = {}
    for count in (1, 20, 100):
        prompt = Prompt(messages, ChatOptions(tool_callbacks=tools(count)))
        strict._request(prompt)  # warm the shaping cache
        for label, model in (
            (f"openai request, {count} tools, plain", plain),
            (f"openai request, {count} tools, strict (cached)", strict),
            (f"anthropic request, {count} tools", claude),
        ):
            build = functools.partial(model._request, prompt)
            scenarios[label] = functools.partial(cpu_us, build, args.iterations)

    def first_strict_request() -> float:
        fresh = Prompt(messages, ChatOptions(tool_callbacks=tools(100)))  # new schema objects
        start = time.process_time()
        strict._request(fresh)
        return (time.process_time() - start) * 1e6

    scenarios["openai request, 100 tools, strict, first time (shaping)"] = first_strict_request

    completion = ChatCompletion.model_validate(
        openai_completion(
            None,
            [openai_call(f"c{i}", "crm_contacts_search_0", '{"query": "Ada"}') for i in range(3)],
            usage=openai_usage(500, 60),
        )
    )
    response_prompt = Prompt(messages, ChatOptions(tool_callbacks=tools(20)))
    request = plain._request(response_prompt)
    scenarios["openai response, 3 tool calls"] = lambda: cpu_us(
        lambda: plain._response(completion, request), args.iterations
    )

    chunks = stream_chunks()

    def translate_stream() -> None:
        state = _StreamState(request)
        for chunk in chunks:
            state.add(chunk)
        state.finish()

    scenarios[f"openai stream translation, per chunk ({len(chunks)} chunks)"] = lambda: (
        cpu_us(translate_stream, args.iterations) / len(chunks)
    )

    async def round_trip() -> float:
        prompt = Prompt(messages, ChatOptions(tool_callbacks=tools(20)))
        body = openai_completion(None, [openai_call("c1", "search_records_1", '{"query": "Ada"}')])
        server.expect(*[Reply.json(body)] * 20)
        start = time.perf_counter()
        for _ in range(20):
            await plain.acall(prompt)
        return (time.perf_counter() - start) / 20 * 1e6

    async def client_lookup() -> float:
        plain._client  # noqa: B018 - made for this loop, as by its first request
        lookups: int = args.iterations * 100
        start = time.process_time()
        for _ in range(lookups):
            plain._client  # noqa: B018
        return (time.process_time() - start) / lookups * 1e6

    loop = asyncio.new_event_loop()
    scenarios["async client lookup, per request"] = lambda: loop.run_until_complete(client_lookup())
    scenarios["full acall to the local server, 20 tools (wall)"] = lambda: loop.run_until_complete(
        round_trip()
    )

    results: dict[str, list[float]] = {name: [] for name in scenarios}
    for _ in range(args.repeats):
        for name, run in scenarios.items():
            results[name].append(run())
    loop.run_until_complete(plain.aclose())
    loop.close()

    print(
        f"Python {platform.python_version()} {platform.machine()}, "
        f"repeats={args.repeats}, iterations={args.iterations}"
    )
    print("| scenario | µs (median) | min | max |")
    print("|---|---:|---:|---:|")
    for name, values in results.items():
        print(
            f"| {name} | {statistics.median(values):.1f} | {min(values):.1f} | {max(values):.1f} |"
        )


if __name__ == "__main__":
    main()
