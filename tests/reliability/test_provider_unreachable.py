"""A model provider nobody answers for: one line naming it, its URL and what to check, in the
terminal, in the service's answers (503 for /v1) and in its log; no traceback, and the
service keeps serving."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import anthropic
import httpx2
import openai
import pytest

from _ports import free_port
from _service_helpers import config, parse_sse, running
from tooluse.models import ProviderConnectionError, ProviderError, from_config
from tooluse.models._errors import from_sdk_error
from tooluse.service import create_app


def _connection_error(sdk: object, url: str) -> Exception:
    """What the SDK raises when nothing listens at ``url`` (after its retries)."""
    request = httpx2.Request("POST", url)
    error: Exception = sdk.APIConnectionError(request=request)  # type: ignore[attr-defined]
    error.__cause__ = httpx2.ConnectError("All connection attempts failed", request=request)
    return error


@pytest.mark.parametrize(
    ("sdk", "url", "expected"),
    [
        (
            openai,
            "http://localhost:11434/v1/chat/completions",
            "could not reach Ollama at http://localhost:11434 (All connection attempts failed): "
            "is `ollama serve` running?",
        ),
        (
            openai,
            "http://127.0.0.1:8001/v1/chat/completions",
            "could not reach openai at http://127.0.0.1:8001 (All connection attempts failed): "
            "is its server running, on that port?",
        ),
        (
            anthropic,
            "https://api.anthropic.com/v1/messages",
            "could not reach anthropic at https://api.anthropic.com (All connection attempts "
            "failed): check the network, and the base URL (a proxy in between?)",
        ),
    ],
)
def test_a_provider_that_cannot_be_reached_is_named_with_its_url(
    sdk: object, url: str, expected: str
) -> None:
    provider = "anthropic" if sdk is anthropic else "openai"
    error = from_sdk_error(provider, _connection_error(sdk, url), sdk)  # type: ignore[arg-type]
    assert isinstance(error, ProviderConnectionError) and error.retryable
    assert isinstance(error, ProviderError)  # what callers catch
    assert str(error) == expected
    assert error.url == url.split("/v1")[0]


def _unreachable_spec(port: int) -> str:
    return f"openai-compatible:some-model@http://127.0.0.1:{port}/v1"


async def test_the_service_answers_a_provider_down_with_its_reason_and_keeps_serving(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()  # nothing listens there
    model = from_config(_unreachable_spec(port), max_retries=0)
    expected = f"could not reach openai at http://127.0.0.1:{port}"
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    caplog.set_level(logging.INFO, logger="tooluse")
    async with running(create_app(config(tmp_path / "s.db", model=model))) as http:
        page = parse_sse((await http.post("/api/chat", json={"message": "Hi"})).text)
        completion = await http.post("/v1/chat/completions", json=body)
        streamed = parse_sse(
            (await http.post("/v1/chat/completions", json=body | {"stream": True})).text
        )
        assert (await http.get("/healthz")).status_code == 200  # still serving
    assert page[-1][0] == "error" and page[-1][1]["message"].startswith(expected)
    assert page[-1][1]["message"].endswith("is its server running, on that port?")
    assert completion.status_code == 503
    assert completion.json()["error"]["message"].startswith(expected)
    assert streamed[-1][1]["error"]["message"].startswith(expected)
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(failures) == 3
    assert all(r.exc_info is None and expected in r.getMessage() for r in failures)


def test_chat_says_in_one_line_that_the_provider_cannot_be_reached(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "tooluse.cli", "chat", "Hi", "--model"]
    command += [_unreachable_spec(port), "--db", str(tmp_path / "c.db"), "--no-sample-knowledge"]
    env = {name: value for name, value in os.environ.items() if name != "TOOLUSE_MODEL"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"tooluse chat: could not reach openai at http://127.0.0.1:{port} (All connection "
        "attempts failed): is its server running, on that port?"
    ]
