"""``POST /v1/chat/completions`` through the official ``openai`` SDK."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from _service_helpers import config, fake_llm, parse_sse, post_scope, respond, running
from tooluse import tool
from tooluse.messages import Prompt, ToolResponseMessage, UserMessage
from tooluse.service import create_app
from tooluse.service._auth import request_caller
from tooluse.testing import FunctionModel, ResponseLike, tool_call


@contextlib.asynccontextmanager
async def openai_client(
    db: Path, model: FunctionModel, **changes: Any
) -> AsyncIterator[openai.AsyncOpenAI]:
    app = create_app(config(db, model=model, **changes))
    async with running(app):
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app))
        async with openai.AsyncOpenAI(
            base_url="http://localhost/v1", api_key="unused", http_client=http, max_retries=0
        ) as client:
            yield client


async def test_a_completion(tmp_path: Path) -> None:
    model = fake_llm()
    async with openai_client(tmp_path / "s.db", model) as client:
        completion = await client.chat.completions.create(
            model="tooluse-qa",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": [{"type": "text", "text": "weather in Paris?"}]},
            ],
        )
        models = await client.models.list()
    assert completion.choices[0].message.content == "From live data."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.object == "chat.completion"
    assert [m.id for m in models.data] == ["tooluse-qa"]
    # The earlier turns reach both stages as history; the client's system message does not.
    router = model.requests[0]
    assert [m.text for m in router.messages[1:]] == ["Hi", "Hello!", "weather in Paris?"]
    assert "Be brief." not in [m.text for m in model.requests[-1].messages]


async def test_a_streamed_completion(tmp_path: Path) -> None:
    async with openai_client(tmp_path / "s.db", fake_llm()) as client:
        stream = await client.chat.completions.create(
            model="tooluse-qa",
            messages=[{"role": "user", "content": "What is the refund policy?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "From the knowledge base."
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None


async def test_with_include_usage_every_chunk_has_a_usage_null_but_the_last(
    tmp_path: Path,
) -> None:
    # As OpenAI's reference says: a JavaScript client testing `chunk.usage !== null` read
    # the missing field as undefined, a usage, and failed on its prompt_tokens.
    app = create_app(config(tmp_path / "s.db", model=fake_llm()))
    body = {"messages": [{"role": "user", "content": "Refunds?"}], "stream": True}
    async with running(app) as http:
        counted = await http.post(
            "/v1/chat/completions", json=body | {"stream_options": {"include_usage": True}}
        )
        uncounted = await http.post("/v1/chat/completions", json=body)
    *chunks, usage, done = [data for _, data in parse_sse(counted.text)]
    assert done == "[DONE]" and len(chunks) > 2
    assert all(chunk["usage"] is None for chunk in chunks)
    assert usage["choices"] == [] and set(usage["usage"]) >= {"prompt_tokens", "total_tokens"}
    # Without it, no usage field at all, as OpenAI sends them.
    assert not any("usage" in data for _, data in parse_sse(uncounted.text)[:-1])


async def test_an_approval_is_explained_in_the_answer(tmp_path: Path) -> None:
    async with openai_client(tmp_path / "s.db", fake_llm()) as client:
        completion = await client.chat.completions.create(
            model="tooluse-qa", messages=[{"role": "user", "content": "Cancel order A1001"}]
        )
    content = completion.choices[0].message.content or ""
    assert "cancel_order" in content and "/api/approvals/" in content
    # Not "on the service's page": the page shows the runs of its own conversation, and
    # this run has none, so the page never showed it.
    assert "page" not in content


async def test_bad_requests_get_openai_errors(tmp_path: Path) -> None:
    async with openai_client(tmp_path / "s.db", fake_llm()) as client:
        with pytest.raises(openai.BadRequestError, match="last message must be the user's"):
            await client.chat.completions.create(
                model="tooluse-qa", messages=[{"role": "assistant", "content": "Hi"}]
            )
        with pytest.raises(openai.BadRequestError, match="only text content"):
            await client.chat.completions.create(
                model="tooluse-qa",
                messages=[
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "http://x"}}],
                    }
                ],
            )
        text_without_text: Any = [{"type": "text"}]
        with pytest.raises(openai.BadRequestError, match=r"content\[0\]: a text part needs"):
            await client.chat.completions.create(
                model="tooluse-qa", messages=[{"role": "user", "content": text_without_text}]
            )
        with pytest.raises(openai.BadRequestError, match="question is empty") as raised:
            await client.chat.completions.create(
                model="tooluse-qa", messages=[{"role": "user", "content": " "}]
            )
        assert raised.value.param == "messages[0].content"


async def test_a_failure_mid_stream_raises_in_the_sdk(tmp_path: Path) -> None:
    def fail(prompt: object) -> str:
        raise ConnectionError("provider unreachable")

    async with openai_client(tmp_path / "s.db", FunctionModel(fail)) as client:
        stream = await client.chat.completions.create(
            model="tooluse-qa", messages=[{"role": "user", "content": "Hi"}], stream=True
        )
        with pytest.raises(openai.APIError, match="provider unreachable"):
            async for _ in stream:
                pass


def test_history_keeps_user_and_assistant_turns_only() -> None:
    from tooluse.service._openai_api import OpenAIChatRequest, conversation

    request = OpenAIChatRequest.model_validate(
        {
            "messages": [
                {"role": "developer", "content": "rules"},
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": None, "tool_calls": []},
                {"role": "tool", "content": "x", "tool_call_id": "1"},
                {"role": "user", "content": "b"},
            ]
        }
    )
    question, history = conversation(request.messages)
    assert question == "b"
    assert history == [UserMessage(text="a")]


async def test_keepalive_comments_are_skipped_by_the_sdk(tmp_path: Path) -> None:
    async def slow(prompt: Prompt) -> ResponseLike:
        await asyncio.sleep(0.2)
        return respond(prompt)

    async with openai_client(tmp_path / "s.db", FunctionModel(slow), keepalive_seconds=0.05) as c:
        stream = await c.chat.completions.create(
            model="tooluse-qa",
            messages=[{"role": "user", "content": "What is the refund policy?"}],
            stream=True,
        )
        chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "From the knowledge base."


async def test_the_openai_endpoint_takes_the_service_key_as_the_sdk_sends_it(
    tmp_path: Path,
) -> None:
    app = create_app(config(tmp_path / "s.db", model=fake_llm(), api_key="s3cret"))
    messages: Any = [{"role": "user", "content": "What is the refund policy?"}]

    def sdk(key: str) -> openai.AsyncOpenAI:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app))
        return openai.AsyncOpenAI(
            base_url="http://localhost/v1", api_key=key, http_client=http, max_retries=0
        )

    async with running(app):
        async with sdk("s3cret") as client:
            done = await client.chat.completions.create(model="m", messages=messages)
        assert done.choices[0].message.content == "From the knowledge base."
        async with sdk("guess") as client:
            with pytest.raises(openai.AuthenticationError):
                await client.chat.completions.create(model="m", messages=messages)


async def test_stream_null_means_not_streamed_as_in_openais_api(tmp_path: Path) -> None:
    async with openai_client(tmp_path / "s.db", fake_llm()) as client:
        completion = await client.chat.completions.create(
            model="tooluse-qa",
            messages=[{"role": "user", "content": "weather in Paris?"}],
            extra_body={"stream": None},
        )
    assert completion.choices[0].message.content == "From live data."


async def test_an_answer_with_a_lone_surrogate_is_sent_escaped(tmp_path: Path) -> None:
    def model(prompt: Prompt) -> ResponseLike:
        return "" if prompt.options.tool_callbacks else "smile \ud83d"

    async with openai_client(tmp_path / "s.db", FunctionModel(model)) as client:
        completion = await client.chat.completions.create(
            model="tooluse-qa", messages=[{"role": "user", "content": "Hi"}]
        )
        stream = await client.chat.completions.create(
            model="tooluse-qa", messages=[{"role": "user", "content": "Hi"}], stream=True
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert completion.choices[0].message.content == "smile \ud83d" == streamed


async def test_a_model_is_retrieved_by_its_id_as_in_openais_api(tmp_path: Path) -> None:
    async with openai_client(tmp_path / "s.db", fake_llm()) as client:
        model = await client.models.retrieve("tooluse-qa")
        listed = (await client.models.list()).data
        with pytest.raises(openai.NotFoundError) as raised:
            await client.models.retrieve("gpt-4o")
        with pytest.raises(openai.NotFoundError, match="'org/model' does not exist"):
            await client.models.retrieve("org/model")  # sent as org%2Fmodel
    assert model == listed[0]
    assert (model.id, model.object, model.owned_by) == ("tooluse-qa", "model", "tooluse")
    assert raised.value.code == "model_not_found"
    assert raised.value.type == "invalid_request_error"
    assert "'gpt-4o' does not exist" in raised.value.message
    assert "tooluse-qa" in raised.value.message  # the id that does


def _openai_error(response: httpx.Response, status: int) -> dict[str, Any]:
    """The ``error`` object of an answer in OpenAI's error format, checked."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    error: dict[str, Any] = body["error"]
    return error


