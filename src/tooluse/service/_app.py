"""``create_app``: the FastAPI application of ``tooluse serve``."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import html
import importlib.resources
import json
import logging
import math
import re
import unicodedata
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from typing import Annotated, Any

import pydantic
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from pydantic.config import JsonDict
from starlette.convertors import PathConvertor, register_url_convertor
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import Receive, Scope, Send

from tooluse.calling import Approve, Caller, Decision, Deny
from tooluse.memory._api import validate_conversation_id
from tooluse.service._approvals import (
    GONE,
    ApprovalConflict,
    ApprovalGone,
    StoredApproval,
    UnknownApproval,
)
from tooluse.service._auth import RequestCaller, request_caller
from tooluse.service._conversations import message_views
from tooluse.service._guards import RequestGuard
from tooluse.service._offline import OFFLINE_NOTICE
from tooluse.service._openai_api import (
    COMPLETIONS_PATH,
    OpenAIChatRequest,
    chat_completion,
    is_openai_path,
    may_answer_directly,
    openai_http_error,
    openai_router,
    openai_validation_error,
)
from tooluse.service._openapi import (
    API_ERRORS,
    EVENT_STREAM,
    with_statuses,
    without_default_422,
)
from tooluse.service._owners import owner_of
from tooluse.service._runs import ask_request, live_events, resume_request
from tooluse.service._service import QaService, ServiceConfig, run_context
from tooluse.service._sse import JsonTextResponse, named_sse_response, qa_events
from tooluse.service._turn_displays import StoredTurnDisplay

__all__ = ["ApprovalRequest", "ChatRequest", "DecisionRequest", "create_app"]

logger = logging.getLogger("tooluse.service")

CONVERSATION_ID_MAX_LENGTH = 200
CHAT_PATH = "/api/chat"
# What _check_conversation_id takes, for the OpenAPI document only (the check itself says
# what is wrong better than a pattern would): no control character or lone surrogate, and
# not blank.
_NOT_ID = r"\u0000-\u001f\u007f-\u009f\ud800-\udfff"
_CONVERSATION_ID_SCHEMA: JsonDict = {"pattern": rf"^[^{_NOT_ID}]*[^\s{_NOT_ID}][^{_NOT_ID}]*$"}


ConversationIdQuery = Annotated[
    str,
    Query(
        min_length=1,
        max_length=CONVERSATION_ID_MAX_LENGTH,
        json_schema_extra=_CONVERSATION_ID_SCHEMA,
    ),
]
"""A conversation id given as ``?conversation_id=...``."""


class ChatRequest(pydantic.BaseModel):
    """``POST /api/chat``: a question, in a conversation (a new one when left out)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    message: str = pydantic.Field(min_length=1, max_length=32_000)
    conversation_id: str | None = pydantic.Field(
        default=None,
        min_length=1,
        max_length=CONVERSATION_ID_MAX_LENGTH,
        json_schema_extra=_CONVERSATION_ID_SCHEMA,
    )


def _not_json(constant: str) -> object:
    raise ValueError(f"{constant} is not a JSON number")


def _finite(number: str) -> float:
    value = float(number)
    if not math.isfinite(value):  # JSON text for the tool could not hold it again
        raise ValueError(f"the number {number} is out of range")
    return value


def _json_object(arguments: object) -> object:
    """Edited arguments sent as JSON text as the object the text holds (other values as they
    are). The page sends the text as edited: its JSON.parse would round the numbers a
    double cannot hold exactly, such as integers above 2**53."""
    if not isinstance(arguments, str):
        return arguments
    try:
        value = json.loads(arguments, parse_constant=_not_json, parse_float=_finite)
    except ValueError as exc:
        raise ValueError(f"the edited arguments are not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError(
            f"the edited arguments must be a JSON object ({{...}}), got {arguments!r:.100}"
        )
    return value


