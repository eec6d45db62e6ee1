"""A service worker with durable runs, for the tests that kill one: ``python
_durable_worker.py PORT DATABASE_URL TOOL_LOG [--slow-answer] [--users] [--redis URL]``.

Its model asks for ``look_up_order`` on the question, then answers; with
``--slow-answer`` it takes an hour over the answer, so that a test can kill the worker in
that step, after the tool call completed (and the round recorded): it appends a line to
``TOOL_LOG`` with the suffix ``.answering`` when it begins the answer. The tool appends a
line to ``TOOL_LOG`` each time it runs, which the test counts. With ``--users`` the keys
``ann-key`` and ``bob-key`` name the users ann and bob (no other caller is let in); with
``--redis`` the turns of a conversation hold a lock in that Redis; with ``--not-durable`` the
worker runs its turns as a worker without ``--durable-runs`` does."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import uvicorn

from tooluse import tool
from tooluse.calling import Caller
from tooluse.messages import Prompt, ToolResponseMessage
from tooluse.service import ApiKeys, ServiceConfig, create_app
from tooluse.testing import FunctionModel, ResponseLike, tool_call


def main() -> None:
    port, database_url, tool_log = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    slow_answer = "--slow-answer" in sys.argv[4:]
    options = sys.argv[4:]
    redis_url = options[options.index("--redis") + 1] if "--redis" in options else None
    users = ApiKeys({"ann-key": Caller("ann"), "bob-key": Caller("bob")})

    @tool(read_only=True)
    def look_up_order(order_id: str) -> str:
        """The status of an order."""
        with tool_log.open("a") as log:
            log.write(f"{order_id}\n")
        return f"order {order_id}: shipped"

    async def respond(prompt: Prompt) -> ResponseLike:
        if prompt.options.tool_callbacks:
            if isinstance(prompt.messages[-1], ToolResponseMessage):
                return ""
            return tool_call("look_up_order", {"order_id": "A1001"})
        if slow_answer:
            with tool_log.with_suffix(".answering").open("a") as answering:
                answering.write("answering\n")
            await asyncio.sleep(3600)
        return "Order A1001 has shipped."

    config = ServiceConfig(
        db=str(tool_log.with_suffix(f".{port}.db")),
        database_url=database_url,
        redis_url=redis_url,
        durable_runs="--not-durable" not in options,
        model=FunctionModel(respond),
        tools=[look_up_order],
        sample_knowledge=False,
        query_compression=False,
        authenticators=[users] if "--users" in sys.argv[4:] else [],
    )
    uvicorn.run(create_app(config), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
