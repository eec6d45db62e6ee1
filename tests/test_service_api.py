"""``tooluse serve``'s HTTP API: SSE chat, approvals across a restart, tools, health, page."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi import APIRouter

from _ports import free_port
from _service_helpers import (
    BIG_ACCOUNT,
    SCREEN_URL,
    config,
    fake_llm,
    names,
    parse_sse,
    respond,
    running,
    screenshot,
    screenshotting,
    service,
    transfer,
    transferring,
)
from tooluse.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
from tooluse.messages import Prompt, UserMessage
from tooluse.search import TOOL_SEARCH_TOOL_NAME
from tooluse.service import SAMPLE_TOOLS, ChatRequest, ServiceConfig, create_app
from tooluse.service._auth import request_caller
from tooluse.testing import FunctionModel, ResponseLike, tool_call


async def test_tool_question_streams_the_trace_then_the_answer(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        response = await client.post(
            "/api/chat", json={"message": "What's the weather in Paris?", "conversation_id": "c1"}
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.text)
    assert names(events) == ["tool_call", "tool_result", "route", "delta", "done"]
    call, result, route = (data for _, data in events[:3])
    assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"city": "Paris"})
    assert result["id"] == call["id"] and result["is_error"] is False
    assert json.loads(result["result"])["city"] == "Paris"
    assert route == {"route": "tools", "fetched": 1}
    done = events[-1][1]
    assert (
        done["answer"] == "From live data." == "".join(d["text"] for n, d in events if n == "delta")
    )
    assert (done["route"], done["sources"], done["conversation_id"]) == ("tools", [], "c1")


async def test_a_tool_result_s_images_stream_as_data_urls(tmp_path: Path) -> None:
    model = FunctionModel(screenshotting)
    async with service(tmp_path / "s.db", model=model, tools=[screenshot]) as client:
        response = await client.post("/api/chat", json={"message": "What is on screen?"})
    events = parse_sse(response.text)
    assert names(events) == ["tool_call", "tool_result", "route", "delta", "done"]
    assert events[1][1] == {
        "id": "s1",
        "name": "screenshot",
        "result": '{"caption":"the screen","shot":{"image":1,"mimeType":"image/png"}}',
        "is_error": False,
        "images": [SCREEN_URL],
    }


async def test_knowledge_question_is_answered_from_the_sample_documents(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        response = await client.post(
            "/api/chat", json={"message": "How many days do I have to return an item?"}
        )
        health = (await client.get("/healthz")).json()
    events = parse_sse(response.text)
    assert names(events) == ["route", "delta", "done"]
    assert events[0][1] == {"route": "knowledge", "fetched": 0}
    done = events[-1][1]
    assert done["answer"] == "From the knowledge base."
    assert done["sources"] and all(
        s["source"].startswith("tooluse-samples/") for s in done["sources"]
    )
    assert len(done["conversation_id"]) == 32  # a new conversation was opened
    assert health["knowledge"] == "ready" and health["documents"] > 0
    assert (health["offline"], health["model"]) == (False, "function")
    assert health["tools"] == len(SAMPLE_TOOLS)


async def test_the_answer_is_remembered_once_per_turn(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with service(db, model=fake_llm()) as client:
        for question in ("What's the weather in Paris?", "Any refund rules?"):
            response = await client.post(
                "/api/chat", json={"message": question, "conversation_id": "c1"}
            )
            assert names(parse_sse(response.text))[-1] == "done"
    with SqliteChatMemoryRepository(db) as repository:
        stored = MessageWindowChatMemory(repository=repository).get("c1")
    assert [m.text for m in stored] == [
        "What's the weather in Paris?",
        "From live data.",
        "Any refund rules?",
        "From the knowledge base.",
    ]


async def test_approval_survives_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with service(db, model=fake_llm()) as client:
        response = await client.post(
            "/api/chat", json={"message": "Cancel order A1001", "conversation_id": "c9"}
        )
    events = parse_sse(response.text)
    assert names(events) == ["tool_call", "approval_required"]
    paused = events[-1][1]
    assert [c["id"] for c in paused["pending_tool_calls"]] == ["cancel-1"]
    approval_id = paused["approval_id"]

    # A new app on the same file: the paused run is still there, also listed for its
    # conversation (what a reloaded page asks) and not for another one.
    async with service(db, model=fake_llm()) as client:
        listed = (await client.get("/api/approvals", params={"conversation_id": "c9"})).json()
        assert [item["approval_id"] for item in listed] == [approval_id]
        other = await client.get("/api/approvals", params={"conversation_id": "c1"})
        assert other.json() == []
        stored = (await client.get(f"/api/approvals/{approval_id}")).json()
        assert (stored["status"], stored["question"], stored["conversation_id"]) == (
            "pending",
            "Cancel order A1001",
            "c9",
        )
        wrong = await client.post(
            f"/api/approvals/{approval_id}", json={"decisions": {"other": {"approve": True}}}
        )
        assert wrong.status_code == 422 and "missing ['cancel-1']" in wrong.text
        resumed = await client.post(
            f"/api/approvals/{approval_id}", json={"decisions": {"cancel-1": {"approve": True}}}
        )
        again = await client.post(
            f"/api/approvals/{approval_id}", json={"decisions": {"cancel-1": {"approve": True}}}
        )
        finished = (await client.get(f"/api/approvals/{approval_id}")).json()
        unknown = await client.post("/api/approvals/nope", json={"decisions": {}})
        after = await client.get("/api/approvals", params={"conversation_id": "c9"})
        assert after.json() == []  # decided: no longer pending
        assert (await client.get("/api/approvals")).status_code == 422  # which conversation?

    events = parse_sse(resumed.text)
    assert names(events) == ["tool_result", "route", "delta", "done"]
    assert json.loads(events[0][1]["result"])["cancelled"] is True
    assert events[-1][1]["answer"] == "From live data."
    assert events[-1][1]["conversation_id"] == "c9"
    assert again.status_code == 409  # resumed once: the approved call never runs twice
    assert finished["status"] == "done"
    assert unknown.status_code == 404


async def test_a_denied_call_is_answered_without_data(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        paused = parse_sse((await client.post("/api/chat", json={"message": "cancel A1001"})).text)
        approval_id = paused[-1][1]["approval_id"]
        response = await client.post(
            f"/api/approvals/{approval_id}",
            json={"decisions": {"cancel-1": {"approve": False, "message": "Not today."}}},
        )
    events = parse_sse(response.text)
    assert events[0] == (
        "tool_result",
        {
            "id": "cancel-1",
            "name": "cancel_order",
            "result": "Not today.",
            "is_error": True,
            "images": [],
        },
    )
    assert events[1][1]["route"] == "knowledge"


async def test_an_approval_with_edited_arguments_runs_them(tmp_path: Path) -> None:
    # What the page's "Edit arguments" sends: the call runs with the edited arguments.
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        paused = parse_sse((await client.post("/api/chat", json={"message": "cancel A1001"})).text)
        approval_id = paused[-1][1]["approval_id"]
        edited = {"order_id": "B2", "reason": "<b>changed</b>"}
        response = await client.post(
            f"/api/approvals/{approval_id}",
            json={"decisions": {"cancel-1": {"approve": True, "arguments": edited}}},
        )
    events = parse_sse(response.text)
    assert events[0][0] == "tool_result" and events[0][1]["id"] == "cancel-1"
    assert json.loads(events[0][1]["result"]) == {
        "order_id": "B2",
        "cancelled": True,
        "reason": "<b>changed</b>",
        "sample": True,
    }
    assert names(events)[-1] == "done"


async def test_edited_arguments_sent_as_json_text_keep_their_numbers_exactly(
    tmp_path: Path,
) -> None:
    # The page sends the edited text as it is: JSON.parse in the browser would round
    # integers above 2**53. The service parses it.
    settings = {"model": FunctionModel(transferring), "tools": [transfer]}
    async with service(tmp_path / "s.db", **settings) as client:
        paused = parse_sse((await client.post("/api/chat", json={"message": "pay"})).text)
        approval_id = paused[-1][1]["approval_id"]
        url = f"/api/approvals/{approval_id}"
        refused = {
            text: await client.post(
                url, json={"decisions": {"t1": {"approve": True, "arguments": text}}}
            )
            for text in (
                '{"account": 1,',
                f"[{BIG_ACCOUNT}]",
                '{"account": NaN, "amount": 1}',
                '{"account": 1e400, "amount": 1}',
            )
        }
        still = (await client.get(url)).json()["status"]
        edited = f'{{"account": {BIG_ACCOUNT}, "amount": 6}}'
        response = await client.post(
            url, json={"decisions": {"t1": {"approve": True, "arguments": edited}}}
        )
    # The pending call's arguments are the model's text, the number as written.
    assert paused[-1][1]["pending_tool_calls"][0]["arguments"] == (
        f'{{"account": {BIG_ACCOUNT}, "amount": 5}}'
    )
    details = {text: r.json()["detail"] for text, r in refused.items()}
    assert {r.status_code for r in refused.values()} == {422} and still == "pending"
    assert {tuple(d["loc"]) for (d,) in details.values()} == {
        ("body", "decisions", "t1", "arguments")
    }
    assert [d["msg"] for (d,) in details.values()] == [
        "Value error, the edited arguments are not JSON: Expecting property name enclosed in "
        "double quotes: line 1 column 15 (char 14)",
        f"Value error, the edited arguments must be a JSON object ({{...}}), got '[{BIG_ACCOUNT}]'",
        "Value error, the edited arguments are not JSON: NaN is not a JSON number",
        "Value error, the edited arguments are not JSON: the number 1e400 is out of range",
    ]
    events = parse_sse(response.text)
    assert events[0][0] == "tool_result"
    assert json.loads(events[0][1]["result"]) == {"account": BIG_ACCOUNT, "amount": 6}
    assert names(events)[-1] == "done"


async def test_a_failing_model_ends_the_stream_with_an_error_event(tmp_path: Path) -> None:
    from tooluse.testing import FunctionModel

    def fail(prompt: object) -> str:
        raise ConnectionError("provider unreachable")

    async with service(tmp_path / "s.db", model=FunctionModel(fail)) as client:
        response = await client.post("/api/chat", json={"message": "Hi"})
    assert parse_sse(response.text) == [
        ("error", {"message": "provider unreachable", "type": "ConnectionError"})
    ]


async def test_a_configured_model_that_cannot_be_reached_is_not_called_offline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The offline notice is for a service given no model; one whose model is down says that.
    from tooluse.models import OpenAIChatModel
    from tooluse.service import OFFLINE_NOTICE

    caplog.set_level(logging.INFO, logger="tooluse.service")
    down = f"http://127.0.0.1:{free_port()}/v1"
    model = OpenAIChatModel("gpt-test", base_url=down, api_key="k", max_retries=0)
    async with service(tmp_path / "s.db", model=model) as client:
        health = (await client.get("/healthz")).json()
        page = (await client.get("/")).text
        response = await client.post("/api/chat", json={"message": "Hi"})
    assert health["offline"] is False and health["model"] == "gpt-test"
    assert 'id="offline"' not in page and OFFLINE_NOTICE not in caplog.text
    (error,) = [data for name, data in parse_sse(response.text) if name == "error"]
    assert "127.0.0.1" in error["message"], error


async def test_bad_requests_are_refused(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        assert (await client.post("/api/chat", json={"message": ""})).status_code == 422
        assert (await client.post("/api/chat", json={"message": "   "})).status_code == 422
        assert (await client.post("/api/chat", json={"text": "hi"})).status_code == 422
        assert (await client.get("/api/approvals/missing")).status_code == 404


async def test_a_lone_surrogate_in_a_bad_request_is_a_422_not_a_500(tmp_path: Path) -> None:
    # pydantic refuses "\ud800" in a str and echoes the input in its error; FastAPI's own
    # handler cannot encode that echo as UTF-8 and answered 500.
    bodies = [
        ("/api/chat", '{"message": "a\\ud800b"}'),
        ("/api/chat", '{"message": "hi", "\\ud800": 1}'),
        ("/api/chat", '{"message": "hi", "conversation_id": "\\udfff"}'),
        ("/api/approvals/x", '{"decisions": {}, "\\ud800": 1}'),
    ]
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        for url, body in bodies:
            response = await client.post(
                url, content=body, headers={"Content-Type": "application/json"}
            )
            assert response.status_code == 422, (url, body)
            assert response.json()["detail"][0]["type"] in ("string_unicode", "extra_forbidden")


async def test_tools_are_listed(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        tools = (await client.get("/api/tools")).json()
    by_name = {t["name"]: t for t in tools}
    assert set(by_name) == {
        "get_weather",
        "get_current_time",
        "get_order_status",
        "cancel_order",
        "find_pickup_locations",
    }
    assert by_name["cancel_order"]["requires_approval"] is True
    assert by_name["get_weather"]["requires_approval"] is False
    assert by_name["get_weather"]["input_schema"]["required"] == ["city"]


async def test_the_page_is_a_self_contained_chat_ui(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        page = await client.get("/")
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    for part in ('id="chat"', 'id="message"', "/api/chat", "/api/approvals/", "Approve", "Deny"):
        assert part in html
    assert "model: function" in html
    assert 'id="offline"' not in html  # a model is configured
    assert "<script src" not in html and "<link" not in html  # no CDN, no build step


async def test_the_page_keeps_what_a_browser_test_found(tmp_path: Path) -> None:
    # Found by driving the page in Chromium; checked here on the served page (no browser in
    # CI). See the comments in page.html for each.
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        html = (await client.get("/")).text
        favicon = await client.get("/favicon.ico")
    # The browser's icon request: no 404 in the console.
    assert favicon.status_code == 204
    # The box refuses what the API would refuse with a 422, and keeps it (maxlength cut a
    # longer paste short without a word).
    metadata = ChatRequest.model_fields["message"].metadata
    (limit,) = [m.max_length for m in metadata if hasattr(m, "max_length")]
    assert f"const MAX_MESSAGE = {limit};" in html and 'maxlength="' not in html
    # A delta is appended as a node: "textContent +=" took 49 s for a 320,000-character answer
    # in 750 pieces (1 s now).
    assert "text.append(data.text)" in html and "textContent += data.text" not in html
    # A 422's validation errors are shown as their messages, not as JSON echoing the input.
    assert "e.msg" in html and "JSON.stringify((await response.json()).detail)" not in html
    # A stream that closes without done / error / approval_required says it was cut off.
    assert "the connection closed before the answer was complete" in html
    # Requests refused together on load ask for the key once, in the page's key field (never
    # window.prompt), and a refused /api/tools is a message in the sidebar, not "tools is not
    # iterable".
    assert "if (sessionStorage.getItem(API_KEY) === key) await askForKey" in html
    assert "window.prompt" not in html and 'id="api-key"' in html
    assert "Tools not shown" in html
    # Approvals: arguments can be edited (sent as the text edited, whose numbers JSON.parse
    # would round); a decision that could not be sent can be sent again; the calls of a run
    # restored after a reload pair with their results.
    assert "Edit arguments" in html and "arguments: editor.value" in html
    assert "(try again)" in html
    assert 'turn.handle("tool_call", call)' in html
    # A call's line shows its arguments parsed (a model's \u escapes as the characters), and
    # a tool search as its query and the names found (test_service_page_browser.py).
    assert '"→ " + call.name + " " + compact(call.arguments)' in html
    assert f'const TOOL_SEARCH = "{TOOL_SEARCH_TOOL_NAME}";' in html
    # An approval's panel closes when its run expires, and a 410 reads as why it was gone.
    assert "close(gone.expired)" in html and "close(gone[run.status] || detail)" in html
    # A reload shows the stored turns through the live events' handlers (their stored trace,
    # route and sources too), each run still waiting in place of its turn's record, and says
    # why when it cannot.
    assert 'turn.handle("done", {answer: message.text, sources})' in html
    assert "sources = showEvents(turn, message.events)" in html
    assert "!waiting.has(message.paused_turn)" in html
    assert "Earlier messages of this conversation could not be shown" in html
    # An MCP tool is listed with its server.
    assert '"MCP: " + tool.mcp_server' in html


async def test_offline_mode_says_so_and_still_answers(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db") as client:
        page = (await client.get("/")).text
        health = (await client.get("/healthz")).json()
        tool_turn = parse_sse((await client.post("/api/chat", json={"message": "weather?"})).text)
        knowledge_turn = parse_sse(
            (await client.post("/api/chat", json={"message": "退货期限是多久？"})).text
        )
    assert 'id="offline"' in page and "TOOLUSE_MODEL" in page
    assert (health["offline"], health["model"]) == (True, "offline TestModel")
    assert names(tool_turn) == ["tool_call", "tool_result", "route", "delta", "done"]
    assert tool_turn[0][1]["name"] == "get_weather"
    assert tool_turn[-1][1]["answer"].startswith("[offline TestModel: ")
    assert names(knowledge_turn) == ["route", "delta", "done"]
    assert "Documents retrieved" in knowledge_turn[-1][1]["answer"]


async def slow_llm(prompt: Prompt) -> ResponseLike:
    await asyncio.sleep(0.25)  # a model thinking before its first token
    return respond(prompt)


async def test_a_quiet_stream_is_kept_alive_with_comments(tmp_path: Path) -> None:
    async with service(
        tmp_path / "s.db", model=FunctionModel(slow_llm), keepalive_seconds=0.05
    ) as client:
        response = await client.post("/api/chat", json={"message": "What's the weather?"})
    assert response.text.count(": keep-alive\n\n") >= 4  # two slow model calls
    assert names(parse_sse(response.text)) == ["tool_call", "tool_result", "route", "delta", "done"]


def test_keepalive_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keepalive_seconds must be > 0, got 0"):
        ServiceConfig(db=tmp_path / "s.db", keepalive_seconds=0)


async def test_an_api_key_guards_the_api_but_not_the_page(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db", model=fake_llm(), api_key="s3cret") as client:
        assert (await client.get("/")).status_code == 200
        assert (await client.get("/healthz")).status_code == 200
        refused = await client.get("/api/tools")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert "Authorization: Bearer" in refused.json()["detail"]
        wrong = {"Authorization": "Bearer guess"}
        assert (await client.get("/api/tools", headers=wrong)).status_code == 401
        chat = await client.post("/api/chat", json={"message": "Hi"})
        assert chat.status_code == 401
        right = {"Authorization": "Bearer s3cret"}
        assert (await client.get("/api/tools", headers=right)).status_code == 200
        answered = await client.post("/api/chat", json={"message": "Hi"}, headers=right)
        assert names(parse_sse(answered.text))[-1] == "done"


@pytest.mark.parametrize("key", ["", "  ", "two words"])
def test_a_blank_or_spaced_api_key_is_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="api_key must be a non-blank token"):
        ServiceConfig(db=tmp_path / "s.db", api_key=key)


async def test_a_blank_conversation_id_is_refused_before_the_stream(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        for blank in (" ", "\t\n"):
            response = await client.post(
                "/api/chat", json={"message": "Hi", "conversation_id": blank}
            )
            assert response.status_code == 422
            assert "conversation_id" in response.json()["detail"]


async def test_a_lone_surrogate_from_a_model_reaches_the_client(tmp_path: Path) -> None:
    # An SDK decodes a model's broken "\ud83d" escape to a lone surrogate, which UTF-8
    # cannot encode: it travels as a JSON escape instead of ending the run.
    def model(prompt: Prompt) -> ResponseLike:
        if prompt.options.tool_callbacks:
            last = prompt.messages[-1]
            if isinstance(last, UserMessage) and "cancel" in last.text:
                return tool_call("cancel_order", {"order_id": "A1\ud800"}, id="c1")
            return ""
        return "smile \ud83d, and 中文"

    async with service(tmp_path / "s.db", model=FunctionModel(model)) as client:
        answer = parse_sse((await client.post("/api/chat", json={"message": "Hi"})).text)
        paused = parse_sse(
            (
                await client.post(
                    "/api/chat", json={"message": "Please cancel A1", "conversation_id": "c1"}
                )
            ).text
        )
        listed = await client.get("/api/approvals", params={"conversation_id": "c1"})
    assert names(answer) == ["route", "delta", "done"]
    assert answer[-1][1]["answer"] == "smile \ud83d, and 中文"
    assert names(paused) == ["tool_call", "approval_required"]
    assert json.loads(paused[0][1]["arguments"]) == {"order_id": "A1\ud800"}
    assert listed.status_code == 200
    assert listed.json()[0]["pending_tool_calls"][0]["arguments"] == paused[0][1]["arguments"]


async def test_a_question_answered_without_fastapis_routing_is_the_one_it_would_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The request guard answers a question FastAPI would accept itself: the same answers as
    # by the route (forced by a dependency override), for tool, approval and knowledge
    # questions, a new conversation, refusals, wrong keys and bodies the route reports on;
    # only the bodies it does not take reach FastAPI's router.
    key = {"Authorization": "Bearer s3cret"}
    bodies: list[tuple[dict[str, Any] | str, dict[str, str]]] = [
        ({"message": "What's the weather in Paris?", "conversation_id": "c1"}, key),
        ({"message": "And tomorrow?", "conversation_id": "c1"}, key),
        ({"message": "Please cancel my order", "conversation_id": "c2"}, key),
        ({"message": "What is the refund policy?"}, key),
        ({"message": "Hi", "conversation_id": "c\x01"}, key),
        ({"message": "   "}, key),
        ({"message": "Hi"}, {"Authorization": "Bearer guess"}),
        ({"message": "Hi"}, {}),
        ({"message": ""}, key),
        ({"text": "hi"}, key),
        ("{not json", key),
    ]
    routed_paths: list[str] = []
    route_requests = APIRouter.__call__

    async def counting(router: APIRouter, scope: Any, receive: Any, send: Any) -> None:
        routed_paths.append(scope["path"])
        await route_requests(router, scope, receive, send)

    monkeypatch.setattr(APIRouter, "__call__", counting)

    async def answers(app: Any) -> list[tuple[int, str, str]]:
        seen = []
        async with running(app) as http:
            for body, headers in bodies:
                response = await http.post(
                    "/api/chat",
                    content=body if isinstance(body, str) else json.dumps(body),
                    headers={**headers, "Content-Type": "application/json"},
                )
                text = re.sub(r"[0-9a-f]{32}", "ID", response.text)  # new ids, approval ids
                text = re.sub(r'"expires_at": [\d.]+', '"expires_at": 0', text)
                seen.append((response.status_code, response.headers["content-type"], text))
        return seen

    direct = create_app(config(tmp_path / "a.db", model=fake_llm(), api_key="s3cret"))
    routed = create_app(config(tmp_path / "b.db", model=fake_llm(), api_key="s3cret"))
    routed.dependency_overrides[request_caller] = request_caller
    by_guard = await answers(direct)
    assert routed_paths == ["/api/chat"] * 3  # the empty message, the unknown field, not JSON
    by_route = await answers(routed)
    assert by_guard == by_route
    assert [status for status, _, _ in by_guard] == [200] * 4 + [422, 422, 401, 401] + [422] * 3
    assert [name for name, _ in parse_sse(by_guard[0][2])][:3] == [
        "tool_call",
        "tool_result",
        "route",
    ]
    assert [name for name, _ in parse_sse(by_guard[2][2])][-1] == "approval_required"
    assert '"conversation_id": "ID"' in by_guard[3][2]
