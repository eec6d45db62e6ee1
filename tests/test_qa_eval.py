"""Measuring the router: ``tooluse.qa.evaluate`` and ``tooluse eval``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tooluse.service
from _qa_helpers import CountingRetriever
from _rag_helpers import HashingEmbeddingModel
from tooluse import cli, tool
from tooluse.cli.eval import load_families
from tooluse.memory import MessageWindowChatMemory
from tooluse.messages import AssistantMessage, Prompt, ToolResponseMessage, UserMessage
from tooluse.qa import (
    ArgumentCheck,
    PipelineTarget,
    QaPipeline,
    Question,
    QuestionFamily,
    SampledModel,
    SingleChain,
    TrajectoryStep,
    acompare,
    aevaluate,
    evaluate,
    report_json,
    report_markdown,
)
from tooluse.rag import Document
from tooluse.service import SAMPLE_TOOLS
from tooluse.testing import FunctionModel, ResponseLike, ScriptedModel, tool_call
from tooluse.tools import tool_callbacks

KNOWLEDGE = [Document(text="Orders ship within a day.", id="shipping")]


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
        if "cancel" in question:
            return tool_call("cancel_order", {"order_id": "A1"})
        asked.append(len(prompt.messages))
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
    report, table = tmp_path / "runs.json", tmp_path / "table.md"
    argv = ["eval", "--model", "test", "--runs", "1", "--db", str(tmp_path / "e.db")]
    argv += ["--json", str(report), "--markdown", str(table)]
    assert cli.main([*argv, "--min-rate", "1"]) == 1  # the offline TestModel misses some
    out = capsys.readouterr().out
    # Every run of both pipelines is printed as it ends, then the table.
    # TestModel's arguments are made up from the schema: the right tool, the wrong city.
    assert (
        "MISS two-stage | weather (en) #1 What's the weather in Paris right now? -> "
        'get_weather({"city": "a", "unit": "celsius"}) [wrong arguments]'
    ) in out
    assert (
        "ok   two-stage | returns (en) #1 How long do I have to return an item? -> no tool" in out
    )
    assert out.count("| weather (en) #1 ") == 2 and "MISS single chain | weather (en) #1 " in out
    assert table.read_text("utf-8") in out
    rows = {line.split(" | ")[0]: line for line in table.read_text("utf-8").splitlines()}
    assert "| single chain: decision | args | claims | errors | median s |" in rows["| family"]
    assert "| two-stage: decision |" in rows["| family"]
    families = load_families(
        (Path(tooluse.service.__file__).parent / "sample_eval.json").read_text("utf-8"), "x"
    )
    data = json.loads(report.read_text("utf-8"))
    assert list(data["targets"]) == ["single chain", "two-stage"]
    assert len(data["runs"]) == 2 * sum(len(family.questions) for family in families)
    two_stage = data["targets"]["two-stage"]
    assert set(two_stage["families"]) == {family.name for family in families}
    assert two_stage["overall"]["runs"] == len(data["runs"]) // 2
    assert {"live data", "list", "near-topic knowledge", "knowledge base", "follow-up"} == set(
        two_stage["categories"]
    )
    # The offline TestModel calls a tool whose name the question mentions.
    assert two_stage["families"]["weather (en)"]["decisions_ok"] == 1
    assert two_stage["families"]["returns (en)"]["decisions_ok"] == 1

    families_file = tmp_path / "f.json"
    families_file.write_text(
        json.dumps(
            {
                "families": [
                    {"name": "t", "questions": ["time?"], "expected_tools": ["get_current_time"]}
                ]
            }
        )
    )
    argv = ["eval", "--model", "test", str(families_file), "--runs", "2"]
    argv += ["--db", str(tmp_path / "e.db")]
    # TestModel's time zone "a" is refused by the tool: an error result is a failed run,
    # not "ok" (it once was: issue 22).
    assert cli.main([*argv, "--pipelines", "two-stage", "--min-rate", "0.5"]) == 1
    out = capsys.readouterr().out
    assert 'MISS two-stage | t #1 time? -> get_current_time({"timezone": "a"}) [tool error]' in out
    assert out.count("MISS two-stage | t #") == 2 and "single chain" not in out
    assert "| t |  | get_current_time | 2/2 | - | 0 | 2 |" in out
    assert cli.main(["eval", "--model", "test", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    assert cli.main([*argv, "--pipelines", "one-chain"]) == 2
    assert "--pipelines: unknown ['one-chain']" in capsys.readouterr().err
    assert cli.main([*argv, "--max-tool-calls", "0"]) == 2
    assert "--max-tool-calls must be at least 1" in capsys.readouterr().err


def test_tooluse_eval_family_selects_the_families_to_ask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TOOLUSE_MODEL", raising=False)
    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    report = tmp_path / "runs.json"
    argv = ["eval", "--model", "test", "--runs", "2", "--pipelines", "two-stage"]
    argv += ["--db", str(tmp_path / "e.db"), "--json", str(report)]
    # a part of a name, case aside; a family matched twice is asked once
    assert cli.main([*argv, "--family", "UTC", "--family", "weather (EN)", "--family", "utc"]) == 0
    data = json.loads(report.read_text("utf-8"))
    asked = {run["family"] for run in data["runs"]}
    assert asked == {"weather (en)", "trap: what UTC is (zh)"} and len(data["runs"]) == 4
    capsys.readouterr()
    assert cli.main([*argv, "--family", "weather", "--family", "no such family"]) == 2
    err = capsys.readouterr().err
    assert "--family: no family's name contains ['no such family']" in err
    assert "'weather (zh)'" in err  # the names to choose from


def test_the_sample_set_checks_real_tools_and_parameters() -> None:
    text = (Path(tooluse.service.__file__).parent / "sample_eval.json").read_text("utf-8")
    families = load_families(text, "sample_eval.json")
    schemas = {
        callback.definition.name: callback.definition.input_schema["properties"]
        for callback in tool_callbacks(*SAMPLE_TOOLS)
    }
    assert len(families) >= 20
    for family in families:
        assert set(family.expected_tools) | set(family.allowed_tools) <= set(schemas)
        for question in family.questions:
            for tool_name, checks in question.arguments.items():
                assert set(checks) <= set(schemas[tool_name]), (family.name, tool_name)
    # Each kind of question the seed names, in English and in Chinese.
    categories = {family.category for family in families}
    assert categories == {
        "live data",
        "list",
        "near-topic knowledge",
        "knowledge base",
        "follow-up",
    }
    texts = [question.text for family in families for question in family.questions]
    assert any(re.search("[\u4e00-\u9fff]", text) for text in texts)
    assert any(re.fullmatch("[ -~]+", text) for text in texts)
    assert {
        "What does METAR stand for?",
        "Why do pilots care about obstacles near airports?",
    } <= set(texts)


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


def seed_model(seen: list[tuple[float | None, object]]) -> FunctionModel:
    """A model with seed 001's fault: with documents in its prompt it skips the tool and says
    it checked; without documents it calls the tool. It records each request's sampling."""

    def respond(prompt: Prompt) -> ResponseLike:
        seen.append((prompt.options.temperature, prompt.options.extra.get("seed")))
        last = prompt.messages[-1]
        if isinstance(last, ToolResponseMessage):
            return "" if not prompt.options.tool_callbacks else "A1 has shipped."
        if not prompt.options.tool_callbacks:
            return "A1 has shipped."
        if "Knowledge-base documents" in (last.text or ""):
            return "I checked the system: A1 has shipped."
        return tool_call("order_status", {"order_id": "A1"})

    return FunctionModel(respond)


