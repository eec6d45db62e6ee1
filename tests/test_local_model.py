"""The local model for real: llama.cpp (xllamacpp) serving Qwen2.5-Coder-0.5B, its engine's
life cycle, tool calls coming back structured, and the service answering with it.

The weights are installed by ``make test`` (``python -m tooluse.models.weights install
qwen2.5-coder-0.5b``); the whole file takes about half a minute on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from _service_helpers import parse_sse, running
from tooluse.cli import build_parser
from tooluse.cli._options import close_model, config_from_arguments
from tooluse.cli.serve import worker_options
from tooluse.messages import ChatOptions, Prompt, SystemMessage, UserMessage
from tooluse.models import LocalChatModel, from_config
from tooluse.models._llama_engine import DEFAULT_SLOTS, EngineError, LlamaEngine
from tooluse.models.weights import LOCAL_MODELS, WeightsError
from tooluse.service import ServiceConfig, create_app
from tooluse.service._samples import SAMPLE_TOOLS
from tooluse.streaming import merge_chunks
from tooluse.tools import tool_callbacks

SMALL = LOCAL_MODELS["qwen2.5-coder-0.5b"]
ROUTING = "Tools are only for live data: call the tool the question needs."
TOOLS = tuple(tool_callbacks(*SAMPLE_TOOLS))


@pytest.fixture(scope="module")
def model() -> Iterator[LocalChatModel]:
    local = from_config("local:qwen2.5-coder-0.5b", default_options=ChatOptions(temperature=0))
    assert isinstance(local, LocalChatModel)
    yield local
    local.close()


def _port_is_free(url: str) -> bool:
    parts = urlsplit(url)
    with socket.socket() as probe:
        return probe.connect_ex((parts.hostname or "", parts.port or 0)) != 0


def _weather_question() -> Prompt:
    return Prompt(
        (SystemMessage(text=ROUTING), UserMessage(text="What is the weather in Paris right now?")),
        ChatOptions(tool_callbacks=TOOLS),
    )


async def test_a_tool_call_comes_back_structured_whole_or_streamed(model: LocalChatModel) -> None:
    response = await model.acall(_weather_question())
    [call] = response.generations[0].message.tool_calls
    assert call.name == "get_weather" and json.loads(call.arguments)["city"] == "Paris"
    streamed = merge_chunks([chunk async for chunk in model.stream(_weather_question())])
    [again] = streamed.generations[0].message.tool_calls
    assert again.name == "get_weather" and json.loads(again.arguments)["city"] == "Paris"


async def test_the_answer_streams_as_it_is_generated(model: LocalChatModel) -> None:
    prompt = Prompt((UserMessage(text="Name three colours, one per line."),))
    pieces = [
        generation.message.text
        async for chunk in model.stream(prompt)
        for generation in chunk.generations
        if generation.message.text
    ]
    assert len(pieces) >= 3  # token by token, not one block at the end
    assert "".join(pieces).strip()


def test_the_engine_runs_its_slots_each_with_the_context_asked_for(
    model: LocalChatModel,
) -> None:
    engine = model.engine
    assert engine is not None and engine.slots == DEFAULT_SLOTS
    slots = httpx.get(f"{engine.url}/slots").json()
    assert len(slots) == DEFAULT_SLOTS
    assert {slot["n_ctx"] for slot in slots} == {SMALL.context_size}


def test_workers_of_the_service_share_the_supervisors_engine(
    model: LocalChatModel, tmp_path: Path
) -> None:
    argv = ["serve", "--model", "local:qwen2.5-coder-0.5b", "--workers", "2"]
    args = build_parser(argv).parse_args([*argv, "--db", str(tmp_path / "w.db")])
    options = json.loads(json.dumps(worker_options(args, model)))  # as the workers read them
    engines_before = _engine_processes()
    config = config_from_arguments(argparse.Namespace(**options))
    try:
        worker_model = config.model
        assert isinstance(worker_model, LocalChatModel) and worker_model.engine is None
        assert _engine_processes() == engines_before  # the worker started none
        reply = worker_model.call(
            Prompt((UserMessage(text="Say yes."),), ChatOptions(max_tokens=4, temperature=0))
        )
        assert reply.text.strip()
        assert config.router_grounded_arguments  # still run as a local model
    finally:
        close_model(config)
    assert model.engine is not None and model.engine.running  # the worker's close left it


def _engine_processes() -> set[int]:
    """The llama.cpp engines (children) of this process."""
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
    return {
        int(pid)
        for pid in children
        if "_llama_child" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    }


def test_the_engine_stops_and_frees_its_port() -> None:
    engine = LlamaEngine(str(SMALL.path()), alias="probe", threads=1, context_size=512)
    assert engine.running and httpx.get(f"{engine.url}/health").json() == {"status": "ok"}
    engine.stop()
    assert not engine.running and _port_is_free(engine.url)
    engine.stop()  # idempotent


def test_the_engine_ends_when_its_owner_is_killed(tmp_path: Path) -> None:
    script = (
        "import sys; from tooluse.models._llama_engine import LlamaEngine\n"
        f"engine = LlamaEngine({str(SMALL.path())!r}, alias='probe', threads=1, "
        "context_size=512)\n"
        "print(engine.pid, engine.url, flush=True); sys.stdin.read()\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    pid, url = owner.stdout.readline().split()
    owner.send_signal(signal.SIGKILL)  # no finalizer runs: the engine sees its stdin close
    owner.wait()
    deadline = time.monotonic() + 30
    while (_alive(int(pid)) or not _port_is_free(url)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(int(pid)) and _port_is_free(url)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # Its parent, the owner, is gone: it stays a zombie until init reaps it, and a zombie
    # whose last thread is still ending holds its port a moment more (checked apart).
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_missing_weights_name_the_command_that_installs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLUSE_MODELS_DIR", str(tmp_path))
    with pytest.raises(WeightsError, match=r"not installed at .*: run make models"):
        from_config("local:qwen2.5-coder-1.5b")
    with pytest.raises(WeightsError, match="No GGUF file at"):
        from_config(f"local:{tmp_path / 'missing.gguf'}")
    with pytest.raises(ValueError, match="Unknown local model 'gpt-9'"):
        from_config("local:gpt-9")


def test_a_missing_engine_names_the_extra_that_installs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # as if it were not installed
    with pytest.raises(EngineError, match=r"pip install 'tooluse\[local\]'"):
        LlamaEngine(str(SMALL.path()), alias="probe", threads=1, context_size=512)


async def test_the_service_answers_with_the_local_model(
    model: LocalChatModel, tmp_path: Path
) -> None:
    config = ServiceConfig(
        db=tmp_path / "s.db",
        model=model,
        query_compression=False,
        router_grounded_arguments=True,
    )
    async with running(create_app(config)) as client:
        tool_turn = parse_sse(
            (
                await client.post(
                    "/api/chat", json={"message": "What's the weather in Paris right now?"}
                )
            ).text
        )
        knowledge_turn = parse_sse(
            (
                await client.post(
                    "/api/chat", json={"message": "How many days do I have to return an item?"}
                )
            ).text
        )
    names = [name for name, _ in tool_turn]
    assert names[:3] == ["tool_call", "tool_result", "route"] and names[-1] == "done"
    assert tool_turn[0][1]["name"] == "get_weather"
    assert names.count("delta") >= 2  # the answer streamed
    weather = json.loads(tool_turn[1][1]["result"])
    answer = tool_turn[-1][1]["answer"].lower()
    assert str(weather["temperature"]) in answer or weather["sky"] in answer  # from the data
    done = knowledge_turn[-1][1]
    assert knowledge_turn[0][1]["route"] == "knowledge" and done["sources"]
    assert "30" in done["answer"]  # the returns document: 30 days


def test_the_spec_sets_the_engine_options_and_the_keyword_wins_for_slots() -> None:
    local = from_config("local:qwen2.5-coder-0.5b?slots=2&context=1024&threads=1", slots=1)
    try:
        assert isinstance(local, LocalChatModel) and local.engine is not None
        assert (local.engine.slots, local.engine.context_size, local.engine.threads) == (1, 1024, 1)
        assert [slot["n_ctx"] for slot in httpx.get(f"{local.engine.url}/slots").json()] == [1024]
    finally:
        local.close()


@pytest.mark.parametrize(
    ("spec", "slots", "error"),
    [
        ("local:qwen2.5-coder-0.5b?slot=2", None, "Unknown engine option 'slot'"),
        ("local:qwen2.5-coder-0.5b?slots=two", None, "slots takes a whole number"),
        ("local:?slots=2", None, "names no model"),
        ("ollama:qwen2.5", 2, "slots= is an option of local: models"),
    ],
)
def test_engine_options_that_cannot_apply_are_refused(
    spec: str, slots: int | None, error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        from_config(spec, slots=slots)
