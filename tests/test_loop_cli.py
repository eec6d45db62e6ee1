"""The ``tooluse`` command: subcommand registration and the offline ``demo``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from _rag_helpers import HashingEmbeddingModel
from _service_helpers import serve_without_listening
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


# -- MODULE:ATTRIBUTE: one loader for every command that takes one ----------------------------

_USER_TOOLS = '''
from helpers import PREFIX
from tooluse import tool


@tool(read_only=True)
def shout(text: str) -> str:
    """Say a text loudly."""
    return PREFIX + text.upper()


tools = [shout]
'''


@pytest.fixture
def user_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The user's my_tools.py (importing helpers.py next to it) in ``tmp_path``, which is the
    working directory and not on sys.path (as when the installed ``tooluse`` script runs)."""
    (tmp_path / "my_tools.py").write_text(_USER_TOOLS, encoding="utf-8")
    (tmp_path / "helpers.py").write_text("PREFIX = '!'\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    monkeypatch.delenv("TOOLUSE_MODEL", raising=False)
    monkeypatch.setattr("tooluse.embedding.default_embedding_model", HashingEmbeddingModel)
    for name in ("my_tools", "helpers"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield tmp_path
    for name in ("my_tools", "helpers"):
        sys.modules.pop(name, None)


def _loaded_tool_names(command: str, target: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tools ``tooluse COMMAND`` loads from ``target`` (run offline, nothing served)."""
    from tooluse import tool_callbacks

    names: list[str] = []
    if command == "serve":

        def serving(config: uvicorn.Config) -> None:
            names.extend(tool["name"] for tool in config.app.state.service.tool_descriptions())

        serve_without_listening(monkeypatch, serving)
        assert (
            cli.main(["serve", "--model", "test", "--tools", target, "--no-sample-knowledge"]) == 0
        )
    elif command == "mcp serve":

        def fake_serve_tools(*tools: object, **options: object) -> None:
            names.extend(callback.definition.name for callback in tool_callbacks(*tools))

        monkeypatch.setattr("tooluse.mcp._server.serve_tools", fake_serve_tools)
        assert cli.main(["mcp", "serve", target]) == 0
    elif command == "chat":
        assert (
            cli.main(
                ["chat", "--model", "test", "--tools", target, "--no-sample-knowledge", "shout hi"]
            )
            == 0
        )
    else:
        families = [{"name": "s", "questions": ["shout"], "expected_tools": ["shout"]}]
        Path("families.json").write_text(json.dumps({"families": families}), encoding="utf-8")
        assert (
            cli.main(["eval", "--model", "test", "families.json", "--runs", "1", "--tools", target])
            == 0
        )
    return names


@pytest.mark.parametrize("command", ["serve", "chat", "eval", "mcp serve"])
@pytest.mark.parametrize("target", ["my_tools:tools", "my_tools.py:tools"])
def test_tools_in_the_working_directory_load_in_every_command(
    command: str,
    target: str,
    user_tools: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    names = _loaded_tool_names(command, target, monkeypatch)
    out = capsys.readouterr().out
    if command == "chat":  # the offline router calls the tool the question names
        assert "-> shout(" in out and '<- shout: "!A"' in out, out
    elif command == "eval":
        assert out.startswith("ok   single chain | s #1 shout -> shout("), out
        assert "ok   two-stage | s #1 shout -> shout(" in out, out
    else:
        assert names == ["shout"]
    assert sys.modules["my_tools"].__file__ == str(user_tools / "my_tools.py")


def test_a_py_file_elsewhere_imports_the_modules_next_to_it(
    user_tools: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    names = _loaded_tool_names("mcp serve", f"{user_tools / 'my_tools.py'}:tools", monkeypatch)
    assert names == ["shout"]


@pytest.mark.parametrize(
    ("argv", "prefix"),
    [
        (["chat", "--tools", "{}", "hi"], "tooluse chat: --tools {}: "),
        (["mcp", "serve", "{}"], "tooluse mcp serve: "),
    ],
)
@pytest.mark.parametrize(
    ("target", "messages"),
    [
        (
            "not_my_tools:tools",
            [
                "cannot import 'not_my_tools': No module named 'not_my_tools'",
                "PYTHONPATH",
                "install the package",
                "path/to/not_my_tools.py:tools",
            ],
        ),
        ("not_my_tools.py:tools", ["no file 'not_my_tools.py' in the working directory"]),
        ("my_tools:missing", ["module 'my_tools' (", "has no attribute 'missing'"]),
        ("my_tools", ["expected MODULE:ATTRIBUTE or FILE.py:ATTRIBUTE"]),
        ("json.py:dumps", ["json.py cannot be imported as 'json'", "rename the file"]),
    ],
)
def test_a_target_that_does_not_load_says_what_to_do(
    argv: list[str],
    prefix: str,
    target: str,
    messages: list[str],
    user_tools: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (user_tools / "json.py").write_text("dumps = None\n", encoding="utf-8")
    assert cli.main([part.format(target) for part in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(prefix.format(target)), err
    for message in messages:
        assert message in err, err
    assert "Traceback" not in err


def test_a_module_whose_own_import_is_missing_names_it(
    user_tools: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (user_tools / "helpers.py").write_text("import no_such_dependency_xyz\n", encoding="utf-8")
    assert cli.main(["mcp", "serve", "my_tools:tools"]) == 2
    err = capsys.readouterr().err
    assert "cannot import 'my_tools': No module named 'no_such_dependency_xyz'" in err
    assert "which it imports; install that" in err and "PYTHONPATH" not in err


# -- help ----------------------------------------------------------------------------------------


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and the parsers of its subcommands, theirs too."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_help_shows_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLUSE_API_KEY", "s3cret-key")  # a default that must not be shown
    parser = cli.build_parser([command.name for command in cli.COMMANDS])
    checked = 0
    for sub in _parsers(parser):
        text = " ".join(sub.format_help().split())
        assert "s3cret-key" not in text and "``" not in text, sub.prog
        for action in sub._actions:
            default = action.default
            if (
                default is None
                or default is argparse.SUPPRESS
                or isinstance(default, bool)  # flags
                or default == []
                or isinstance(action, argparse._SubParsersAction)
            ):
                continue
            described = "default" in (action.help or "")  # e.g. "(default: $TOOLUSE_DB or ..."
            assert described or f"(default: {default})" in text, (sub.prog, action.dest)
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (
            ["bench", "search"],
            ["--index {regex,bm25,vector,hybrid} the index to build (default: hybrid)"],
        ),
        (["eval"], ["--runs RUNS times each question is asked (default: 3)", "(default: warning)"]),
        (["serve"], ["--log-level {debug,info,warning} log level (default: info)"]),
        (["chat"], ["--log-level {debug,info,warning} log level (default: warning)"]),
        (
            ["ingest"],
            [
                '--collection COLLECTION collection (default: "default", the service\'s)',
                "--chunk-size CHUNK_SIZE estimated tokens (default: 256)",
                "--chunk-overlap CHUNK_OVERLAP estimated tokens (default: 32)",
            ],
        ),
        (["mcp", "serve"], ["--path PATH HTTP path (default: /mcp)"]),
        (["demo"], ["(default: What is the weather, and what time is it?)"]),
    ],
)
def test_help_examples(
    argv: list[str], shown: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        cli.main([*argv, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for expected in shown:
        assert expected in text, text
    assert "--help show this help message and exit" in text  # no "(default: ...)" on flags


def test_bench_search_help_is_a_description_not_a_docstring(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["bench", "search", "--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "tooluse bench search``" not in out
    assert "Build one tool-search index over a benchmark dataset" in out
