"""``POST /v1/chat/completions``: the QA pipeline behind OpenAI's Chat Completions API, so any
OpenAI client (the official SDKs, LangChain, curl) can use the service."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import secrets
import time
from collections.abc import (
    AsyncGenerator,
    Coroutine,
    Mapping,
    Sequence,
)
from typing import Any, Literal, TypeVar

import pydantic
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from tooluse.calling import Caller
from tooluse.messages import AssistantMessage, Message, UserMessage
from tooluse.service._auth import RequestCaller, request_caller
from tooluse.service._openapi import V1_COMPLETION, V1_ERRORS, with_statuses
from tooluse.service._runs import complete_request, live_events
from tooluse.service._service import QaService, run_context
from tooluse.service._sse import (
    JsonTextResponse,
    completion_events,
    json_text,
    sse,
    sse_response,
)

__all__ = [
    "OPENAI_MODEL_ID",
    "BadRequest",
    "OpenAIChatRequest",
    "chat_completion",
    "check_supported",
    "conversation",
    "is_openai_path",
    "may_answer_directly",
    "openai_error",
    "openai_http_error",
    "openai_router",
    "openai_validation_error",
]

logger = logging.getLogger("tooluse.service")

_T = TypeVar("_T")

COMPLETIONS_PATH = "/v1/chat/completions"

OPENAI_MODEL_ID = "tooluse-qa"
"""The one model ``GET /v1/models`` lists, and the ``model`` every completion and chunk
names (the model behind it is on ``/healthz``); the ``model`` of a request is not used."""


class OpenAIMessage(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None


class OpenAIChatRequest(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")  # temperature, tools, ... are not used

    model: str = OPENAI_MODEL_ID
    messages: list[OpenAIMessage] = pydantic.Field(min_length=1)
    stream: bool | None = False  # null is false, as in OpenAI's API
    stream_options: dict[str, Any] | None = None
    # Not used (the service's models have their own options), but refused where OpenAI
    # refuses them, so that a client's bug (max_tokens computed as 0) shows here as there.
    max_tokens: int | None = pydantic.Field(default=None, ge=1)
    max_completion_tokens: int | None = pydantic.Field(default=None, ge=1)
    temperature: float | None = pydantic.Field(default=None, ge=0, le=2)
    top_p: float | None = pydantic.Field(default=None, ge=0, le=1)
    presence_penalty: float | None = pydantic.Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = pydantic.Field(default=None, ge=-2, le=2)


class BadRequest(ValueError):
    """A request the service cannot answer, reported in OpenAI's error format (``param``:
    the field at fault)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def check_supported(request: OpenAIChatRequest) -> None:
    """Refuse what would make an answer of another shape than asked: more than one choice,
    a tool call forced, JSON, log probabilities. Tools, sampling parameters and ``model`` are
    left unused."""
    extra = request.model_extra or {}
    n = extra.get("n")
    if n is not None and n != 1:
        raise BadRequest(f"n: the service gives one choice per request (n=1), got {n!r}", "n")
    tool_choice = extra.get("tool_choice")
    if tool_choice not in (None, "auto", "none"):
        raise BadRequest(
            "tool_choice: the service calls its own tools and never answers with a tool call "
            f"of the client's; 'auto' or 'none' only, got {tool_choice!r}",
            "tool_choice",
        )
    response_format = extra.get("response_format")
    if response_format is not None and (
        not isinstance(response_format, dict) or response_format.get("type") != "text"
    ):
        raise BadRequest(
            "response_format: the service answers in text only ({'type': 'text'}), got "
            f"{response_format!r}",
            "response_format",
        )
    if extra.get("logprobs") not in (None, False):
        raise BadRequest(
            "logprobs: the service's answers carry no log probabilities; leave it out or false",
            "logprobs",
        )


def _text(message: OpenAIMessage, position: int) -> str:
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for index, part in enumerate(content):
        if part.get("type") != "text":
            raise BadRequest(
                f"messages[{position}]: only text content is supported, got a "
                f"{part.get('type')!r} part",
                f"messages[{position}].content",
            )
        if not isinstance(part.get("text"), str):
            raise BadRequest(
                f"messages[{position}].content[{index}]: a text part needs 'text', a string",
                f"messages[{position}].content",
            )
        texts.append(part["text"])
    return "".join(texts)


