"""``Document``: a piece of knowledge with its metadata, and ``Query``: what is retrieved for."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from tooluse.messages import Message, Usage, sum_usage

__all__ = ["Document", "Query"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Document:
    """A text with metadata (used by filters) and, from a search, its ``score`` (cosine).

    ``id`` defaults to a random UUID; give a stable one when the same text may be added again
    (adding a document with an existing id replaces it).
    """

    text: str
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    id: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex)
    score: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise ValueError(f"Document id must be a non-blank string, got {self.id!r}")
        if not isinstance(self.text, str):
            raise TypeError(f"Document {self.id!r}: text must be a str, got {self.text!r}")
        if not isinstance(self.metadata, Mapping):
            raise TypeError(f"Document {self.id!r}: metadata must be a mapping")
        for key in self.metadata:
            if not isinstance(key, str):
                raise TypeError(f"Document {self.id!r}: metadata key {key!r} is not a str")
        object.__setattr__(self, "metadata", dict(self.metadata))

    def with_score(self, score: float | None) -> Document:
        return dataclasses.replace(self, score=score)


@dataclasses.dataclass(frozen=True, slots=True)
class Query:
    """What to retrieve for: the ``text``, the conversation ``history`` before it, and the
    request ``context`` (retrievers read per-request settings such as a filter from it).

    ``usage`` is the tokens of the model calls that made the text (a query transformer's
    rewriting), so that the request's usage counts them.
    """

    text: str
    history: tuple[Message, ...] = ()
    context: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    usage: Usage | None = None

    def __init__(
        self,
        text: str,
        history: Sequence[Message] = (),
        context: Mapping[str, Any] | None = None,
        usage: Usage | None = None,
    ) -> None:
        if not isinstance(text, str):
            raise TypeError(f"Query text must be a str, got {type(text).__name__}")
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "history", tuple(history))
        object.__setattr__(self, "context", {} if context is None else context)
        object.__setattr__(self, "usage", usage)

    def replace(self, *, text: str, usage: Usage | None = None) -> Query:
        """This query with ``text``, and ``usage`` added to what it has used."""
        return Query(text, self.history, self.context, sum_usage(self.usage, usage))
