"""What every route refuses before it reads a request, and what every response says: hosts
that are not this service's (DNS rebinding), bodies over the size limit, JSON numbers JSON has
not got, JSON nested without end; 422s that do not echo their input; a page that no other
site may frame and that runs only its own script."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from _service_helpers import config, running, serve_without_listening
from tooluse.cli import main
from tooluse.service import ServiceConfig, create_app


def _app(tmp_path: Path, **changes: object) -> object:
    return create_app(config(tmp_path / "s.db", **changes))


async def test_a_host_that_is_not_the_services_is_refused(tmp_path: Path) -> None:
    async with running(_app(tmp_path, allowed_hosts=["qa.example"])) as http:
        for host in ("evil.example:8000", "evil.example", "localhost.evil.example"):
            refused = await http.get("/api/tools", headers={"Host": host})
            assert refused.status_code == 400, host
            assert "Host header" in refused.json()["detail"]
            assert "evil" not in refused.text
        v1 = await http.get("/v1/models", headers={"Host": "evil.example"})
        assert v1.status_code == 400 and "Host header" in v1.json()["error"]["message"]
        for host in ("localhost:8000", "127.0.0.1:8000", "[::1]:8000", "10.1.2.3", "QA.example"):
            assert (await http.get("/api/tools", headers={"Host": host})).status_code == 200


async def test_any_host_is_taken_when_the_allow_list_says_so(tmp_path: Path) -> None:
    async with running(_app(tmp_path, allowed_hosts=["*"])) as http:
        response = await http.get("/healthz", headers={"Host": "anything.example"})
        assert response.status_code == 200


async def test_the_page_may_not_be_framed_and_runs_only_its_own_script(tmp_path: Path) -> None:
    async with running(_app(tmp_path)) as http:
        page = await http.get("/")
        api = await http.get("/api/tools")
    policy = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy
    assert "unsafe-inline" not in policy
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]+'", policy)
    for response in (page, api):
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in api.headers["content-security-policy"]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
async def test_nan_and_infinity_in_a_body_are_a_400(tmp_path: Path, literal: str) -> None:
    headers = {"Content-Type": "application/json"}
    async with running(_app(tmp_path)) as http:
        for path, body in (
            ("/api/chat", f'{{"message": "hi", "conversation_id": {literal}}}'),
            ("/api/approvals/abc", f'{{"decisions": {{"c": {{"approve": {literal}}}}}}}'),
        ):
            response = await http.post(path, content=body, headers=headers)
            assert response.status_code == 400, (path, response.text)
            assert literal.lstrip("-") in response.json()["detail"]
        v1 = await http.post(
            "/v1/chat/completions",
            content=f'{{"model": "m", "messages": [], "temperature": {literal}}}',
            headers=headers,
        )
        assert v1.status_code == 400 and "JSON has no number" in v1.json()["error"]["message"]
        # JSON in UTF-16 (which Python's parser, and so the route, reads as well)
        wide = f'{{"message": "hi", "conversation_id": {literal}}}'.encode("utf-16")
        response = await http.post("/api/chat", content=wide, headers=headers)
        assert response.status_code == 400, response.text


async def test_edited_arguments_nested_a_thousand_deep_are_a_400(tmp_path: Path) -> None:
    nested = "[" * 1000 + "]" * 1000
    body = f'{{"decisions": {{"c": {{"approve": true, "arguments": {{"x": {nested}}}}}}}}}'
    async with running(_app(tmp_path)) as http:
        response = await http.post(
            "/api/approvals/abc", content=body, headers={"Content-Type": "application/json"}
        )
        deeper = "[" * 100_000 + "]" * 100_000  # deeper than Python's parser recurses
        parsed_deeper = await http.post(
            "/api/chat", content=deeper, headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 400 and "nested more than" in response.json()["detail"]
    assert parsed_deeper.status_code == 400


async def test_a_422_does_not_echo_the_input(tmp_path: Path) -> None:
    big = "x" * 100_000
    async with running(_app(tmp_path)) as http:
        response = await http.post("/api/chat", json={"message": big})
        no_type = await http.post("/api/chat", content=json.dumps({"message": "hi"}))
    assert response.status_code == 422
    assert len(response.content) < 1000 and "xxxx" not in response.text
    assert response.json()["detail"][0]["loc"] == ["body", "message"]
    assert no_type.status_code == 422
    assert "Content-Type: application/json" in no_type.json()["detail"][0]["msg"]


async def test_a_body_over_the_limit_is_a_413_on_every_route(tmp_path: Path) -> None:
    async with running(_app(tmp_path, max_request_bytes=10_000)) as http:
        body = {"message": "y" * 20_000}
        for path in ("/api/chat", "/api/approvals/abc", "/v1/chat/completions"):
            response = await http.post(path, json=body)
            assert response.status_code == 413, path
            assert "10,000 bytes" in response.text and "yyyy" not in response.text

        async def chunks():  # no Content-Length: counted as it arrives
            for _ in range(20):
                yield b"z" * 1000

        streamed = await http.post("/api/chat", content=chunks())
        assert streamed.status_code == 413
        assert (await http.post("/api/chat", json={"message": "small"})).status_code == 200


def test_the_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="max_request_bytes must be > 0"):
        ServiceConfig(max_request_bytes=0)
    with pytest.raises(TypeError, match="allowed_hosts takes a list"):
        ServiceConfig(allowed_hosts="qa.example")


async def test_an_asgi_client_without_a_host_header_is_served(tmp_path: Path) -> None:
    app = _app(tmp_path)
    async with running(app):
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            request = http.build_request("GET", "/healthz")
            del request.headers["host"]
            assert (await http.send(request)).status_code == 200


def test_serve_answers_for_its_host_name_and_the_allowed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configs: list[ServiceConfig] = []
    serve_without_listening(
        monkeypatch, lambda served: configs.append(served.app.state.service.config)
    )
    argv = ["serve", "--db", str(tmp_path / "s.db"), "--no-sample-knowledge", "--model", "test"]
    assert main([*argv, "--host", "qa.lan", "--allowed-host", "qa.example"]) == 0
    assert main([*argv, "--host", "0.0.0.0", "--max-request-bytes", "5000"]) == 0
    assert [(c.allowed_hosts, c.max_request_bytes) for c in configs] == [
        (("qa.example", "qa.lan"), 1024 * 1024),
        ((), 5000),
    ]


async def test_the_openapi_document_says_what_the_routes_send(tmp_path: Path) -> None:
    async with running(_app(tmp_path)) as http:
        paths = (await http.get("/openapi.json")).json()["paths"]
        not_allowed = await http.request("PUT", "/api/approvals/abc")
    assert set(paths["/api/approvals/{approval_id}"]["get"]["responses"]) == {
        "200", "400", "401", "404",
    }  # fmt: skip
    chat = paths["/api/chat"]["post"]["responses"]
    assert list(chat["200"]["content"]) == ["text/event-stream"]
    assert {"400", "413", "422"} <= set(chat)
    completions = paths["/v1/chat/completions"]["post"]["responses"]
    assert list(completions["200"]["content"]) == ["application/json", "text/event-stream"]
    assert "422" not in completions and {"400", "503"} <= set(completions)
    assert "OpenAIErrorBody" in json.dumps(completions["400"])  # not FastAPI's detail
    # Both routes of the path answer, so both methods are allowed (Starlette named the first).
    assert not_allowed.status_code == 405 and not_allowed.headers["allow"] == "GET, POST"