async def test_invalid_bodies_get_400_in_openais_error_format(tmp_path: Path) -> None:
    # OpenAI answers a body it cannot take with 400 {"error": {...}}, which the SDKs raise as
    # BadRequestError; FastAPI's 422 {"detail": [...]} became UnprocessableEntityError.
    app = create_app(config(tmp_path / "s.db", model=fake_llm()))
    user: Any = {"role": "user", "content": "Hi"}
    bodies: list[tuple[Any, str | None]] = [
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": "Hi"}, "messages"),
        ({"model": "m", "messages": [{"role": "robot", "content": "Hi"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"content": "Hi"}]}, "messages[0].role"),
        ({"model": "m", "messages": [user, {"role": "user", "content": 5}]}, "messages[1].content"),
        ({"model": "m", "messages": [user], "stream": "maybe"}, "stream"),
        # Not used, but refused where OpenAI refuses them: a client's bug shows here too.
        ({"model": "m", "messages": [user], "max_tokens": 0}, "max_tokens"),
        ({"model": "m", "messages": [user], "max_completion_tokens": -1}, "max_completion_tokens"),
        ({"model": "m", "messages": [user], "max_tokens": 1.5}, "max_tokens"),
        ({"model": "m", "messages": [user], "temperature": 2.5}, "temperature"),
        ({"model": "m", "messages": [user], "top_p": 1.5}, "top_p"),
        ({"model": "m", "messages": [user], "presence_penalty": -3}, "presence_penalty"),
        ({"model": "m", "messages": [user], "frequency_penalty": "high"}, "frequency_penalty"),
    ]
    async with running(app) as http:
        for body, param in bodies:
            error = _openai_error(await http.post("/v1/chat/completions", json=body), 400)
            assert (error["type"], error["param"]) == ("invalid_request_error", param), body
        json_type = {"content-type": "application/json"}
        not_json = await http.post("/v1/chat/completions", content=b"{x", headers=json_type)
        assert _openai_error(not_json, 400)["type"] == "invalid_request_error"
        # JSON sent as a form (curl -d without -H): read as bytes, not as JSON.
        form = {"content-type": "application/x-www-form-urlencoded"}
        as_form = await http.post("/v1/chat/completions", content=b'{"messages": []}', headers=form)
        assert _openai_error(as_form, 400)["message"] == (
            "the body was not read as JSON: send it with the header Content-Type: application/json"
        )
        a_list = await http.post("/v1/chat/completions", json=[user])
        assert _openai_error(a_list, 400)["message"] == (
            'the body must be a JSON object ({"model": ..., "messages": [...]}), got an array'
        )
        # /api/chat keeps its documented 422.
        assert (await http.post("/api/chat", json={})).status_code == 422
    async with openai_client(tmp_path / "t.db", fake_llm()) as client:
        robot: Any = [{"role": "robot", "content": "Hi"}]
        with pytest.raises(openai.BadRequestError) as raised:
            await client.chat.completions.create(model="m", messages=robot)
    assert raised.value.param == "messages[0].role"
    async with openai_client(tmp_path / "u.db", fake_llm()) as client:
        with pytest.raises(openai.BadRequestError, match="max_tokens: Input should be") as raised:
            await client.chat.completions.create(model="m", messages=[user], max_tokens=0)
        assert raised.value.param == "max_tokens"
        # The bounds themselves are taken, as OpenAI takes them.
        edges: dict[str, Any] = {"max_tokens": 1, "temperature": 2, "top_p": 0}
        done = await client.chat.completions.create(model="m", messages=[user], **edges)
        assert done.choices[0].message.content