async def test_acompare_measures_the_single_chain_against_the_two_stage_pipeline() -> None:
    seen: list[tuple[float | None, object]] = []
    model = SampledModel(seed_model(seen), temperature=0.7, seed=100)
    retriever = CountingRetriever(KNOWLEDGE)
    targets = [
        SingleChain(
            model, retriever=retriever, tools=[order_status], memory=MessageWindowChatMemory()
        ),
        PipelineTarget(
            QaPipeline(
                model, retriever=retriever, tools=[order_status], memory=MessageWindowChatMemory()
            )
        ),
    ]
    check = {"order_status": {"order_id": ArgumentCheck("like", "A1")}}
    family = QuestionFamily(
        "status",
        [Question("Where is A1?", check), Question("A1 到哪了？", check)],
        ["order_status"],
    )
    progress: list[tuple[str, str, int]] = []
    single, two_stage = await acompare(
        targets,
        [family],
        runs=2,
        on_run=lambda run: progress.append((run.target, run.question, run.attempt)),
    )
    # Each question once through each target, then each again.
    assert progress == [
        ("single chain", "Where is A1?", 1),
        ("two-stage", "Where is A1?", 1),
        ("single chain", "A1 到哪了？", 1),
        ("two-stage", "A1 到哪了？", 1),
        ("single chain", "Where is A1?", 2),
        ("two-stage", "Where is A1?", 2),
        ("single chain", "A1 到哪了？", 2),
        ("two-stage", "A1 到哪了？", 2),
    ]
    assert (single.target, two_stage.target) == ("single chain", "two-stage")
    assert single.passed == 0 and two_stage.passed == 4
    assert all(run.score.claimed_lookup and not run.trajectory for run in single.runs)
    assert all(run.answer == "A1 has shipped." for run in two_stage.runs)
    assert single.tally.decisions_ok == 0 and two_stage.tally.arguments_ok == 4
    assert all(run.latency_seconds >= 0 for run in single.runs)
    # Every request sampled at 0.7, the n-th question asked with seed 100 + n: the same
    # for both targets and for each stage of a run.
    assert {temperature for temperature, _ in seen} == {0.7}
    assert sorted({s for _, s in seen}) == [101, 102, 103, 104]  # type: ignore[type-var]

    table = report_markdown([single, two_stage])
    assert (
        "| status |  | order_status | 0/4 | 0/4 | 4 | 0 | " in table
        and "| 4/4 | 4/4 | 0 | 0 | " in table
    )
    assert table.splitlines()[-1].startswith("| **overall** |  |  | 0/4 | 0/4 | 4 | 0 | ")
    data = report_json([single, two_stage])
    assert data["targets"]["two-stage"]["overall"]["decision_rate"] == 1.0
    assert data["targets"]["single chain"]["families"]["status"]["claims"] == 4
    assert len(data["runs"]) == 8 and data["runs"][0]["passed"] is False


