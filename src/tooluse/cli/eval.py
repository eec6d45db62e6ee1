"""``tooluse eval``: how reliably each pipeline calls the tools each family of questions
needs (and no tool when none is due), with their arguments, over N runs."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.resources
import json
import sys
from pathlib import Path

from tooluse.advisors import ToolCallingAdvisor
from tooluse.calling import ToolCallingManager
from tooluse.cli._options import (
    OptionError,
    add_service_arguments,
    close_model,
    config_from_arguments,
    configure_logging,
    mcp_startup_errors,
)
from tooluse.memory import MessageWindowChatMemory
from tooluse.qa import (
    EvalRun,
    EvalTarget,
    FamilyReport,
    PipelineTarget,
    QaPipeline,
    QuestionFamily,
    SampledModel,
    SingleChain,
    acompare,
    report_json,
    report_markdown,
    reports_from_json,
)
from tooluse.search import ToolSearchToolCallingAdvisor
from tooluse.service._knowledge import KnowledgeBase
from tooluse.service._offline import OfflineModel
from tooluse.service._service import (
    grounded_arguments,
    history_as_text,
    mcp_provider,
    query_transformers,
    router_advisor,
    router_reminder,
    tool_sources,
)
from tooluse.tools import tool_callbacks

__all__ = ["PIPELINES", "add_arguments", "load_families", "load_reports", "run", "select_families"]

PIPELINES = ("single-chain", "two-stage")
"""What ``--pipelines`` names: the seed's original single chain (:class:`SingleChain`) and
the two-stage :class:`QaPipeline` that ``tooluse serve`` runs."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Ask labelled families of questions N times each through the seed's single chain "
        "(one client with tools, RAG and memory) and the two-stage pipeline of `tooluse "
        "serve`, and report per family and overall: right decisions (the expected tools, or "
        "no tool), right arguments, answers claiming a look-up without a call, tool errors and "
        "answer latency. Without FILE, the sample set for the sample tools and knowledge base."
    )
    parser.add_argument(
        "file",
        nargs="?",
        type=Path,
        help='JSON: {"families": [{"name", "category", "questions": [TEXT or {"text", '
        '"arguments": {TOOL: {ARGUMENT: CHECK}}}], "expected_tools": [...], '
        '"allowed_tools": [...], "history": [{"role", "text"}]}]} (docs/service.md)',
    )
    parser.add_argument("--runs", type=int, default=3, help="times each question is asked")
    parser.add_argument(
        "--family",
        action="append",
        metavar="TEXT",
        help="only the families whose name contains TEXT (case aside); repeat for more",
    )
    parser.add_argument(
        "--pipelines",
        default=",".join(PIPELINES),
        help=f"which pipelines to measure, comma-separated (default: {','.join(PIPELINES)})",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.7,
        help="sampling temperature of every request (default 0.7: runs differ, as in use)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        help="seed of the first run (the n-th gets SEED+n), sent as the request's `seed` "
        "(llama.cpp, vLLM and OpenAI read it): a run repeats as it went",
    )
    parser.add_argument(
        "--max-tool-calls",
        type=int,
        help="tool calls per turn after which a run stops, in both pipelines (default: the "
        "service's, 150): a model that repeats its call ends there",
    )
    parser.add_argument(
        "--same-conversation",
        action="store_true",
        help="all runs of a family in one conversation (earlier answers in the history)",
    )
    parser.add_argument(
        "--report",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="ask nothing: render one table from the --json files of earlier evaluations "
        "(e.g. one per pipeline), to stdout and --markdown / --json",
    )
    parser.add_argument("--json", type=Path, help="write the figures and every run to this file")
    parser.add_argument("--markdown", type=Path, help="write the table to this file")
    parser.add_argument(
        "--min-rate",
        type=float,
        default=0.0,
        help="exit 1 if a family passes less often through a pipeline",
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
    families = [
        QuestionFamily.from_dict(item, f"{where}: families[{n}]")
        for n, item in enumerate(data["families"])
    ]
    names = [family.name for family in families]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{where}: two families are named {repeated}")
    return families


def select_families(families: list[QuestionFamily], texts: list[str]) -> list[QuestionFamily]:
    """The ``families`` whose name contains one of ``texts`` (case aside), in their order;
    a text that selects none is an error (a typo would measure nothing)."""
    unmatched = [t for t in texts if not any(t.casefold() in f.name.casefold() for f in families)]
    if unmatched:
        names = ", ".join(repr(family.name) for family in families)
        raise ValueError(f"--family: no family's name contains {unmatched}; the families: {names}")
    return [f for f in families if any(t.casefold() in f.name.casefold() for t in texts)]


def _pipelines(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(names) - set(PIPELINES))
    if unknown or not names:
        raise OptionError(f"--pipelines: unknown {unknown}; choose from {', '.join(PIPELINES)}")
    return list(dict.fromkeys(names))


class _Progress:
    """Prints each run as it ends and rewrites the ``--json`` and ``--markdown`` files with
    the runs so far: an evaluation stopped half way leaves a report of what it ran."""

    def __init__(self, args: argparse.Namespace, families: list[QuestionFamily]) -> None:
        self._args = args
        self._families = {family.name: family for family in families}
        self._runs: dict[tuple[str, str], list[EvalRun]] = {}

    def __call__(self, run: EvalRun) -> None:
        _print_run(run)
        self._runs.setdefault((run.target, run.family), []).append(run)
        reports = [
            FamilyReport(self._families[family], tuple(runs), target)
            for (target, family), runs in self._runs.items()
        ]
        _write(self._args, reports)


def _compact(arguments: str) -> str:
    """The arguments on one line (models often indent their JSON)."""
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        return arguments


def _print_run(run: EvalRun) -> None:
    steps = "; ".join(f"{s.name}({_compact(s.arguments)})" for s in run.trajectory) or "no tool"
    score = run.score
    marks = []
    if not score.decision_ok:
        marks.append("wrong decision")
    if score.arguments_ok is False and score.decision_ok:
        marks.append("wrong arguments")
    if score.tool_error:
        marks.append("tool error")
    if score.claimed_lookup:
        marks.append("claims a look-up")
    if run.paused:
        marks.append("paused for approval")
    if run.error:
        marks.append(f"error: {run.error}")
    extra = "".join(f" [{mark}]" for mark in marks)
    mark = "ok  " if run.passed else "MISS"
    print(
        f"{mark} {run.target} | {run.family} #{run.attempt} {run.question} -> {steps}"
        f"{extra} ({run.latency_seconds:.1f} s)",
        flush=True,
    )


def _write(args: argparse.Namespace, reports: list[FamilyReport]) -> None:
    if args.json is not None:
        text = json.dumps(report_json(reports), ensure_ascii=False, indent=2)
        args.json.write_text(text, "utf-8")
    if args.markdown is not None:
        args.markdown.write_text(report_markdown(reports), "utf-8")


def _tool_loop(router: ToolCallingAdvisor, max_tool_calls: int | None) -> ToolCallingAdvisor:
    if max_tool_calls is not None:
        router.tool_calling_manager = ToolCallingManager(max_total_tool_calls=max_tool_calls)
    return router


async def _evaluate(
    args: argparse.Namespace, families: list[QuestionFamily], pipelines: list[str]
) -> list[FamilyReport]:
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
        loop = _tool_loop(router, args.max_tool_calls)
        model = SampledModel(
            OfflineModel() if config.model is None else config.model,
            temperature=args.temperature,
            seed=args.seed,
        )
        transformers = query_transformers(config, model)
        targets: list[EvalTarget] = []
        for name in pipelines:  # eval conversations are kept in memory only
            memory = MessageWindowChatMemory()
            if name == "single-chain":
                single = SingleChain(
                    model,
                    retriever=knowledge,
                    query_transformers=transformers,
                    tools=tools,
                    memory=memory,
                    tool_calling_advisor=loop,
                )
                targets.append(single)
            else:
                pipeline = QaPipeline(
                    model,
                    retriever=knowledge,
                    query_transformers=transformers,
                    tools=tools,
                    memory=memory,
                    router_advisor=loop,
                    router_fetch_rounds=config.router_fetch_rounds,
                    router_grounded_arguments=grounded_arguments(config),
                    router_history_as_text=history_as_text(config),
                    router_reminder=router_reminder(config),
                )
                targets.append(PipelineTarget(pipeline))
        knowledge.start()
        try:
            return await acompare(
                targets,
                families,
                runs=args.runs,
                same_conversation=args.same_conversation,
                on_run=_Progress(args, families),
            )
        finally:
            await asyncio.to_thread(knowledge.close)


def load_reports(paths: list[Path]) -> list[FamilyReport]:
    """The reports of the ``--json`` files ``paths``, side by side: a pipeline may come
    from one file only."""
    reports: list[FamilyReport] = []
    sources: dict[str, Path] = {}
    for path in paths:
        own = reports_from_json(json.loads(path.read_text("utf-8")), str(path))
        for target in dict.fromkeys(report.target for report in own):
            if target in sources:
                raise ValueError(f"{sources[target]} and {path} both report {target!r}")
            sources[target] = path
        reports += own
    return reports


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    if args.report:
        try:
            reports = load_reports(args.report)
        except (ValueError, OSError) as exc:
            print(f"tooluse eval: --report: {exc}", file=sys.stderr)
            return 2
        print(report_markdown(reports), end="")
        _write(args, reports)
        return 0
    try:
        if args.file is None:
            resource = importlib.resources.files("tooluse.service") / "sample_eval.json"
            families = load_families(resource.read_text("utf-8"), "sample_eval.json")
        else:
            families = load_families(args.file.read_text("utf-8"), str(args.file))
        if args.family:
            families = select_families(families, args.family)
        for option in ("runs", "max_tool_calls"):
            value = getattr(args, option)
            if value is not None and value < 1:
                raise ValueError(f"--{option.replace('_', '-')} must be at least 1, got {value}")
        if not 0 <= args.temperature <= 2:
            raise ValueError(f"--temperature must be between 0 and 2, got {args.temperature}")
        reports = asyncio.run(_evaluate(args, families, _pipelines(args.pipelines)))
    except (OptionError, ValueError, OSError) as exc:
        print(f"tooluse eval: {exc}", file=sys.stderr)
        return 2
    print()
    print(report_markdown(reports), end="")
    _write(args, reports)
    return 1 if any(report.rate < args.min_rate for report in reports) else 0
