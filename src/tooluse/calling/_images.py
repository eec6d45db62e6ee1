"""The ``ToolResponse`` of a tool result with images (a ``ToolResult``): the images the model
can be shown become ``ImagePart``s, the others a note in the text, and too many image bytes
an error result."""

from __future__ import annotations

import base64
from typing import Final

from tooluse.messages import IMAGE_MIME_TYPES, ImagePart, ToolCall, ToolResponse
from tooluse.tools import Image, ToolResult

__all__ = ["DEFAULT_MAX_IMAGE_BYTES", "image_response"]

# Anthropic refuses an image whose base64 is over 5 MiB ("image exceeds 5 MB maximum:
# 5272940 bytes > 5242880 bytes"); 3.75 MiB of bytes is 5 MiB of base64.
DEFAULT_MAX_IMAGE_BYTES: Final = 5 * 1024 * 1024 * 3 // 4
_TYPES_SHOWN: Final = ", ".join(sorted(IMAGE_MIME_TYPES))


def image_response(call: ToolCall, result: ToolResult, max_image_bytes: int | None) -> ToolResponse:
    """``result`` as the response to ``call``. An image of a type no provider takes (or an
    empty one) is left out with a note naming its type, so the model knows something was
    not shown; images over ``max_image_bytes`` in all (``None``: no limit) make the result
    an error, since they would fill the model's context or be refused by the provider."""
    shown: list[Image] = []
    notes: list[str] = []
    for number, image in enumerate(result.images, start=1):
        reason = _not_shown(image)
        if reason is None:
            shown.append(image)
        else:
            notes.append(f"[image {number} ({image.mime_type}) is not shown: {reason}]")
    total = sum(len(image.data) for image in shown)
    if max_image_bytes is not None and total > max_image_bytes:
        return ToolResponse(
            id=call.id,
            name=call.name,
            data=(
                f"Tool '{call.name}' returned {len(shown)} image(s) of {total} bytes in all; "
                f"the limit is {max_image_bytes} bytes of images per result. Ask the tool for "
                "fewer or smaller images if it can give them."
            ),
            is_error=True,
        )
    return ToolResponse(
        id=call.id,
        name=call.name,
        data="\n".join(filter(None, (result.text, *notes))),
        images=tuple(
            ImagePart(image.mime_type, base64.b64encode(image.data).decode("ascii"))
            for image in shown
        ),
    )


def _not_shown(image: Image) -> str | None:
    if image.mime_type not in IMAGE_MIME_TYPES:
        return f"models are shown only {_TYPES_SHOWN}"
    if not image.data:
        return "it is empty"
    return None
