"""MCP tool calls: what ``McpToolCallback`` adds over the bare SDK ``Client.call_tool``.

For each transport (stdio to the SDK's ``MCPServer`` in ``tests/mcp_servers/sdk_server.py``,
and in process to the same kind of server), two sessions are opened: one bare SDK ``Client``
and one ``McpToolProvider``. Each then calls ``echo`` sequentially (per-call wall and
this-process CPU µs, medians over ``--repeats`` rounds of ``--calls`` calls, interleaved) and
in batches of 20 concurrent calls from 20 tasks (wall ms per batch).

    .venv/bin/python benchmarks/bench_mcp.py --repeats 5 --calls 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer

from tooluse.mcp import InProcessServer, McpToolProvider, StdioServer

SDK_SERVER = Path(__file__).resolve().parents[1] / "tests" / "mcp_servers" / "sdk_server.py"
Call = Callable[[], Coroutine[Any, Any, str]]


def in_process_server() -> MCPServer:
    server = MCPServer("bench")

    @server.tool()
    def echo(text: str) -> str:
        return text

    return server


async def sequential(call: Call, calls: int) -> tuple[float, float]:
    """Per-call (wall µs, CPU µs of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await call()
    return (
        (time.perf_counter() - wall) / calls * 1e6,
        (time.process_time() - cpu) / calls * 1e6,
    )


async def concurrent(call: Call, batches: int) -> float:
    """Wall ms per batch of 20 concurrent calls from 20 tasks."""
    started = time.perf_counter()
    for _ in range(batches):
        await asyncio.gather(*(asyncio.create_task(call()) for _ in range(20)))
    return (time.perf_counter() - started) / batches * 1e3


async def measure(
    transport: str, client: Client, provider: McpToolProvider, repeats: int, calls: int
) -> None:
    arguments = {"text": "hello"}
    encoded = json.dumps(arguments)
    async with client, provider:
        echo = next(c for c in provider.tool_callbacks() if c.definition.name == "echo")

        async def bare() -> str:
            result = await client.call_tool("echo", arguments)
            return str(result.content[0])

        async def ours() -> str:
            return str(await echo.acall(encoded))

        callers: dict[str, Call] = {"SDK Client": bare, "McpToolCallback": ours}
        rows: dict[str, list[tuple[float, float, float]]] = {name: [] for name in callers}
        for call in callers.values():  # warm up
            await sequential(call, 20)
        for _ in range(repeats):
            for name, call in callers.items():
                wall, cpu = await sequential(call, calls)
                batch = await concurrent(call, max(1, calls // 20))
                rows[name].append((wall, cpu, batch))
        for name, samples in rows.items():
            wall, cpu, batch = (statistics.median(s[i] for s in samples) for i in range(3))
            print(f"{transport:<11} {name:<16} {wall:>12.0f} {cpu:>11.0f} {batch:>11.1f}")


async def run(repeats: int, calls: int) -> None:
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs; median of {repeats}")
    header = ("transport", "caller", "seq wall µs", "seq CPU µs", "20 conc ms")
    print("{:<11} {:<16} {:>12} {:>11} {:>11}".format(*header))
    stdio = StdioServerParameters(command=sys.executable, args=[str(SDK_SERVER)])
    await measure(
        "stdio",
        Client(stdio),
        McpToolProvider(StdioServer(sys.executable, [str(SDK_SERVER)], name="stdio")),
        repeats,
        calls,
    )
    await measure(
        "in process",
        Client(in_process_server()),
        McpToolProvider(InProcessServer(in_process_server())),
        repeats,
        calls,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(run(args.repeats, args.calls))


if __name__ == "__main__":
    main()
