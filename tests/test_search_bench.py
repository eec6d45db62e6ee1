"""``tooluse bench search``: run files that the datasets' evaluate.py scores identically."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tooluse.cli import main
from tooluse.search import BM25ToolIndex, bench
from tooluse.search.bench import load_dataset, run_index, score, write_run

EVALUATE = Path(__file__).resolve().parents[1] / "benchmarks/data/tool-search/evaluate.py"

TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": None,
        "category": None,
    },
    {
        "name": "sendEmail",
        "description": "Send an email",
        "category": "mail",
        "parameters": {
            "type": "object",
            "properties": {"to": {"type": "string", "description": "recipient"}},
        },
    },
    {
        "name": "tool_1a2b3c4d",
        "original_name": "翻译文本",
        "description": "翻译一段文字",
        "parameters": None,
        "category": None,
    },
] + [
    {
        "name": f"filler_{i}",
        "description": f"unrelated thing number {i}",
        "parameters": None,
        "category": None,
    }
    for i in range(12)
]
QUERIES = [
    {"id": "q1", "query": "weather in Paris", "gold": ["get_weather"], "lang": "en"},
    {
        "id": "q2",
        "query": "email the recipient and check the weather",
        "gold": ["sendEmail", "get_weather"],
        "lang": "en",
    },
    {"id": "q3", "query": "翻译文本", "gold": ["tool_1a2b3c4d"], "lang": "zh"},
    {"id": "q4", "query": "nothing matches", "gold": ["filler_3"], "lang": "en"},
]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    for name, rows in (("tools.jsonl", TOOLS), ("queries.jsonl", QUERIES)):
        (tmp_path / name).write_text(
            "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
        )
    return tmp_path


def test_loader_keeps_original_names_and_categories(dataset: Path) -> None:
    loaded = load_dataset(dataset)
    renamed = next(t for t in loaded.tools if t.tool_name == "tool_1a2b3c4d")
    assert renamed.summary.startswith("翻译文本")
    assert next(t for t in loaded.tools if t.tool_name == "sendEmail").category == "mail"
    assert loaded.queries[1].gold == ("sendEmail", "get_weather")
    assert loaded.queries[0].fields == {"lang": "en"}


def test_bad_datasets_have_specific_errors(tmp_path: Path, dataset: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"tools\.jsonl"):
        load_dataset(tmp_path / "missing")
    (dataset / "queries.jsonl").write_text('{"id": "x", "query": "q", "gold": ["nope"]}\n')
    with pytest.raises(ValueError, match=r"gold tools not in tools\.jsonl"):
        load_dataset(dataset)
    (dataset / "queries.jsonl").write_text("not json\n")
    with pytest.raises(ValueError, match=r"queries.jsonl:1: not JSON"):
        load_dataset(dataset)


def test_run_file_scores_the_same_in_evaluate_py(dataset: Path, tmp_path: Path) -> None:
    loaded = load_dataset(dataset)
    result = run_index(BM25ToolIndex(), loaded.tools, loaded.queries)
    run_file = tmp_path / "run.jsonl"
    write_run(run_file, result.rankings)
    theirs = json.loads(
        subprocess.run(
            [sys.executable, str(EVALUATE), str(dataset), "--run", str(run_file), "--json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    ours = score(loaded.queries, result.rankings)
    assert theirs.pop("n") == 4
    assert theirs == {key: round(value, 4) for key, value in ours.items()}
    assert ours["recall@1"] > 0.5
    assert result.build_seconds >= 0 and len(result.latencies_ms) == 4


def test_cli_bench_search_writes_the_run_and_prints_metrics(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run-regex.jsonl"
    status = main(
        [
            "bench",
            "search",
            "--dataset",
            str(dataset),
            "--index",
            "regex",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert status == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["index"] == "regex" and printed["queries"] == 4
    assert {
        "recall@5",
        "complete@5",
        "ndcg@10",
        "mrr",
        "latency_p99_ms",
        "build_seconds",
        "peak_rss_mb",
    } <= set(printed)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["id"] for line in lines] == ["q1", "q2", "q3", "q4"]
    assert lines[0]["ranked"][0] == "get_weather"


def test_cli_bench_search_reports_a_bad_dataset(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def bench(path: Path) -> int:
        out = str(tmp_path / "run.jsonl")
        return main(["bench", "search", "--dataset", str(path), "--index", "regex", "--out", out])

    assert bench(tmp_path / "missing") == 2
    assert "has no tools.jsonl" in capsys.readouterr().err
    (dataset / "queries.jsonl").write_text("")  # no queries: no metrics to print
    assert bench(dataset) == 2
    assert "at least one tool and one query" in capsys.readouterr().err
    (dataset / "queries.jsonl").write_text("not json\n")
    assert bench(dataset) == 2
    err = capsys.readouterr().err
    assert err.startswith("tooluse bench search: ") and "queries.jsonl:1: not JSON" in err


def test_duplicate_query_ids_and_tool_names_are_refused(dataset: Path) -> None:
    # A repeated query id was scored twice with the last query's ranking (rankings are keyed by
    # id), and a repeated tool name silently kept the last definition: both skewed the metrics.
    lines = (dataset / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    (dataset / "queries.jsonl").write_text("\n".join([*lines, lines[0]]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"queries\.jsonl:5: the id 'q1' is already on line 1"):
        load_dataset(dataset)
    (dataset / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    tools = (dataset / "tools.jsonl").read_text(encoding="utf-8").splitlines()
    (dataset / "tools.jsonl").write_text("\n".join([*tools, tools[1]]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"tools\.jsonl:16: the name 'sendEmail' is already on"):
        load_dataset(dataset)
    (dataset / "tools.jsonl").write_text("\n".join(tools) + "\n", encoding="utf-8")
    (dataset / "queries.jsonl").write_text('{"id": "x", "query": "q", "gold": [["a"]]}\n')
    with pytest.raises(ValueError, match=r"'gold' must be a non-empty list of tool names"):
        load_dataset(dataset)


@pytest.mark.parametrize("out", ["missing-dir/run.jsonl", "."])
def test_cli_bench_search_refuses_a_run_file_it_cannot_write_before_running(
    dataset: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    out: str,
) -> None:
    # It ran the whole benchmark (minutes of embedding for hybrid), then died with a
    # traceback when it wrote the run file.
    monkeypatch.chdir(tmp_path)
    ran: list[object] = []
    monkeypatch.setattr(bench, "run_index", lambda *args: ran.append(args))
    status = main(["bench", "search", "--dataset", str(dataset), "--index", "regex", "--out", out])
    assert status == 2
    assert not ran
    assert f"tooluse bench search: --out {out}:" in capsys.readouterr().err


def test_a_catalogue_that_is_not_utf8_is_named_with_its_line(tmp_path: Path) -> None:
    # Before: "'utf-8' codec can't decode byte 0xff in position 0" and no file or line.
    catalogue = tmp_path / "tools.jsonl"
    catalogue.write_bytes(b'{"name": "a"}\n\xff\xfe{"name": "b"}\n')
    with pytest.raises(ValueError, match=r"tools\.jsonl:2: not UTF-8"):
        bench.load_tools(catalogue)
