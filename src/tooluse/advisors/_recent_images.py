"""``RecentImagesAdvisor``: each model request shows only the most recent tool-result images.

An agent that takes a screenshot every step (browser automation, computer use) would send
every earlier screenshot again on every model request, so the context and the bill grow with
each step. Anthropic's computer-use demo keeps the images of the N most recent tool results
(``only_n_most_recent_images``); this advisor does the same inside the tool loop. It changes
only the request it passes on: the loop's history, what memory stores and what the caller
gets keep every image.

Removing an image changes an earlier message, which ends the provider's cached prompt prefix
there; like the demo (``min_removal_threshold``), images go ``removal_chunk`` results at a
time, so the requests in between repeat the same prefix and hit the cache.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import ClassVar, Final

from tooluse.advisors._api import (
    HIGHEST_PRECEDENCE,
    AdvisorChain,
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
    ToolAdvisor,
)
from tooluse.advisors._tool_calling import HistoryReplayer
from tooluse.messages import Message, ToolResponse, ToolResponseMessage

__all__ = ["OMITTED_IMAGES_NOTE", "RecentImagesAdvisor", "omit_older_images"]

OMITTED_IMAGES_NOTE: Final = (
    "[{images} omitted to save context: only the most recent tool results' images are shown]"
)
"""The note that stands in a result's text for its omitted images (``{images}`` is "image"
or "3 images"). It never changes between requests, so the prefix stays cacheable."""


def omit_older_images(
    messages: Sequence[Message], *, keep: int, removal_chunk: int | None = None
) -> list[Message]:
    """``messages`` with the images of all but the ``keep`` most recent image-carrying tool
    results omitted: each such result keeps its id, name and text, plus a note
    (:data:`OMITTED_IMAGES_NOTE`), so every tool call still has its result.

    A result's images go together (its text may refer to them by number). The count to omit
    is rounded down to a multiple of ``removal_chunk`` (default: ``keep``), so between
    ``keep`` and ``keep + removal_chunk - 1`` results keep their images; ``removal_chunk=1``
    keeps exactly ``keep``. Messages left as they were are the same objects.

    Use it on stored conversations too, e.g. ``repository.update(conversation_id,
    lambda stored: omit_older_images(stored, keep=3))``.
    """
    chunk = _checked_settings(keep, removal_chunk)
    carrying = sum(
        1 for m in messages if isinstance(m, ToolResponseMessage) for r in m.responses if r.images
    )
    excess = carrying - keep
    to_omit = excess - excess % chunk if excess > 0 else 0
    result: list[Message] = []
    for message in messages:
        if to_omit and isinstance(message, ToolResponseMessage):
            responses = []
            for response in message.responses:
                if to_omit and response.images:
                    to_omit -= 1
                    response = _without_images(response)
                responses.append(response)
            if any(new is not old for new, old in zip(responses, message.responses, strict=True)):
                message = message.model_copy(update={"responses": tuple(responses)})
        result.append(message)
    return result


def _without_images(response: ToolResponse) -> ToolResponse:
    count = len(response.images)
    note = OMITTED_IMAGES_NOTE.format(images="image" if count == 1 else f"{count} images")
    data = f"{response.data}\n{note}" if response.data else note
    return response.model_copy(update={"data": data, "images": ()})


def _checked_settings(keep: object, removal_chunk: object) -> int:
    """The removal chunk to use, once ``keep`` and ``removal_chunk`` are known to be valid."""
    if isinstance(keep, bool) or not isinstance(keep, int):
        raise TypeError(
            f"keep must be an int (how many of the most recent image-carrying tool results "
            f"keep their images), got {type(keep).__name__}: {keep!r}"
        )
    if keep < 1:
        raise ValueError(
            f"keep must be 1 or more, got {keep}: with none kept the model would not see even "
            "the screenshot it just asked for"
        )
    if removal_chunk is None:
        return keep
    if isinstance(removal_chunk, bool) or not isinstance(removal_chunk, int):
        raise TypeError(
            f"removal_chunk must be an int or None, got {type(removal_chunk).__name__}: "
            f"{removal_chunk!r}"
        )
    if removal_chunk < 1:
        raise ValueError(
            f"removal_chunk must be 1 or more (1: omit each image as soon as it is no longer "
            f"among the {keep} most recent), got {removal_chunk}"
        )
    return removal_chunk


class RecentImagesAdvisor(BaseAdvisor):
    """Before each model call, omits the images of all but the ``keep`` most recent
    image-carrying tool results from the request (:func:`omit_older_images`).

    - ``removal_chunk``: omit images this many results at a time (default ``keep``), so that
      the provider's prompt cache is broken once every ``removal_chunk`` rounds rather than
      every round; ``1`` sends exactly ``keep``.
    - ``order``: default ``HIGHEST_PRECEDENCE + 500``, inside the tool loop (+300), so every
      round's request is trimmed, and inside a chat memory that sits in the loop (+400), so
      replayed screenshots are trimmed too. A request whose chain has the loop, or an
      advisor that replays history (:class:`~tooluse.advisors.HistoryReplayer`), inside
      this advisor is refused: their images would reach the model untrimmed.
    """

    DEFAULT_ORDER: ClassVar[int] = HIGHEST_PRECEDENCE + 500

    def __init__(
        self,
        keep: int,
        *,
        removal_chunk: int | None = None,
        order: int = DEFAULT_ORDER,
        name: str = "RecentImagesAdvisor",
    ) -> None:
        super().__init__(name=name, order=order)
        self.removal_chunk = _checked_settings(keep, removal_chunk)
        self.keep = keep

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        return await chain.next_call(self._trimmed(request, chain))

    async def advise_stream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        async for item in chain.next_stream(self._trimmed(request, chain)):
            yield item

    def _trimmed(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        self._check_nothing_adds_images_inside(chain)
        original = request.prompt.messages
        messages = omit_older_images(original, keep=self.keep, removal_chunk=self.removal_chunk)
        if all(new is old for new, old in zip(messages, original, strict=True)):
            return request
        return request.replace(prompt=request.prompt.replace(messages=messages))

    def _check_nothing_adds_images_inside(self, chain: AdvisorChain) -> None:
        advisors = chain.advisors
        position = next(i for i, advisor in enumerate(advisors) if advisor is self)
        for inner in advisors[position + 1 :]:
            if isinstance(inner, ToolAdvisor):
                what = "runs the tool loop, whose screenshots would never be trimmed"
            elif isinstance(inner, HistoryReplayer):
                what = "replays history, whose screenshots would reach the model untrimmed"
            else:
                continue
            raise ValueError(
                f"{self.name} (order {self.order}) must be inside {inner.name} (order "
                f"{inner.order}), which {what}: give it a higher order, e.g. the default "
                f"RecentImagesAdvisor.DEFAULT_ORDER ({self.DEFAULT_ORDER})"
            )
