"""The report of ``tooluse eval``: a markdown table (per family and category, and overall,
one group of columns per pipeline) and the same figures as JSON, with every run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tooluse.qa._eval import EvalRun, FamilyReport
from tooluse.qa._eval_score import Tally, tally
from tooluse.qa._eval_set import QuestionFamily

__all__ = ["report_json", "report_markdown", "reports_from_json"]


def _targets(reports: Sequence[FamilyReport]) -> list[str]:
    return list(dict.fromkeys(report.target for report in reports))


def _runs(reports: Sequence[FamilyReport], target: str) -> list[EvalRun]:
    return [run for report in reports if report.target == target for run in report.runs]


def _cells(summary: Tally) -> list[str]:
    arguments = (
        f"{summary.arguments_ok}/{summary.arguments_checked}" if summary.arguments_checked else "-"
    )
    latency = "-" if summary.latency_median is None else f"{summary.latency_median:.1f}"
    return [
        f"{summary.decisions_ok}/{summary.runs}",
        arguments,
        str(summary.claims),
        str(summary.tool_errors + summary.errors),
        latency,
    ]


_COLUMNS = ("decision", "args", "claims", "errors", "median s")


def report_markdown(reports: Sequence[FamilyReport]) -> str:
    """One row per family, per category and overall; per pipeline: right decisions / runs,
    right arguments / runs whose arguments are checked, answers claiming a look-up without
    a call, runs with a tool error result or that failed, median answer latency."""
    targets = _targets(reports)
    header = ["family", "category", "expects"]
    for target in targets:
        header += [f"{target}: {_COLUMNS[0]}", *_COLUMNS[1:]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    families = {report.family.name: report.family for report in reports}
    for name, family in families.items():
        row = [name, family.category, ", ".join(family.expected_tools) or "no tool"]
        for target in targets:
            row += _cells(tally(run for run in _runs(reports, target) if run.family == name))
        lines.append("| " + " | ".join(row) + " |")
    categories = list(dict.fromkeys(family.category for family in families.values()))
    for category in categories if len(categories) > 1 else []:
        names = {name for name, family in families.items() if family.category == category}
        row = [f"**{category or 'other'}**", "", ""]
        for target in targets:
            row += _cells(tally(run for run in _runs(reports, target) if run.family in names))
        lines.append("| " + " | ".join(row) + " |")
    row = ["**overall**", "", ""]
    for target in targets:
        row += _cells(tally(_runs(reports, target)))
    lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def report_json(reports: Sequence[FamilyReport]) -> dict[str, Any]:
    """The figures of :func:`report_markdown` per target (``overall``, ``categories``,
    ``families``, each a :class:`Tally`'s fields) and every run."""
    result: dict[str, Any] = {"targets": {}}
    for target in _targets(reports):
        own = [report for report in reports if report.target == target]
        categories: dict[str, list[EvalRun]] = {}
        for report in own:
            categories.setdefault(report.family.category, []).extend(report.runs)
        result["targets"][target] = {
            "overall": tally(_runs(own, target)).to_dict(),
            "categories": {name: tally(runs).to_dict() for name, runs in categories.items()},
            "families": {
                report.family.name: {
                    "category": report.family.category,
                    "expected_tools": list(report.family.expected_tools),
                    **report.tally.to_dict(),
                }
                for report in own
            },
        }
    result["runs"] = [run.to_dict() for report in reports for run in report.runs]
    return result


def reports_from_json(data: Mapping[str, Any], where: str) -> list[FamilyReport]:
    """The reports of a :func:`report_json` document (``where`` names it in errors), to
    render again, alone or beside another evaluation's. The families keep their names,
    categories and expected tools, their questions those of the runs."""
    try:
        runs = [EvalRun.from_dict(run) for run in data["runs"]]
        reports = []
        for target, figures in data["targets"].items():
            for name, family in figures["families"].items():
                own = tuple(run for run in runs if run.target == target and run.family == name)
                questions = list(dict.fromkeys(run.question for run in own))
                described = QuestionFamily(
                    name,
                    questions or [name],
                    family["expected_tools"],
                    category=family["category"],
                )
                reports.append(FamilyReport(described, own, target))
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(
            f"{where} is not a report of tooluse eval --json ({type(exc).__name__}: {exc})"
        ) from exc
    return reports
