"""``ToolExecutionResult``: what one round of tool calls produced."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tooluse.calling._approval import PendingToolCall
from tooluse.messages import AssistantMessage, Generation, Message, ToolResponseMessage, Usage

__all__ = ["ToolExecutionResult"]


@dataclasses.dataclass(frozen=True, slots=True)
class ToolExecutionResult:
    """The conversation after a round: the prompt's messages, the assistant message with the
    tool calls, and one ``ToolResponseMessage`` answering them in call order.

    ``return_direct`` is true when every executed call of the round is a return-direct tool:
    the caller should hand the tool results to the user instead of calling the model again.
    ``pending_tool_calls`` are the calls held for human approval; while there are any, the
    final ``ToolResponseMessage`` holds only the executed calls' responses (and is absent when
    none ran), and the round is completed with ``ToolCallingManager.aresume_tool_calls``.
    ``usage`` is what the round's tools spent on model calls of their own (reported with
    :func:`~tooluse.calling.report_usage`; ``None``: nothing), which the tool-calling loop
    adds to the run's.
    """

    FINISH_REASON: ClassVar[str] = "returnDirect"
    METADATA_TOOL_ID: ClassVar[str] = "tool_id"
    METADATA_TOOL_NAME: ClassVar[str] = "tool_name"
    METADATA_IMAGES: ClassVar[str] = "images"

    conversation_history: tuple[Message, ...]
    return_direct: bool = False
    pending_tool_calls: tuple[PendingToolCall, ...] = ()
    usage: Usage | None = None

    def build_generations(self) -> list[Generation]:
        """One generation per tool response of the last message, for a return-direct answer:
        its text is the tool's result and its metadata names the call (``tool_id``,
        ``tool_name``) with ``finish_reason`` ``"returnDirect"``, and holds the result's
        images, if any, as ``images`` (a tuple of ``ImagePart``). Empty when the history does
        not end with tool responses."""
        if not self.conversation_history:
            raise ValueError("The conversation history is empty: there are no tool results")
        last = self.conversation_history[-1]
        if not isinstance(last, ToolResponseMessage):
            return []
        return [
            Generation(
                message=AssistantMessage(text=response.data),
                metadata={
                    "finish_reason": self.FINISH_REASON,
                    self.METADATA_TOOL_ID: response.id,
                    self.METADATA_TOOL_NAME: response.name,
                    **({self.METADATA_IMAGES: response.images} if response.images else {}),
                },
            )
            for response in last.responses
        ]