def conversation(messages: list[OpenAIMessage]) -> tuple[str, list[Message]]:
    """The question (the last message, which must be the user's) and the history before it.
    System and tool messages are left out: the service has its own instructions and tools."""
    last = messages[-1]
    if last.role != "user":
        raise BadRequest(
            f"the last message must be the user's question, got role {last.role!r}",
            f"messages[{len(messages) - 1}].role",
        )
    question = _text(last, len(messages) - 1)
    if not question.strip():
        raise BadRequest("the user's question is empty", f"messages[{len(messages) - 1}].content")
    history: list[Message] = []
    for position, message in enumerate(messages[:-1]):
        text = _text(message, position)
        if message.role == "user":
            history.append(UserMessage(text=text))
        elif message.role == "assistant" and text:
            history.append(AssistantMessage(text=text))
    return question, history


def openai_error(
    message: str,
    status: int = 400,
    *,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JsonTextResponse:
    """An answer in OpenAI's error format, ``{"error": {"message", "type", "param", "code"}}``
    (the SDKs read ``param``, ``code`` and ``type`` from it)."""
    body = {"error": {"message": message, "type": type, "param": param, "code": code}}
    return JsonTextResponse(body, status_code=status, headers=headers)


def is_openai_path(request: Request) -> bool:
    """Whether ``request`` is for the OpenAI-compatible routes (``/v1/...``)."""
    path = _route_path(request.scope)
    return path == "/v1" or path.startswith("/v1/")


def _route_path(scope: Scope) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path


_JSON_VALUES = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
}


def openai_validation_error(errors: Sequence[Any]) -> JsonTextResponse:
    """A body the request model refused, as OpenAI reports one: 400, ``param`` naming the
    field (``messages[0].role``)."""
    first = errors[0] if errors else {}
    param = _param(tuple(first.get("loc", ())))
    # A union (content: a string or a list of parts) has an error per member: all are told.
    same = [e.get("msg", "") for e in errors if _param(tuple(e.get("loc", ()))) == param]
    detail = ", or ".join(dict.fromkeys(same)) or "invalid request body"
    if first.get("type") == "json_invalid":
        detail = f"the body is not valid JSON ({first.get('ctx', {}).get('error', detail)})"
    elif first.get("type") == "missing":
        detail = "missing required parameter" if param else "the request needs a JSON body"
    elif first.get("type") == "model_attributes_type" and param is None:
        body = first.get("input")
        detail = (
            "the body was not read as JSON: send it with the header Content-Type: application/json"
            if isinstance(body, bytes)  # FastAPI parses JSON only when the header says so
            else 'the body must be a JSON object ({"model": ..., "messages": [...]}), got '
            + _JSON_VALUES.get(type(body), type(body).__name__)
        )
    return openai_error(f"{param}: {detail}" if param else detail, param=param)


def _param(loc: tuple[Any, ...]) -> str | None:
    # ("body", "messages", 0, "content", "str"): the field is messages[0].content; what comes
    # after it names a member of a union type, not a field.
    path = loc[1:] if loc[:1] == ("body",) else loc
    if not path or not isinstance(path[0], str):
        return None  # the body as a whole (not JSON, missing)
    param = path[0]
    if param == "messages" and len(path) > 1 and isinstance(path[1], int):
        param += f"[{path[1]}]"
        if len(path) > 2 and isinstance(path[2], str):
            param += f".{path[2]}"
    return param


def openai_http_error(request: Request, exc: StarletteHTTPException) -> JsonTextResponse:
    """An HTTP error of a ``/v1`` route (a wrong key, an unknown path) in OpenAI's format."""
    message = str(exc.detail)
    if exc.status_code in (404, 405):
        message = f"{message}: {request.method} {request.url.path}"
    return openai_error(
        message,
        exc.status_code,
        type="invalid_request_error" if exc.status_code < 500 else "server_error",
        code="invalid_api_key" if exc.status_code == 401 else None,
        headers=exc.headers,
    )


def _usage(usage: Mapping[str, Any] | None) -> dict[str, int]:
    if usage is None:
        return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    return {key: usage[key] for key in ("prompt_tokens", "completion_tokens", "total_tokens")}


