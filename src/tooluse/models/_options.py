"""Per-request options on top of a model's defaults."""

from __future__ import annotations

import dataclasses

from tooluse.messages import ChatOptions

__all__ = ["merge_options"]

_MERGED_BY_KEY = ("extra", "tool_context")


def merge_options(default: ChatOptions | None, request: ChatOptions) -> ChatOptions:
    """``request`` on top of ``default``: a parameter the request leaves ``None`` (or empty,
    for tools) takes the default's value; ``extra`` and ``tool_context`` merge key by key with
    the request winning."""
    if default is None:
        return request
    changes = {}
    for field in dataclasses.fields(ChatOptions):
        mine = getattr(request, field.name)
        theirs = getattr(default, field.name)
        if field.name in _MERGED_BY_KEY:
            if theirs:
                changes[field.name] = {**theirs, **mine}
        elif (mine is None or mine == ()) and theirs not in (None, ()):
            changes[field.name] = theirs
    return request.replace(**changes) if changes else request
