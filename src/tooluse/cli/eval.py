"""``tooluse eval``: how often the router calls the tools each family of questions needs."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.resources
import json
import sys
from pathlib import Path

from tooluse.cli._options import (
    OptionError,
    add_service_arguments,
    close_model,
    config_from_arguments,
    configure_logging,
    mcp_startup_errors,
)
from tooluse.memory import MessageWindowChatMemory
from tooluse.qa import FamilyReport, QaPipeline, QuestionFamily, aevaluate
from tooluse.search import ToolSearchToolCallingAdvisor
from tooluse.service._knowledge import KnowledgeBase
from tooluse.service._offline import OfflineModel
from tooluse.service._service import (
    grounded_arguments,
    history_as_text,
    mcp_provider,
    query_transformers,
    router_advisor,
    tool_sources,
)
from tooluse.tools import tool_callbacks

__all__ = ["add_arguments", "load_families", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Ask families of questions N times each through the QA pipeline and report, per "
        "family, how often the expected tools were called, with each run's tool calls. "
        "Without FILE, the sample families for the sample tools."
    )
    parser.add_argument(
        "file",
        nargs="?",
        type=Path,
        help='JSON: {"families": [{"name", "questions": [...], "expected_tools": [...]}]}',
    )
    parser.add_argument("--runs", type=int, default=3, help="times each question is asked")
    parser.add_argument(
        "--same-conversation",
        action="store_true",
        help="all runs of a family in one conversation (earlier answers in the history)",
    )
    parser.add_argument("--json", type=Path, help="write every run to this file")
    parser.add_argument(
        "--min-rate", type=float, default=0.0, help="exit 1 if a family passes less often"
    )
    add_service_arguments(parser)
    parser.set_defaults(log_level="warning")


def load_families(text: str, where: str) -> list[QuestionFamily]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{where} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("families"), list):
        raise ValueError(f'{where} must be an object with a list "families"')
    return [
        QuestionFamily.from_dict(item, f"{where}: families[{n}]")
        for n, item in enumerate(data["families"])
    ]


def _print(reports: list[FamilyReport]) -> None:
    for report in reports:
        family = report.family
        expected = ", ".join(family.expected_tools) or "no tool"
        print(
            f"{family.name}: {report.passed}/{len(report.runs)} ({report.rate:.0%}) "
            f"called {expected}"
        )
        for run in report.runs:
            steps = "; ".join(f"{s.name}({s.arguments})" for s in run.trajectory) or "no tool"
            mark = "ok  " if run.passed else "MISS"
            extra = " [paused for approval]" if run.paused else ""
            extra += f" [error: {run.error}]" if run.error else ""
            print(f"  {mark} #{run.attempt} {run.question} -> {steps}{extra}")


async def _evaluate(args: argparse.Namespace, families: list[QuestionFamily]) -> int:
    config = config_from_arguments(args)
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(close_model, config)
        mcp = mcp_provider(config)
        if mcp is not None:
            with mcp_startup_errors(args):
                await stack.enter_async_context(mcp)
        tools = tool_sources(config, mcp)
        knowledge = KnowledgeBase(
            config.database_url or config.db,
            embedding_model=config.embedding_model,
            samples=config.sample_knowledge,
        )
        callbacks = tool_callbacks(*tools)
        router = router_advisor(config, callbacks)
        if isinstance(router, ToolSearchToolCallingAdvisor):
            # built first: every run searches the same, embedded index
            await asyncio.to_thread(router.warm_up, callbacks)
        model = OfflineModel() if config.model is None else config.model
        pipeline = QaPipeline(
            model,
            retriever=knowledge,
            query_transformers=query_transformers(config, model),
            tools=tools,
            memory=MessageWindowChatMemory(),  # eval conversations are not kept
            router_advisor=router,
            router_fetch_rounds=config.router_fetch_rounds,
            router_grounded_arguments=grounded_arguments(config),
            router_history_as_text=history_as_text(config),
        )
        knowledge.start()
        try:
            reports = await aevaluate(
                pipeline, families, runs=args.runs, same_conversation=args.same_conversation
            )
        finally:
            await asyncio.to_thread(knowledge.close)
    _print(reports)
    if args.json is not None:
        runs = [run.to_dict() for report in reports for run in report.runs]
        args.json.write_text(json.dumps({"runs": runs}, ensure_ascii=False, indent=2), "utf-8")
    return 1 if any(report.rate < args.min_rate for report in reports) else 0


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    try:
        if args.file is None:
            resource = importlib.resources.files("tooluse.service") / "sample_eval.json"
            families = load_families(resource.read_text("utf-8"), "sample_eval.json")
        else:
            families = load_families(args.file.read_text("utf-8"), str(args.file))
        if args.runs < 1:
            raise ValueError(f"--runs must be at least 1, got {args.runs}")
        return asyncio.run(_evaluate(args, families))
    except (OptionError, ValueError, OSError) as exc:
        print(f"tooluse eval: {exc}", file=sys.stderr)
        return 2
