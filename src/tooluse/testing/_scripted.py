"""``ScriptedModel``: a chat model that replays given responses in order."""

from __future__ import annotations

from collections.abc import Iterable

from tooluse.messages import ChatResponse, Prompt, UserMessage
from tooluse.testing._base import RespondingModel
from tooluse.testing._responses import ResponseLike, as_chat_response

__all__ = ["ScriptExhaustedError", "ScriptedModel"]


class ScriptExhaustedError(AssertionError):
    """The code under test asked a :class:`ScriptedModel` for more responses than scripted."""


class ScriptedModel(RespondingModel):
    """Replays ``responses`` in order, one per request, whether called or streamed.

    Each item is a ``ChatResponse`` or a short form (a text, a ``ToolCall``, or a sequence of
    tool calls for one round; see :func:`tooluse.testing.tool_call`). Every request's
    ``Prompt`` is recorded in :attr:`requests` and every response served in
    :attr:`responses`. Streaming cuts text and tool-call arguments into ``chunk_size``
    character pieces. Asking for more responses than scripted raises
    :class:`ScriptExhaustedError`.
    """

    model_name = "scripted"

    def __init__(self, responses: Iterable[ResponseLike], *, chunk_size: int = 8) -> None:
        super().__init__(chunk_size=chunk_size)
        self._script: list[ChatResponse] = [
            as_chat_response(item, request_index=index) for index, item in enumerate(responses)
        ]

    @property
    def remaining(self) -> int:
        """How many scripted responses have not been served yet."""
        return len(self._script) - len(self.responses)

    def _respond(self, prompt: Prompt) -> ChatResponse:
        index = len(self.responses)
        self.requests.append(prompt)
        if index >= len(self._script):
            last_user = next(
                (m.text for m in reversed(prompt.messages) if isinstance(m, UserMessage)), None
            )
            raise ScriptExhaustedError(
                f"ScriptedModel was asked for response #{index + 1} but only "
                f"{len(self._script)} were scripted (last user message: {last_user!r}, "
                f"{len(prompt.messages)} messages in the request)"
            )
        response = self._script[index]
        self.responses.append(response)
        return response
