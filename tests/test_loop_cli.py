"""The ``tooluse`` command: subcommand registration and the offline ``demo``."""

from __future__ import annotations

import json
import sys

import pytest

from tooluse import cli


def test_demo_runs_the_offline_loop(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "Weather?"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("tooluse offline demo: TestModel")
    assert lines[1] == "question: Weather?"
    calls = [line for line in lines if line.startswith("-> ")]
    results = [line for line in lines if line.startswith("<- ")]
    assert [c.split("(")[0] for c in calls] == ["-> get_weather", "-> current_time"]
    assert [r.split(":")[0] for r in results] == ["<- get_weather", "<- current_time"]
    answer = json.loads(lines[-1].removeprefix("answer: "))
    assert set(answer) == {"get_weather", "current_time"}
    assert answer["get_weather"]["temperature"] == 20


def test_demo_streams_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--stream"]) == 0
    out = capsys.readouterr().out
    assert "-> get_weather(" in out and "answer: {" in out


def test_only_the_chosen_subcommand_module_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        cli,
        "COMMANDS",
        (*cli.COMMANDS, cli.Command("broken", "tooluse.nonexistent_module", "never loaded")),
    )
    monkeypatch.delitem(sys.modules, "tooluse._demo", raising=False)
    cli.build_parser(["broken-not-chosen"])
    assert "tooluse._demo" not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        cli.build_parser(["broken"])


def test_a_module_without_run_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "COMMANDS", (cli.Command("json", "json", "not a command module"),))
    with pytest.raises(TypeError, match=r"The module json of `tooluse json` has no add_arguments"):
        cli.main(["json"])


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main([])
    assert "COMMAND" in capsys.readouterr().err