def _approval_text(pause: Mapping[str, Any]) -> str:
    """What a completion says of a run paused for approval (``pause``: the event's data)."""
    calls = ", ".join(f"{c['name']}({c['arguments']})" for c in pause["pending_tool_calls"])
    until = datetime.datetime.fromtimestamp(pause["expires_at"], datetime.UTC)
    approval_id = pause["approval_id"]
    return (
        f"This needs a person's approval before it can go on: {calls}. Approve or deny it "
        f"with POST /api/approvals/{approval_id} (approval id {approval_id}) before "
        f"{until.isoformat(timespec='seconds')}."
    )


def openai_router(service: QaService) -> APIRouter:
    """The ``/v1`` routes, each for an authenticated caller: a run is its caller's (its
    tools run for them, a pause is decided by them only)."""
    router = APIRouter(dependencies=[Depends(request_caller)])
    # created: when this service began serving it (OpenAI's is the model's release).
    listed = {
        "id": OPENAI_MODEL_ID,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "tooluse",
    }

    @router.get("/v1/models", responses=with_statuses(V1_ERRORS, 400, 401))
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [listed]}

    # ``:path``: an id with a slash (``org/model``, sent as ``org%2Fmodel``) still gets
    # OpenAI's model_not_found, not the router's bare 404.
    @router.get(
        "/v1/models/{model_id:path}",
        response_model=None,
        responses=with_statuses(V1_ERRORS, 400, 401, 404),
    )
    async def model(model_id: str) -> Response:
        if model_id != OPENAI_MODEL_ID:
            return openai_error(
                f"The model {model_id!r} does not exist; this service has one, {OPENAI_MODEL_ID!r}",
                404,
                code="model_not_found",
            )
        return JsonTextResponse(listed)

    @router.post(COMPLETIONS_PATH, response_model=None, responses=V1_COMPLETION | V1_ERRORS)
    async def completions(
        request: OpenAIChatRequest,
        http: Request,
        caller: RequestCaller,
    ) -> Response:
        return await chat_completion(service, request, http, caller)

    return router


async def chat_completion(
    service: QaService, request: OpenAIChatRequest, http: Request, caller: Caller
) -> Response:
    """The answer to ``POST /v1/chat/completions`` of ``caller``: a stream, a completion, or
    an error in OpenAI's format."""
    try:
        check_supported(request)
        question, history = conversation(request.messages)
    except BadRequest as exc:
        return openai_error(str(exc), param=exc.param)
    # 32 random hex digits, as uuid4().hex gives them but without building a UUID (a few
    # microseconds a request).
    completion_id = f"chatcmpl-{secrets.token_hex(16)}"
    created = int(time.time())
    headers: dict[str, str] = {}
    if service.runs is not None:  # a durable run: the run asks the pipeline itself
        run = complete_request(question, history, tool_context=run_context(caller))
        named = await live_events(service, run)
        headers["X-Run-Id"] = run["run_id"]
    else:
        # A completion shows no tool events: they may come once the router has ended.
        events = service.stream(
            question, history=history, tool_context=run_context(caller), live_tool_events=False
        )
        named = completion_events(service, events, f"chat completion {completion_id}")
    if request.stream:
        include_usage = bool((request.stream_options or {}).get("include_usage"))
        chunks = _chunks(named, completion_id, created, include_usage)
        return sse_response(chunks, service.config.keepalive_seconds, headers=headers)
    ran: list[str] = []  # the tools that ran before a failure
    try:
        answer, usage = await _unless_gone(http, _answer(named, ran))
    except ClientGone:
        what = "is cancelled" if service.runs is None else "goes on (a durable run)"
        logger.info("chat completion %s: the client went away, the run %s", completion_id, what)
        return openai_error("the client went away before the answer", 499, headers=headers)
    except RunFailed as exc:
        failure = exc.failure
        if not ran:
            return openai_error(
                failure["message"], failure["status"], type=failure["type"], headers=headers
            )
        # The SDKs retry a 500, and a retry is a new run that calls the tools again (an
        # order placed twice): they obey x-should-retry.
        return openai_error(
            f"{failure['message']} (after the tools {', '.join(sorted(set(ran)))} ran; "
            "not to be retried as is)",
            failure["status"],
            type=failure["type"],
            headers={**headers, "x-should-retry": "false"},
        )
    return JsonTextResponse(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": OPENAI_MODEL_ID,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
            ],
            "usage": _usage(usage),
        },
        headers=headers,
    )