async def test_a_follow_up_family_starts_from_its_history() -> None:
    prompts: list[list[str]] = []

    def respond(prompt: Prompt) -> ResponseLike:
        if prompt.options.tool_callbacks and not isinstance(
            prompt.messages[-1], ToolResponseMessage
        ):
            prompts.append([m.text or "" for m in prompt.messages])
            return tool_call("order_status", {"order_id": "A1"})
        return "" if prompt.options.tool_callbacks else "Still shipped."

    history = [UserMessage(text="Where is A1?"), AssistantMessage(text="A1 has shipped.")]
    family = QuestionFamily("again", ["And now?"], ["order_status"], history=history)
    pipeline = QaPipeline(
        FunctionModel(respond),
        retriever=CountingRetriever(),
        tools=[order_status],
        memory=MessageWindowChatMemory(),
    )
    (report,) = await aevaluate(pipeline, [family], runs=2)
    assert report.passed == 2
    assert prompts[0][1:] == ["Where is A1?", "A1 has shipped.", "And now?"]
    assert prompts[1] == prompts[0]  # a new conversation per run, from the same history
    prompts.clear()
    await aevaluate(pipeline, [family], runs=2, same_conversation=True)
    assert len(prompts[1]) == len(prompts[0]) + 2  # the history once, then the first run


async def test_the_single_chain_reports_a_pause_for_approval_and_tool_errors() -> None:
    @tool
    def broken(order_id: str) -> str:
        """Live status of an order."""
        raise ValueError("the order service is down")

    rounds = iter(
        [
            tool_call("broken", {"order_id": "A1"}),
            "Sorry.",
            tool_call("cancel_order", {"order_id": "A1"}),
        ]
    )

    def respond(prompt: Prompt) -> ResponseLike:
        return next(rounds)

    target = SingleChain(
        FunctionModel(respond),
        retriever=CountingRetriever(),
        tools=[broken, cancel_order],
        memory=MessageWindowChatMemory(),
    )
    families = [
        QuestionFamily("status", ["Where is A1?"], ["broken"]),
        QuestionFamily("cancel", ["Cancel A1"], ["cancel_order"]),
    ]
    status, cancel = await acompare([target], families, runs=1)
    (failed,) = status.runs
    assert failed.trajectory == (TrajectoryStep("broken", '{"order_id": "A1"}', True),)
    assert failed.score.tool_error and not failed.passed and failed.answer == "Sorry."
    (held,) = cancel.runs
    assert held.paused and held.passed and held.answer == ""
    assert held.trajectory == (TrajectoryStep("cancel_order", '{"order_id": "A1"}', None),)