async def test_other_errors_of_the_v1_routes_are_in_openais_format(tmp_path: Path) -> None:
    app = create_app(config(tmp_path / "s.db", model=fake_llm(), api_key="s3cret"))
    async with running(app) as http:
        key = {"Authorization": "Bearer s3cret"}
        no_key = await http.post("/v1/chat/completions", json={"messages": []})
        assert _openai_error(no_key, 401)["code"] == "invalid_api_key"
        assert no_key.headers["www-authenticate"] == "Bearer"
        _openai_error(await http.get("/v1/nothing-here", headers=key), 404)
        _openai_error(await http.get("/v1/chat/completions", headers=key), 405)
        # The service's own API keeps FastAPI's format.
        assert "detail" in (await http.get("/api/tools")).json()


async def test_a_failed_completion_is_a_500_in_openais_error_format(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The run's exception escaped the endpoint: a bare "Internal Server Error" text (here,
    # in-process, the exception itself), which the SDKs can only show as such.
    def fail(prompt: object) -> str:
        raise ConnectionError("provider unreachable")

    app = create_app(config(tmp_path / "s.db", model=FunctionModel(fail)))
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    async with running(app) as http:
        error = _openai_error(await http.post("/v1/chat/completions", json=body), 500)
        streamed = parse_sse(
            (await http.post("/v1/chat/completions", json=body | {"stream": True})).text
        )
    assert error["type"] == "server_error" and "provider unreachable" in error["message"]
    assert "chat completion" in caplog.text and "provider unreachable" in caplog.text
    # Mid-stream, the same error object in a chunk of its own.
    assert streamed[-1] == ("message", {"error": error})
    async with openai_client(tmp_path / "t.db", FunctionModel(fail)) as client:
        with pytest.raises(openai.InternalServerError, match="provider unreachable") as raised:
            await client.chat.completions.create(model="m", messages=body["messages"])  # type: ignore[arg-type]
    assert raised.value.type == "server_error"


async def test_a_completion_that_failed_after_its_tools_ran_is_not_retried_by_the_sdk(
    tmp_path: Path,
) -> None:
    # The SDK retries a 500 (twice by default), and each retry was a new run calling the
    # tools again: an order placed three times for one question.
    placed: list[str] = []

    @tool(requires_approval=False)  # runs unasked: the test is about the SDK's retries
    def place_order(item: str) -> str:
        """Place an order for an item."""
        placed.append(item)
        return f"order for {item} placed"

    def model(prompt: Prompt) -> ResponseLike:
        if prompt.options.tool_callbacks:  # the router: order once, then stop
            if isinstance(prompt.messages[-1], ToolResponseMessage):
                return ""
            return tool_call("place_order", {"item": "tea"})
        raise ConnectionError("provider unreachable")  # the answer stage fails

    app = create_app(config(tmp_path / "s.db", model=FunctionModel(model), tools=[place_order]))
    messages: Any = [{"role": "user", "content": "Order tea"}]
    async with running(app):
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app))
        async with openai.AsyncOpenAI(
            base_url="http://localhost/v1", api_key="unused", http_client=http, max_retries=2
        ) as client:
            with pytest.raises(openai.InternalServerError, match="after the tools place_order"):
                await client.chat.completions.create(model="m", messages=messages)
    assert placed == ["tea"]


