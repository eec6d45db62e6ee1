"""What a :class:`~tooluse.qa.QaPipeline` run reports while it runs."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from tooluse.calling import PendingToolCall
from tooluse.messages import ImagePart, ToolResponse, Usage
from tooluse.rag import Document

if TYPE_CHECKING:
    from tooluse.qa._pause import QaPause

__all__ = [
    "ApprovalRequiredEvent",
    "DeltaEvent",
    "DoneEvent",
    "QaEvent",
    "Route",
    "RouteEvent",
    "ToolCallEvent",
    "ToolResultEvent",
]

Route = Literal["tools", "knowledge"]
"""``"tools"``: the router fetched data and the answer is made from it; ``"knowledge"``:
nothing was fetched and the answer is made from the knowledge base."""


@dataclasses.dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """The router's model asked for a tool call (``arguments`` is its JSON text)."""

    kind: ClassVar[str] = "tool_call"
    id: str
    name: str
    arguments: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclasses.dataclass(frozen=True, slots=True)
class ToolResultEvent:
    """A tool call finished (``is_error``: the result is an error message for the model;
    ``images``: the images shown to the model with ``result``)."""

    kind: ClassVar[str] = "tool_result"
    id: str
    name: str
    result: str
    is_error: bool
    images: tuple[ImagePart, ...] = ()

    @classmethod
    def of(cls, response: ToolResponse) -> ToolResultEvent:
        return cls(response.id, response.name, response.data, response.is_error, response.images)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; each image as a ``data:`` URL, which a page can show as it is (the
        executor's ``max_image_bytes`` bounds their size)."""
        return {
            "id": self.id,
            "name": self.name,
            "result": self.result,
            "is_error": self.is_error,
            "images": [image.data_url() for image in self.images],
        }


@dataclasses.dataclass(frozen=True, slots=True)
class ApprovalRequiredEvent:
    """The router stage stopped: these calls wait for a human decision. The run ends here;
    continue it with ``QaPipeline.resume_stream(pause, decisions)`` (``pause`` survives JSON,
    so the decision may come in another request or process)."""

    kind: ClassVar[str] = "approval_required"
    pending_tool_calls: tuple[PendingToolCall, ...]
    pause: QaPause

    def to_dict(self) -> dict[str, Any]:
        return {"pending_tool_calls": [call.to_dict() for call in self.pending_tool_calls]}


@dataclasses.dataclass(frozen=True, slots=True)
class RouteEvent:
    """The router stage is over: the answer is made from the ``fetched`` data (``"tools"``)
    or from the knowledge base (``"knowledge"``)."""

    kind: ClassVar[str] = "route"
    route: Route
    fetched: int

    def to_dict(self) -> dict[str, Any]:
        return {"route": self.route, "fetched": self.fetched}


@dataclasses.dataclass(frozen=True, slots=True)
class DeltaEvent:
    """A piece of the answer's text."""

    kind: ClassVar[str] = "delta"
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text}


@dataclasses.dataclass(frozen=True, slots=True)
class DoneEvent:
    """The answer is complete: its text, the route, the documents it was given (none on the
    ``"tools"`` route) and the tokens both stages used (``None`` when the models report
    none)."""

    kind: ClassVar[str] = "done"
    answer: str
    route: Route
    documents: tuple[Document, ...]
    usage: Usage | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "route": self.route,
            "sources": [_source(document) for document in self.documents],
            "usage": None if self.usage is None else self.usage.model_dump(),
        }


def _source(document: Document) -> dict[str, Any]:
    metadata = document.metadata
    return {
        "id": document.id,
        "title": metadata.get("title"),
        "source": metadata.get("source"),
        "score": document.score,
    }


QaEvent = (
    ToolCallEvent | ToolResultEvent | ApprovalRequiredEvent | RouteEvent | DeltaEvent | DoneEvent
)