@pytest.mark.parametrize(
    ("family", "message"),
    [
        (
            {"name": "x", "questions": [{"text": "q", "arguments": {"t": {"a": 1}}}]},
            "checks the arguments of \\['t'\\], which the family does not expect",
        ),
        (
            {
                "name": "x",
                "expected_tools": ["t"],
                "questions": [{"text": "q", "arguments": {"t": {"a": {"near": 1}}}}],
            },
            "an argument check is a value",
        ),
        ({"name": "x", "questions": [{"text": "q", "args": {}}]}, "unknown keys \\['args'\\]"),
        ({"name": "x", "questions": [{"text": " "}]}, "a question must be a non-blank text"),
        ({"name": "x", "questions": ["q"], "history": [{"role": "tool", "text": "t"}]}, "history"),
        ({"name": "x", "questions": ["q"], "category": 3}, "'category' must be a string"),
        ({"name": "x", "questions": ["q"], "allowed_tools": "t"}, "'allowed_tools' must be"),
    ],
)
def test_bad_labels_are_refused(family: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_families(json.dumps({"families": [family]}), "f.json")


def test_two_families_of_one_name_are_refused() -> None:
    family = {"name": "x", "questions": ["q"]}
    with pytest.raises(ValueError, match="two families are named \\['x'\\]"):
        load_families(json.dumps({"families": [family, family]}), "f.json")


async def test_sampled_model_checks_its_temperature() -> None:
    with pytest.raises(ValueError, match="temperature must be between 0 and 2"):
        SampledModel(ScriptedModel([]), temperature=3, seed=None)
    model = SampledModel(ScriptedModel(["hi"]), temperature=None, seed=None)
    prompt = Prompt([UserMessage(text="hi")])
    assert (await model.acall(prompt)).text == "hi"
    assert model.model.requests[0].options == prompt.options  # type: ignore[attr-defined]


def test_tooluse_eval_renders_one_table_from_the_reports_of_two_evaluations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TOOLUSE_MODEL", raising=False)
    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    families = tmp_path / "f.json"
    families.write_text(
        json.dumps(
            {
                "families": [
                    {
                        "name": "w",
                        "questions": ["weather in Paris?"],
                        "expected_tools": ["get_weather"],
                    },
                    {"name": "k", "category": "knowledge", "questions": ["Returns?"]},
                ]
            }
        )
    )
    tables = {}
    for pipeline in ("single-chain", "two-stage"):
        argv = ["eval", str(families), "--model", "test", "--runs", "2", "--pipelines", pipeline]
        argv += ["--db", str(tmp_path / "e.db"), "--json", str(tmp_path / f"{pipeline}.json")]
        cli.main([*argv, "--markdown", str(tmp_path / f"{pipeline}.md")])
        tables[pipeline] = (tmp_path / f"{pipeline}.md").read_text("utf-8").splitlines()
    capsys.readouterr()
    reports = [str(tmp_path / f"{pipeline}.json") for pipeline in tables]
    combined = tmp_path / "both.md"
    assert cli.main(["eval", "--report", *reports, "--markdown", str(combined)]) == 0
    assert capsys.readouterr().out == combined.read_text("utf-8")
    rows = combined.read_text("utf-8").splitlines()
    assert rows[0].startswith("| family | category | expects | single chain: decision |")
    assert "| two-stage: decision |" in rows[0]
    # Each row: the family's columns, then each pipeline's cells as its own table had them.
    for row, single, two_stage in zip(
        rows[2:], tables["single-chain"][2:], tables["two-stage"][2:], strict=True
    ):
        assert row == f"{single} {two_stage.split(' | ', 3)[3]}"
    assert cli.main(["eval", "--report", reports[0]]) == 0  # one file: its own table again
    assert capsys.readouterr().out.splitlines() == tables["single-chain"]

    assert cli.main(["eval", "--report", reports[0], reports[0]]) == 2
    assert "both report 'single chain'" in capsys.readouterr().err
    assert cli.main(["eval", "--report", str(families)]) == 2
    assert "is not a report of tooluse eval --json" in capsys.readouterr().err
