"""Conversions at the MCP boundary: a tool result's content to what the model reads, and a
``ToolContext`` to a request's ``_meta``.

Result (text, or a ``ToolResult`` when images go with it, as ``convert_result`` gives for
``Image`` values):

- text blocks and image or audio blocks only: the text the text blocks alone give (one: its
  text, unchanged, since servers write it for the model and quoting it as JSON would only
  add escapes; several: a JSON list of their texts; none: the ``structuredContent``, as
  below) with an ``Image`` per image or audio block beside it. So a caption with a
  screenshot reads as the caption, and a ``ToolResult`` served by ``tooluse mcp serve`` (its
  text block, then its images) comes back as it was. The executor shows images to the model
  as images and names the type of the rest (audio: no provider here takes audio in a tool
  result) in a note;
- any other mix: the JSON of one block, or a JSON list of the blocks' JSON, text as strings,
  each image or audio ``{"image": n, "mimeType"}`` with the ``Image`` beside the text. An
  embedded resource is ``{"uri", "mimeType", "text"}``, or ``"blob"`` for a binary one, whose
  data is media as an image block's is (``{"image": n, "mimeType"}``, with the ``Image``
  beside); a resource link what the server sent (``{"type": "resource_link", "uri", "name",
  ...}``); media whose data is not base64 ``{"mimeType", "error"}`` (the data is never sent
  as text);
- no text (no blocks, or only empty text blocks; images aside): the ``structuredContent``
  as JSON, else ``""``. Text the server wrote wins over its
  ``structuredContent``: the specification asks servers to send the structured value's JSON
  as text too, and a server that words its text otherwise wrote it for the model.

Empty text blocks are skipped.

The error text of an ``isError`` result is its text blocks joined by newlines.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Mapping
from typing import Any

from mcp.types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
)

from tooluse.tools import Image, ToolResult, convert_result

__all__ = ["error_text", "result_content", "tool_context_to_meta"]

logger = logging.getLogger("tooluse.mcp")

_UNKNOWN_MEDIA = "application/octet-stream"  # a blob resource that names no mime type


def result_content(result: CallToolResult) -> str | ToolResult:
    """What the model reads for a successful result (see the module docstring)."""
    values = [_block_value(block) for block in result.content if not _blank_text(block)]
    texts = [value for value in values if isinstance(value, str)]  # the text blocks'
    images = [value for value in values if isinstance(value, Image)]
    if len(texts) + len(images) < len(values):
        return convert_result(values[0] if len(values) == 1 else values)
    if len(texts) == 1:
        text = texts[0]
    elif texts:
        text = _json_text(texts)
    else:  # no words from the server: its structured content, when it sent any
        text = "" if result.structured_content is None else _json_text(result.structured_content)
    return ToolResult(text, images) if images else text


def error_text(result: CallToolResult) -> str:
    """The message of an ``isError`` result: its text, or the JSON of its other blocks (its
    images left out: an error message is text)."""
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    if texts:
        return "\n".join(texts)
    content = result_content(result)
    return content.text if isinstance(content, ToolResult) else content


def tool_context_to_meta(context: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``_meta`` of a tool call: the context's entries, less private keys (those starting
    with ``_``) and values that are not JSON (dropped with a debug log: a context can carry
    live objects meant for local tools). ``None`` when nothing is left."""
    if not context:
        return None
    meta: dict[str, Any] = {}
    for key, value in context.items():
        if not isinstance(key, str) or key.startswith("_"):
            continue
        try:
            json.dumps(value)
        except (TypeError, ValueError, RecursionError):
            logger.debug(
                "tool context key %r is not sent to the MCP server: its %s value is not JSON",
                key,
                type(value).__name__,
            )
            continue
        meta[key] = value
    return meta or None


def _json_text(value: Any) -> str:
    """The JSON of a value parsed from JSON (or of text blocks' texts): never images."""
    converted = convert_result(value)
    assert isinstance(converted, str)
    return converted


def _blank_text(block: ContentBlock) -> bool:
    return isinstance(block, TextContent) and not block.text


def _block_value(block: ContentBlock) -> Any:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        return _media(block.data, block.mime_type)
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        value: dict[str, Any] = {"uri": resource.uri}
        if resource.mime_type is not None:
            value["mimeType"] = resource.mime_type
        if isinstance(resource, TextResourceContents):
            value["text"] = resource.text
        else:  # binary: shown as media when it is an image, never as base64 text
            value["blob"] = _media(resource.blob, resource.mime_type or _UNKNOWN_MEDIA)
        return value
    # A resource link (or a block type newer than this code): what the server sent.
    return block.model_dump(mode="json", by_alias=True, exclude_none=True)


def _media(data: str, mime_type: str) -> Any:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return {"mimeType": mime_type, "error": "the server sent data that is not base64"}
    return Image(raw, mime_type)