EditedArguments = Annotated[
    dict[str, Any] | None,
    pydantic.BeforeValidator(_json_object),
    pydantic.WithJsonSchema(
        {
            "anyOf": [
                {"type": "object"},
                {"type": "string", "description": "a JSON object as text"},
                {"type": "null"},
            ]
        }
    ),
]


class DecisionRequest(pydantic.BaseModel):
    """A decision on one held tool call: approve (optionally with edited ``arguments``: an
    object, or its JSON text, which keeps every number as written), or deny (``message`` is
    what the model is told)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    approve: bool
    arguments: EditedArguments = None
    message: str | None = None

    def decision(self, by: str | None = None) -> Decision:
        """The decision, given ``by`` a user (the audit log records who)."""
        if self.approve:
            return Approve(arguments=self.arguments, by=by)
        return Deny(self.message, by=by) if self.message else Deny(by=by)


class ApprovalRequest(pydantic.BaseModel):
    """``POST /api/approvals/{id}``: one decision per held call id."""

    model_config = pydantic.ConfigDict(extra="forbid")

    decisions: dict[str, DecisionRequest]


def _page(service: QaService) -> str:
    template = (importlib.resources.files("tooluse.service") / "page.html").read_text("utf-8")
    banner = (
        f'<div class="banner" id="offline">{html.escape(OFFLINE_NOTICE)}</div>'
        if service.offline
        else ""
    )
    return template.replace("<!--BANNER-->", banner).replace(
        "<!--MODEL-->", html.escape(service.model_label)
    )


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def _methods_at(request: Request) -> str:
    """The methods some route of the request's path takes (asked of the routes with each
    method: included routers match as a whole)."""
    found = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL
            for route in request.app.routes
        )
    ]
    return ", ".join(found)


def _validation_details(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """pydantic's errors without the ``input`` each holds (FastAPI's own handler sends it:
    a megabyte back for a message a megabyte long), and a body that was not read as JSON said
    so (FastAPI reads JSON only when the Content-Type says it is)."""
    details = []
    for error in errors:
        detail = {key: value for key, value in error.items() if key not in ("input", "url")}
        if error.get("type") == "model_attributes_type" and isinstance(error.get("input"), bytes):
            detail["msg"] = (
                "The body was not read as JSON: send it with the header "
                "Content-Type: application/json"
            )
        details.append(detail)
    encoded: list[dict[str, Any]] = jsonable_encoder(details)
    return encoded


_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)


def _page_policy(page: str) -> str:
    """The page's Content-Security-Policy: its own inline script and style (by their hashes)
    and nothing else; requests to this service only; images from tool results (data: URLs);
    never in a frame."""
    sources: dict[str, list[str]] = {"script": [], "style": []}
    for kind, body in _INLINE.findall(page):
        digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode()
        sources[kind].append(f"'sha256-{digest}'")
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src {' '.join(sources['script'])}",
            f"style-src {' '.join(sources['style'])}",
            "img-src 'self' data: blob:",
            "connect-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )


def _approval_view(stored: StoredApproval) -> dict[str, Any]:
    return {
        "approval_id": stored.id,
        "status": stored.status,
        "created_at": stored.created_at,
        "expires_at": stored.expires_at,
        "error": stored.error,
        "question": stored.pause.question,
        "conversation_id": stored.pause.conversation_id,
        "turn_id": stored.pause.turn_id,
        "pending_tool_calls": [c.to_dict() for c in stored.pause.pending_tool_calls],
    }


def _paused_events(stored: StoredApproval, displays: Sequence[StoredTurnDisplay]) -> list[Any]:
    """The display events of the turn a waiting run paused (its calls so far, the held ones
    last); ``[]`` when none is stored."""
    for display in displays:
        if display.turn_id is not None and display.turn_id == stored.pause.turn_id:
            return display.events
    return []


class _AnyTextConvertor(PathConvertor):
    """``{name:any_text}``: the rest of the path, line breaks too (``path`` stops at one),
    so that an id holding one is told why it is refused rather than a bare 404."""

    regex = "(?s:.*)"


register_url_convertor("any_text", _AnyTextConvertor())


def _check_conversation_id(conversation_id: str) -> None:
    """422 for a conversation id that no chat memory can store (a NUL, a blank id), or
    that holds a control character: a line break would forge lines of the log, and the page
    could not read its conversation back (URLs are matched line by line)."""
    try:
        validate_conversation_id(conversation_id)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    for position, character in enumerate(conversation_id):
        if unicodedata.category(character) == "Cc":
            raise HTTPException(
                422,
                "conversation id must not hold control characters (line breaks, tabs, "
                f"escapes); it holds {character!r} at position {position}",
            )


def create_app(config: ServiceConfig | None = None) -> FastAPI:
    """The service: chat page, SSE chat API, approvals, OpenAI-compatible endpoint.

    The files are opened here. When the app starts (its lifespan), on the event loop that
    serves it, the MCP servers of ``config.mcp_servers`` connect (one that cannot start
    fails the startup, naming it) and the knowledge base starts loading in the background;
    when it stops, the MCP servers are stopped and the files closed.
    """
    service = QaService(config if config is not None else ServiceConfig())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            # `tooluse serve` starts the service before serving it, to report an MCP server
            # that cannot start as an option error rather than a failed startup.
            if not service.started:
                await service.astart()
            yield
        finally:
            await service.aclose()

    # JSON that survives a lone surrogate in a model's or a tool's text (a pending call's
    # arguments shown by GET /api/approvals, ...).
    app = FastAPI(
        title="tooluse QA service", lifespan=lifespan, default_response_class=JsonTextResponse
    )
    app.state.service = service
    without_default_422(app)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JsonTextResponse:
        if is_openai_path(request):  # 400 {"error": ...}, as OpenAI answers, for its SDKs
            return openai_validation_error(exc.errors())
        return JsonTextResponse({"detail": _validation_details(exc.errors())}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 405:
            # Starlette names the methods of the first route of the path only; a path of two
            # routes (GET and POST /api/approvals/{id}) takes both.
            exc = StarletteHTTPException(405, exc.detail, {"Allow": _methods_at(request)})
        if is_openai_path(request):
            return openai_http_error(request, exc)
        return await http_exception_handler(request, exc)

    keepalive = service.config.keepalive_seconds
    page = _page(service)
    page_headers = {"Content-Security-Policy": _page_policy(page)}

    @app.get("/", response_class=HTMLResponse)
    async def chat_page() -> HTMLResponse:
        return HTMLResponse(page, headers=page_headers)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:  # no icon: a 404 would be an error in the console
        return Response(status_code=204)

    @app.get("/healthz", responses=with_statuses(API_ERRORS, 400))
    async def healthz() -> dict[str, Any]:
        return await asyncio.to_thread(service.health)

    api = APIRouter(dependencies=[Depends(request_caller)])

    async def check_owner(
        caller: Caller, conversation_id: str, *, write: bool, new: bool = False
    ) -> bool:
        """Whether the caller may read (or with ``write``, continue) the conversation. A
        named caller's first write makes a new conversation theirs (``new``: an id the
        service just made); one stored without an owner is an anonymous caller's."""
        if not service.names_users or (new and caller.user_id is None):
            return True
        if not new:
            owner = await asyncio.to_thread(service.owners.owner, conversation_id)
            if owner != (None, None) or caller.user_id is None:
                return owner == owner_of(caller)
            if not write or await _stored_anonymously(service, conversation_id):
                return False
        claimed = await asyncio.to_thread(service.owners.claim, conversation_id, caller)
        return claimed == owner_of(caller)

    async def _may_read_run(caller: Caller, request: dict[str, Any]) -> bool:
        """Whether the durable run of ``request`` is the caller's to read: its
        conversation's (``/api/chat``), or, given its history (``/v1``), the caller's it ran
        for, as a paused run is."""
        conversation_id = request["conversation_id"]
        if conversation_id is not None:
            return await check_owner(caller, conversation_id, write=False)
        ran_for = Caller.of(request["tool_context"] or {})
        return not service.names_users or owner_of(ran_for) == owner_of(caller)

    async def owned_approval(caller: Caller, approval_id: str) -> StoredApproval:
        """The paused run, if the caller's (the one it ran for); else 404, as for an
        unknown id."""
        try:
            stored = await asyncio.to_thread(service.approvals.get, approval_id)
            if service.names_users and not _ran_for(stored, caller):
                raise UnknownApproval(f"No paused run has the approval id {approval_id!r}")
        except UnknownApproval as exc:
            raise HTTPException(404, str(exc.args[0])) from exc
        return stored

    @api.get("/api/tools", responses=with_statuses(API_ERRORS, 400, 401))
    async def tools(caller: RequestCaller) -> list[dict[str, Any]]:
        return service.tool_descriptions(caller)

    @api.post(
        CHAT_PATH,
        response_class=StreamingResponse,
        responses=EVENT_STREAM | with_statuses(API_ERRORS, 400, 401, 413, 422),
    )
    async def chat(request: ChatRequest, caller: RequestCaller) -> StreamingResponse:
        return await chat_response(request, caller)

    async def chat_response(request: ChatRequest, caller: Caller) -> StreamingResponse:
        """``POST /api/chat``'s answer, by the route or the request guard
        (:func:`answer_chat_directly`)."""
        conversation_id = request.conversation_id or uuid.uuid4().hex
        if not request.message.strip():
            raise HTTPException(422, "The message is blank")
        try:  # the pipeline checks its arguments here, before the stream starts
            events = service.stream(
                request.message,
                conversation_id=conversation_id,
                tool_context=run_context(caller),
            )
        except ValueError as exc:  # e.g. a blank conversation_id
            raise HTTPException(422, str(exc)) from exc
        if request.conversation_id is not None:  # what the GET routes refuse too
            _check_conversation_id(request.conversation_id)
        new = request.conversation_id is None
        if not await check_owner(caller, conversation_id, write=True, new=new):
            await events.aclose()
            raise HTTPException(404, _not_yours(conversation_id))
        if service.runs is not None:  # a durable run: the run asks the pipeline itself
            await events.aclose()
            run = ask_request(
                request.message,
                conversation_id,
                goes_on=request.conversation_id is not None,
                tool_context=run_context(caller),
            )
            return await _durable_response(run)

        return named_sse_response(
            qa_events(
                service,
                events,
                conversation_id,
                request.message,
                goes_on=request.conversation_id is not None,
            ),
            keepalive_seconds=keepalive,
        )

    @api.get(
        "/api/conversations/{conversation_id:any_text}",
        responses=with_statuses(API_ERRORS, 400, 401, 404, 422),
    )
    async def conversation(
        conversation_id: Annotated[
            str,
            Path(
                min_length=1,
                max_length=CONVERSATION_ID_MAX_LENGTH,
                json_schema_extra=_CONVERSATION_ID_SCHEMA,
            ),
        ],
        caller: RequestCaller,
    ) -> dict[str, Any]:
        """The conversation's messages in memory and its runs waiting for a decision (a
        reloaded page shows them)."""
        _check_conversation_id(conversation_id)
        if not await check_owner(caller, conversation_id, write=False):
            raise HTTPException(404, _no_conversation(conversation_id))
        messages = await service.memory.aget(conversation_id)
        pending = await asyncio.to_thread(service.approvals.pending, conversation_id)
        # A record per turn memory holds, at most: the window holds fewer turns than messages.
        displays = await asyncio.to_thread(
            service.turn_displays.recent, conversation_id, service.config.memory_window
        )
        if not messages and not pending:
            raise HTTPException(404, _no_conversation(conversation_id))
        return {
            "conversation_id": conversation_id,
            "messages": message_views(messages, displays),
            "pending_approvals": [
                {**_approval_view(stored), "events": _paused_events(stored, displays)}
                for stored in pending
            ],
            "memory_window": service.config.memory_window,
        }

    @api.get("/api/approvals", responses=with_statuses(API_ERRORS, 400, 401, 422))
    async def pending_approvals(
        conversation_id: ConversationIdQuery,
        caller: RequestCaller,
    ) -> list[dict[str, Any]]:
        """The conversation's runs waiting for a decision (none in another's conversation,
        as in one that does not exist)."""
        _check_conversation_id(conversation_id)
        if not await check_owner(caller, conversation_id, write=False):
            return []
        pending = await asyncio.to_thread(service.approvals.pending, conversation_id)
        return [_approval_view(stored) for stored in pending]

    @api.get(
        "/api/events",
        response_class=StreamingResponse,
        responses=EVENT_STREAM | with_statuses(API_ERRORS, 400, 401, 422),
    )
    async def conversation_events(
        conversation_id: ConversationIdQuery, caller: RequestCaller
    ) -> StreamingResponse:
        """The events of the conversation's runs from now on, whichever worker runs them
        (with Redis): ``watching`` once subscribed, then each run's events as the chat
        stream sends them, but the deltas (``done`` holds the answer). 404 in another
        user's conversation."""
        _check_conversation_id(conversation_id)
        if not await check_owner(caller, conversation_id, write=False):
            raise HTTPException(404, _not_yours(conversation_id))

        async def watched() -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
            async with service.events.watch(conversation_id) as events:
                yield "watching", {"conversation_id": conversation_id}
                async for event in events:
                    yield event

        return named_sse_response(watched(), keepalive_seconds=keepalive)

    @api.get("/api/approvals/{approval_id}", responses=with_statuses(API_ERRORS, 400, 401, 404))
    async def approval(approval_id: str, caller: RequestCaller) -> dict[str, Any]:
        return _approval_view(await owned_approval(caller, approval_id))

    @api.post(
        "/api/approvals/{approval_id}",
        response_class=StreamingResponse,
        responses=EVENT_STREAM | API_ERRORS,
    )
    async def decide(
        approval_id: str, request: ApprovalRequest, caller: RequestCaller
    ) -> StreamingResponse:
        stored = await owned_approval(caller, approval_id)
        if stored.status in GONE:  # whatever the decisions say
            raise HTTPException(410, str(ApprovalGone.of(approval_id, stored.error)))
        decisions = {
            call_id: d.decision(by=caller.user_id) for call_id, d in request.decisions.items()
        }
        try:  # checks the decisions before the run is claimed
            events = service.resume_stream(
                stored.pause, decisions, tool_context=run_context(caller)
            )
        except (ValueError, TypeError) as exc:
            raise HTTPException(422, str(exc)) from exc
        try:
            await asyncio.to_thread(service.approvals.claim, approval_id)
        except ApprovalGone as exc:  # superseded or expired since it was read
            raise HTTPException(410, str(exc)) from exc
        except ApprovalConflict as exc:
            raise HTTPException(409, str(exc)) from exc
        logger.info("approval %s: %s", approval_id, _summary(request))
        if service.runs is not None:
            await events.aclose()
            run = resume_request(
                approval_id,
                decisions,
                conversation_id=stored.pause.conversation_id,
                tool_context=run_context(caller),
            )
            return await _durable_response(run)

        async def finished(error: str | None) -> None:
            await asyncio.to_thread(service.approvals.finish, approval_id, error)

        return named_sse_response(
            qa_events(
                service,
                events,
                stored.pause.conversation_id,
                stored.pause.question,
                paused_turn=stored.pause.turn_id,
                on_end=finished,
            ),
            keepalive_seconds=keepalive,
        )

    async def _durable_response(run: dict[str, Any]) -> StreamingResponse:
        return named_sse_response(
            await live_events(service, run),
            keepalive_seconds=keepalive,
            headers={"X-Run-Id": run["run_id"]},
        )

    @api.get("/api/runs/{run_id}", responses=with_statuses(API_ERRORS, 400, 401, 404))
    async def durable_run(run_id: str, caller: RequestCaller) -> dict[str, Any]:
        """A durable run (the ``X-Run-Id`` of the chat, approval or chat completion it
        answered), on any worker: ``running``, ``done`` with its events (but the answer's
        deltas: the ``done`` event holds the answer), or ``failed``. 404 in another user's
        conversation, or for another user's chat completion."""
        if service.runs is None:
            raise HTTPException(
                404, "Runs are kept only with durable runs (tooluse serve --durable-runs)"
            )
        outcome = await service.runs.outcome(run_id)
        if outcome is None or not await _may_read_run(caller, outcome.request):
            raise HTTPException(404, f"No durable run has the id {run_id!r}")
        return {
            "run_id": run_id,
            "status": outcome.status,
            "events": outcome.events,
            "error": outcome.error,
        }

    async def answer_chat(request: ChatRequest, http: Request, caller: Caller) -> Response:
        return await chat_response(request, caller)

    async def answer_completion(
        request: OpenAIChatRequest, http: Request, caller: Caller
    ) -> Response:
        return await chat_completion(service, request, http, caller)

    direct: tuple[tuple[str, type[pydantic.BaseModel], Callable[..., Awaitable[Response]]], ...]
    direct = (
        (CHAT_PATH, ChatRequest, answer_chat),
        (COMPLETIONS_PATH, OpenAIChatRequest, answer_completion),
    )

    async def answer_directly(scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
        # A question to /api/chat or /v1's completions that FastAPI would accept is answered
        # without its routing, dependency solving and body parsing (they cost more per
        # request than anything else of the endpoints' own), and without the middleware and
        # route layers every write of the stream went through. Any other request (not JSON,
        # not a question: pydantic's ValidationError is a ValueError) goes FastAPI's way,
        # which says what is wrong with it as before.
        for path, model, answer in direct:
            if may_answer_directly(scope, path):
                try:
                    request = model.model_validate(json.loads(body))
                except ValueError:
                    return False
                http = Request(scope, receive)
                response: Response
                try:
                    response = await answer(request, http, await request_caller(http))
                except StarletteHTTPException as exc:  # a wrong key, a blank message, ...
                    response = await http_error(http, exc)
                await response(scope, receive, send)
                return True
        return False

    app.add_middleware(
        RequestGuard,
        allowed_hosts=service.config.allowed_hosts,
        max_body_bytes=service.config.max_request_bytes,
        answer_directly=answer_directly,
    )
    app.include_router(api)
    app.include_router(openai_router(service))
    return app


def _no_conversation(conversation_id: str) -> str:
    return (
        f"No conversation {conversation_id!r} is stored: its memory holds no messages (none "
        "of its questions was answered, or it was cleared) and no run in it waits for approval"
    )


def _not_yours(conversation_id: str) -> str:
    return (
        f"No conversation {conversation_id!r} can be continued by you: leave conversation_id "
        "out to start a new one"
    )


async def _stored_anonymously(service: QaService, conversation_id: str) -> bool:
    """Whether a conversation nobody owns holds anything (an anonymous caller's, or stored
    before owners were recorded): not for a named user to take over."""
    if await service.memory.aget(conversation_id):
        return True
    return bool(await asyncio.to_thread(service.approvals.pending, conversation_id))


def _ran_for(stored: StoredApproval, caller: Caller) -> bool:
    """Whether the paused run ran for ``caller`` (its tool context names them)."""
    return owner_of(Caller.of(stored.pause.router_state.tool_context)) == owner_of(caller)


def _summary(request: ApprovalRequest) -> str:
    return ", ".join(
        f"{call_id} {'approved' if d.approve else 'denied'}"
        for call_id, d in request.decisions.items()
    )
