"""Measuring the router: ``tooluse.qa.evaluate`` and ``tooluse eval``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _qa_helpers import CountingRetriever
from _rag_helpers import HashingEmbeddingModel
from tooluse import cli, tool
from tooluse.cli.eval import load_families
from tooluse.memory import MessageWindowChatMemory
from tooluse.messages import Prompt, ToolResponseMessage
from tooluse.qa import QaPipeline, QuestionFamily, TrajectoryStep, aevaluate, evaluate
from tooluse.testing import FunctionModel, ResponseLike, ScriptedModel, tool_call


@tool
def order_status(order_id: str) -> dict[str, str]:
    """Live status of an order."""
    return {"order_id": order_id, "status": "shipped"}


@tool(requires_approval=True)
def cancel_order(order_id: str) -> str:
    """Cancel an order."""
    return "cancelled"


async def test_evaluate_counts_the_runs_that_called_the_expected_tools() -> None:
    asked: list[int] = []

    def respond(prompt: Prompt) -> ResponseLike:
        if not prompt.options.tool_callbacks:
            return "answer"
        if isinstance(prompt.messages[-1], ToolResponseMessage):
            return ""
        question = prompt.messages[-1].text
        asked.append(len(prompt.messages))
        if "cancel" in question:
            return tool_call("cancel_order", {"order_id": "A1"})
        # The flaky router of seed 001: calls the tool every other time.
        return tool_call("order_status", {"order_id": "A1"}) if len(asked) % 2 else ""

    pipeline = QaPipeline(
        FunctionModel(respond),
        retriever=CountingRetriever(),
        tools=[order_status, cancel_order],
        memory=MessageWindowChatMemory(),
    )
    families = [
        QuestionFamily("status", ("Where is A1?",), ("order_status",)),
        QuestionFamily("cancel", ("cancel A1",), ("cancel_order",)),
    ]
    status, cancel = await aevaluate(pipeline, families, runs=4)
    assert (status.passed, len(status.runs), status.rate) == (2, 4, 0.5)
    assert [run.passed for run in status.runs] == [True, False, True, False]
    assert status.runs[0].trajectory == (
        TrajectoryStep("order_status", '{"order_id": "A1"}', False),
    )
    assert status.runs[1].trajectory == () and status.runs[1].route == "knowledge"
    assert cancel.passed == 4 and all(run.paused for run in cancel.runs)
    assert cancel.runs[0].trajectory == (
        TrajectoryStep("cancel_order", '{"order_id": "A1"}', None),
    )
    assert set(asked) == {2}  # a new conversation per run: system + question only

    asked.clear()
    await aevaluate(pipeline, families[:1], runs=3, same_conversation=True)
    assert asked == [2, 4, 6]  # each run sees the earlier ones in the history


async def test_a_failing_run_is_reported_not_raised() -> None:
    def fail(prompt: Prompt) -> str:
        raise ConnectionError("provider unreachable")

    pipeline = QaPipeline(
        FunctionModel(fail), retriever=CountingRetriever(), memory=MessageWindowChatMemory()
    )
    (report,) = await aevaluate(pipeline, [QuestionFamily("any", ("hi",))], runs=1)
    assert report.runs[0].error == "ConnectionError: provider unreachable"
    assert report.passed == 0
    with pytest.raises(ValueError, match="runs must be a positive int"):
        await aevaluate(pipeline, [], runs=0)


def test_evaluate_runs_without_an_event_loop() -> None:
    pipeline = QaPipeline(
        ScriptedModel(["", "answer"]),
        retriever=CountingRetriever(),
        memory=MessageWindowChatMemory(),
    )
    (report,) = evaluate(pipeline, [QuestionFamily("any", ("hi",))], runs=1)
    assert report.family.name == "any" and len(report.runs) == 1 and report.runs[0].error is None


async def test_evaluate_inside_an_event_loop_points_to_aevaluate() -> None:
    pipeline = QaPipeline(
        ScriptedModel([]), retriever=CountingRetriever(), memory=MessageWindowChatMemory()
    )
    with pytest.raises(RuntimeError, match=r"use `await aevaluate\(...\)`"):
        evaluate(pipeline, [QuestionFamily("any", ("hi",))])


async def test_a_pipeline_without_memory_is_refused_before_any_run() -> None:
    # Each run asks in a conversation; without memory every run used to fail alike, reported
    # as 0/N with the same error in each run instead of once, as the error it is.
    model = ScriptedModel(["", "answer"])
    pipeline = QaPipeline(model, retriever=CountingRetriever())
    with pytest.raises(ValueError, match="evaluate needs a QaPipeline with memory="):
        await aevaluate(pipeline, [QuestionFamily("any", ("hi",))], runs=2)
    assert model.requests == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", 'list "families"'),
        ('{"families": [{"name": "x"}]}', "'questions' must be a non-empty list"),
        ('{"families": [{"name": "", "questions": ["q"]}]}', "'name' must be"),
        ('{"families": [{"name": "x", "questions": ["q"], "expected": []}]}', "unknown keys"),
        (
            '{"families": [{"name": "x", "questions": ["q"], "expected_tools": "t"}]}',
            "list of tool",
        ),
    ],
)
def test_bad_family_files_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_families(text, "f.json")


def test_tooluse_eval_on_the_samples_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TOOLUSE_MODEL", raising=False)
    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    report = tmp_path / "runs.json"
    argv = [
        "eval",
        "--model",
        "test",
        "--runs",
        "1",
        "--db",
        str(tmp_path / "e.db"),
        "--json",
        str(report),
    ]
    assert cli.main([*argv, "--min-rate", "1"]) == 1  # one weather question is missed
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "weather: 2/3 (67%) called get_weather"
    assert "  MISS #1 Is it raining in London right now? -> no tool" in out
    assert "order status: 2/2 (100%) called get_order_status" in out
    assert "knowledge (no tool): 3/3 (100%) called no tool" in out
    runs = json.loads(report.read_text("utf-8"))["runs"]
    assert len(runs) == 10 and runs[0]["trajectory"][0]["name"] == "get_weather"

    families = tmp_path / "f.json"
    families.write_text(
        json.dumps(
            {
                "families": [
                    {"name": "t", "questions": ["time?"], "expected_tools": ["get_current_time"]}
                ]
            }
        )
    )
    assert (
        cli.main(
            [
                "eval",
                "--model",
                "test",
                str(families),
                "--runs",
                "2",
                "--db",
                str(tmp_path / "e.db"),
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.startswith("t: 2/2 (100%)")
    assert cli.main(["eval", "--model", "test", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err


async def test_the_trajectory_keeps_every_call_when_ids_are_reused() -> None:
    rounds = iter(
        [
            tool_call("order_status", {"order_id": "A1"}, id="call_0"),
            [
                tool_call("order_status", {"order_id": "B2"}, id="call_0"),
                tool_call("unknown_tool", {}, id="call_0"),
            ],
            "",
        ]
    )

    def respond(prompt: Prompt) -> ResponseLike:
        return next(rounds) if prompt.options.tool_callbacks else "answer"

    pipeline = QaPipeline(
        FunctionModel(respond),
        retriever=CountingRetriever(),
        tools=[order_status],
        memory=MessageWindowChatMemory(),
    )
    family = QuestionFamily("status", ("Where are A1 and B2?",), ("order_status",))
    [report] = await aevaluate(pipeline, [family], runs=1)
    assert report.runs[0].trajectory == (
        TrajectoryStep("order_status", '{"order_id": "A1"}', False),
        TrajectoryStep("order_status", '{"order_id": "B2"}', False),
        TrajectoryStep("unknown_tool", "{}", True),
    )