async def test_what_the_service_cannot_give_is_a_400_not_an_answer_of_another_shape(
    tmp_path: Path,
) -> None:
    # n=2 got one choice, tool_choice "required" an answer without tool calls, a JSON
    # response_format prose, logprobs none: answers a client reading them as asked fails on.
    messages: Any = [{"role": "user", "content": "What is the refund policy?"}]
    tool: Any = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    named: Any = {"type": "function", "function": {"name": "f"}}
    schema: Any = {"type": "json_schema", "json_schema": {"name": "a", "schema": {}}}
    refused: list[tuple[dict[str, Any], str]] = [
        ({"n": 2}, "n"),
        ({"n": 0}, "n"),
        ({"tools": [tool], "tool_choice": "required"}, "tool_choice"),
        ({"tools": [tool], "tool_choice": named}, "tool_choice"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"response_format": schema}, "response_format"),
        ({"logprobs": True}, "logprobs"),
        ({"logprobs": True, "top_logprobs": 2}, "logprobs"),
    ]
    async with openai_client(tmp_path / "s.db", fake_llm()) as client:
        for extra, param in refused:
            with pytest.raises(openai.BadRequestError) as raised:
                await client.chat.completions.create(model="m", messages=messages, **extra)
            assert raised.value.param == param, extra
        # What it can give: one choice, tools left unused (documented), plain text.
        taken: list[dict[str, Any]] = [
            {"n": 1},
            {"tools": [tool]},
            {"tools": [tool], "tool_choice": "auto"},
            {"tool_choice": "none"},
            {"response_format": {"type": "text"}},
            {"logprobs": False},
        ]
        for extra in taken:
            done = await client.chat.completions.create(model="m", messages=messages, **extra)
            assert [c.message.content for c in done.choices] == ["From the knowledge base."]


