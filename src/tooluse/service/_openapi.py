"""What ``/openapi.json`` says the routes answer besides their success: the error statuses they
send and their bodies, and the event streams (``text/event-stream``), so that a client
generated from it, or a checker such as schemathesis, meets no undocumented answer."""

from __future__ import annotations

import json
from typing import Any

import pydantic
from fastapi import FastAPI

__all__ = [
    "API_ERRORS",
    "EVENT_STREAM",
    "V1_COMPLETION",
    "V1_ERRORS",
    "with_statuses",
    "without_default_422",
]


class ErrorBody(pydantic.BaseModel):
    """The service's own errors: ``detail`` is the reason, or for a body the route's model
    refused, pydantic's errors (``loc``, ``msg``, ``type``; never the input)."""

    detail: str | list[dict[str, Any]]


class OpenAIErrorFields(pydantic.BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorBody(pydantic.BaseModel):
    """``/v1`` errors, in OpenAI's format."""

    error: OpenAIErrorFields


_REASONS = {
    400: "Refused: a Host header this service does not answer for, JSON it does not take "
    "(NaN, Infinity, nested too deep), or on /v1 a body OpenAI would refuse",
    401: "The API key is missing or wrong",
    404: "No such conversation, approval or model",
    409: "The run is being decided already",
    410: "The run has ended (decided, superseded or expired)",
    413: "The request body is over the size limit",
    422: "The request does not say what the route needs",
    499: "The client went away before the answer",
    500: "The run failed",
    502: "The model's provider refused or failed the request",
    503: "The model's provider cannot be reached",
    504: "The model's provider did not answer in time",
}


def _errors(model: type[pydantic.BaseModel], statuses: tuple[int, ...]) -> dict[int | str, Any]:
    return {status: {"model": model, "description": _REASONS[status]} for status in statuses}


def with_statuses(errors: dict[int | str, Any], *statuses: int) -> dict[int | str, Any]:
    """``errors`` restricted to ``statuses`` (what one route may answer)."""
    return {status: errors[status] for status in statuses}


API_ERRORS = _errors(ErrorBody, (400, 401, 404, 409, 410, 413, 422))
V1_ERRORS = _errors(OpenAIErrorBody, (400, 401, 404, 413, 499, 500, 502, 503, 504))

# One event of a stream (its fields, each text; ``data`` is JSON, or ``[DONE]`` for /v1).
_EVENT = {
    "type": "object",
    "properties": {"event": {"type": "string"}, "data": {"type": "string"}},
    "required": ["data"],
}

EVENT_STREAM: dict[int | str, Any] = {
    200: {
        "description": "Server-Sent Events, until the run ends or pauses",
        "content": {"text/event-stream": {"schema": _EVENT}},
    }
}

V1_COMPLETION: dict[int | str, Any] = {
    200: {
        "description": "A chat completion; with stream: true, its chunks as Server-Sent Events",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "text/event-stream": {"schema": _EVENT},
        },
    }
}


def without_default_422(app: FastAPI) -> None:
    """Make ``app.openapi()`` leave out the 422 FastAPI documents for every route with
    parameters: the routes that send one list it themselves (:data:`API_ERRORS`); ``/v1``
    answers 400, and a route whose parameters cannot fail answers none."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            for operations in schema["paths"].values():
                for operation in operations.values():
                    responses = operation.get("responses", {})
                    default = responses.get("422", {})
                    if "HTTPValidationError" in json.dumps(default):
                        del responses["422"]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented override