def may_answer_directly(scope: Scope, path: str) -> bool:
    """Whether the request is a ``POST`` of JSON to ``path`` that may skip FastAPI's request
    handling: not with dependency overrides (a test's) or FastAPI's telemetry on, which only
    that handling honours."""
    return (
        scope["method"] == "POST"
        and _route_path(scope) == path
        and scope.get("fastapi.telemetry") is None
        and not scope["app"].dependency_overrides
        and _media_type(scope) == "application/json"
    )


def _media_type(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"content-type":
            media: str = value.decode("latin-1").partition(";")[0].strip().lower()
            return media
    return None


class ClientGone(Exception):
    """The client closed the connection before the answer was ready."""


async def _unless_gone(request: Request, work: Coroutine[Any, Any, _T]) -> _T:
    """``work``'s result, or :class:`ClientGone` (``work`` cancelled) when the client
    disconnects first (a timeout; the SDKs then retry, each retry a run of its own)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, watcher):
            pending.cancel()
        await asyncio.gather(task, watcher, return_exceptions=True)
    if not task.cancelled():
        return task.result()
    raise ClientGone()


async def _disconnected(request: Request) -> None:
    # The body has been read, so the next message is the disconnect.
    while (await request.receive())["type"] != "http.disconnect":
        pass


class RunFailed(Exception):
    """The run ended with an ``error`` event (its data: ``failure``)."""

    def __init__(self, failure: dict[str, Any]) -> None:
        super().__init__(failure["message"])
        self.failure = failure


NamedEvents = AsyncGenerator[tuple[str, dict[str, Any]], None]


async def _answer(named: NamedEvents, ran: list[str]) -> tuple[str, dict[str, Any] | None]:
    """The answer and its usage (or the approval text of a pause); ``ran`` collects the tools
    that ran. :class:`RunFailed` for a run that failed."""
    async with contextlib.aclosing(named):
        async for kind, data in named:
            if kind == "tool_result" and not data["is_error"]:
                ran.append(data["name"])
            elif kind == "approval_required":
                return _approval_text(data), None
            elif kind == "done":
                return data["answer"], data["usage"]
            elif kind == "error":
                raise RunFailed(data)
    raise RuntimeError("The QA run ended without an answer or a pause")


async def _chunks(
    named: NamedEvents, completion_id: str, created: int, include_usage: bool
) -> AsyncGenerator[bytes, None]:
    # Every chunk is the same bytes but for its delta and finish reason, as json.dumps writes
    # them (its separators, the keys in this order): written here around the delta, not
    # encoded whole per chunk (three json.dumps a stream before).
    before = (
        f'data: {{"id": {json_text(completion_id)}, "object": "chat.completion.chunk", '
        f'"created": {created}, "model": {json_text(OPENAI_MODEL_ID)}, "choices": [{{"index": 0, '
        '"delta": '
    ).encode()
    end = b', "usage": null}\n\n' if include_usage else b"}\n\n"  # null in all but the last
    after = b', "finish_reason": null}]' + end

    def text_chunk(text: str) -> bytes:
        return before + b'{"content": ' + json_text(text).encode() + b"}" + after

    # The role chunk goes out with the first chunk after it, as OpenAI sends it with the
    # first token: one socket write per stream fewer (the headers, then the answer) than
    # when it went alone ahead of the run.
    role = before + b'{"role": "assistant", "content": ""}' + after
    usage: dict[str, Any] | None = None
    # Closed here when the client goes away, not whenever the garbage collector finds it:
    # a client that leaves cancels its run (its router task and tool calls), unless the run
    # is durable (then it goes on).
    async with contextlib.aclosing(named):
        async for kind, data in named:
            if kind == "delta":
                text = text_chunk(data["text"])
            elif kind == "approval_required":
                text = text_chunk(_approval_text(data))
            elif kind == "error":
                # OpenAI's SDKs raise an APIError for a chunk that carries "error".
                error = {"message": data["message"], "type": data["type"]}
                yield role + sse(None, {"error": {**error, "param": None, "code": None}})
                return
            else:
                if kind == "done":
                    usage = data["usage"]
                continue
            yield role + text
            role = b""
    yield role + before + b'{}, "finish_reason": "stop"}]' + end
    if include_usage:
        yield sse(
            None,
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": OPENAI_MODEL_ID,
                "choices": [],
                "usage": _usage(usage),
            },
        )
    yield _DONE


_DONE = b"data: [DONE]\n\n"  # OpenAI's end of a stream, not JSON