async def test_a_client_leaving_a_completion_before_its_answer_cancels_the_run(
    tmp_path: Path,
) -> None:
    # A non-streamed run went on to its end (model calls, tools) for a client that had gone
    # (a timeout; the SDK then retries: three runs for one question).
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow(prompt: Prompt) -> ResponseLike:
        if prompt.options.tool_callbacks:
            return ""
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "too late"

    app = create_app(config(tmp_path / "s.db", model=FunctionModel(slow)))
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Hi"}]}).encode()
    incoming: list[dict[str, Any]] = [{"type": "http.request", "body": body, "more_body": False}]
    gone = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        pass

    path = "/v1/chat/completions"
    scope = post_scope(path)
    async with running(app):
        call = asyncio.create_task(app(scope, receive, send))
        await asyncio.wait_for(started.wait(), 5)
        gone.set()
        await asyncio.wait_for(call, 5)
    assert cancelled.is_set()


async def test_a_completion_answered_without_fastapis_routing_is_the_one_it_would_give(
    tmp_path: Path,
) -> None:
    # The request guard answers a chat completion FastAPI would accept itself: the same
    # answers as by the route (forced by a dependency override), for streams, completions,
    # refusals, wrong keys and bodies the route reports on.
    messages: Any = [{"role": "user", "content": "weather in Paris?"}]
    bodies: list[tuple[dict[str, Any] | str, str]] = [
        ({"model": "m", "messages": messages, "stream": True}, "s3cret"),
        ({"model": "m", "messages": messages, "stream_options": {"include_usage": True}}, "s3cret"),
        ({"model": "m", "messages": messages}, "s3cret"),
        ({"model": "m", "messages": messages, "n": 2}, "s3cret"),
        ({"model": "m", "messages": [{"role": "assistant", "content": "hi"}]}, "s3cret"),
        ({"model": "m", "messages": messages}, "guess"),
        ({"model": "m", "messages": []}, "s3cret"),
        ("{not json", "s3cret"),
    ]

    async def answers(app: Any) -> list[tuple[int, str, str]]:
        seen = []
        async with running(app) as http:
            for body, key in bodies:
                response = await http.post(
                    "/v1/chat/completions",
                    content=body if isinstance(body, str) else json.dumps(body),
                    headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
                )
                text = re.sub(r"chatcmpl-[0-9a-f]{32}", "ID", response.text)
                text = re.sub(r'"created": ?\d+', '"created": T', text)
                seen.append((response.status_code, response.headers["content-type"], text))
        return seen

    direct = create_app(config(tmp_path / "a.db", model=fake_llm(), api_key="s3cret"))
    routed = create_app(config(tmp_path / "b.db", model=fake_llm(), api_key="s3cret"))
    routed.dependency_overrides[request_caller] = request_caller
    by_guard, by_route = await answers(direct), await answers(routed)
    assert by_guard == by_route
    assert [status for status, _, _ in by_guard] == [200, 200, 200, 400, 400, 401, 400, 400]
    assert "data: [DONE]" in by_guard[0][2] and '"content":"From live data."' in by_guard[2][2]
