"""``tooluse tools`` and ``tooluse search``: the catalogue the model is offered, and what tool
search finds in it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tooluse.cli import main


def test_tools_lists_the_sample_tools_with_their_marks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["tools"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == [
        "get_weather",
        "get_current_time",
        "get_order_status",
        "cancel_order",
        "find_pickup_locations",
    ]
    assert lines[0].split("\t")[1].startswith("[read-only] ")
    assert lines[3].split("\t")[1].startswith("[approval] [destructive] Cancel an order")


def test_tools_json_gives_the_definitions_the_model_sees(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["tools", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    weather = listing[0]
    assert weather["name"] == "get_weather"
    assert weather["input_schema"]["required"] == ["city"]
    assert (weather["return_direct"], weather["requires_approval"]) == (False, False)
    assert (weather["read_only"], weather["destructive"]) == (True, False)
    assert listing[3]["requires_approval"] is True
    assert (listing[3]["read_only"], listing[3]["destructive"]) == (False, True)


def test_tools_reads_your_module_and_refuses_what_is_not_a_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "shop_tools.py").write_text(
        "from tooluse import tool\n"
        "@tool(return_direct=True)\n"
        "def refund(order_id: str) -> str:\n"
        '    """Refund an order."""\n'
        "    return 'done'\n"
        "tools = [refund]\n"
        "not_tools = [42]\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["tools", "--tools", "shop_tools:tools"]) == 0
    assert capsys.readouterr().out == "refund\t[return direct] Refund an order.\n"
    assert main(["tools", "--tools", "shop_tools:not_tools"]) == 2
    assert capsys.readouterr().err.startswith("tooluse tools: --tools: ")


def test_search_ranks_the_sample_tools(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "weather in Paris", "--index", "bm25", "--max-results", "1"]) == 0
    captured = capsys.readouterr()
    rank, score, name = captured.out.split()[:3]
    assert (rank, name) == ("1", "get_weather") and float(score) > 0
    assert captured.err == "1 of 5 tools (bm25 index)\n"


CATALOGUE = [
    {"name": "get_weather", "description": "查询城市当前天气", "category": "weather"},
    {"name": "send_mail", "description": "Send an email to a person", "category": "mail"},
    {"name": "read_mail", "description": "Read the emails in a mailbox", "category": "mail"},
]


def write_catalogue(directory: Path) -> Path:
    path = directory / "tools.jsonl"
    path.write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in CATALOGUE), "utf-8"
    )
    return path


def test_search_a_catalogue_file_or_its_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_catalogue(tmp_path)
    assert main(["search", "查询天气", "--catalogue", str(path), "--index", "regex", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [tool["name"] for tool in found] == ["get_weather"]
    assert found[0]["category"] == "weather" and found[0]["score"] > 0
    argv = ["search", "email", "--catalogue", str(tmp_path), "--index", "bm25", "--json"]
    assert main([*argv, "--category", "MAIL"]) == 0
    assert {tool["name"] for tool in json.loads(capsys.readouterr().out)} == {
        "send_mail",
        "read_mail",
    }


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--category", "travel"], "no tool has the category 'travel'"),
        (["--max-results", "0"], "max_results must be a positive integer"),
        (["--tools", "tooluse.service:SAMPLE_TOOLS"], "give either --catalogue or --tools"),
    ],
)
def test_search_reports_bad_options_without_a_traceback(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_catalogue(tmp_path)
    argv = ["search", "mail", "--catalogue", str(path), "--index", "bm25", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tooluse search: ") and message in err and "Traceback" not in err


def test_search_a_missing_catalogue_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", "x", "--catalogue", str(tmp_path / "none.jsonl")]) == 2
    assert "tooluse search: " in capsys.readouterr().err


def test_tools_says_which_mcp_server_each_tool_comes_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = Path(__file__).parent / "mcp_servers" / "sdk_server.py"
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"sdk": {"command": sys.executable, "args": [str(server)]}}})
    )
    assert main(["tools", "--mcp", str(config)]) == 0
    lines = dict(line.split("\t", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["echo"].startswith("[read-only] [mcp: sdk] ")
    assert all("[mcp: sdk] " in marks for marks in lines.values())
