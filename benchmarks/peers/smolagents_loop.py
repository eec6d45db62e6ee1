"""smolagents: ``ToolCallingAgent.run`` with a custom ``Model``, sync (it has no async loop).

smolagents ends a run through its ``final_answer`` tool, so the scripted model's answer turn is
a call to that tool. Arguments are type-checked against the tool's input schema
(``validate_tool_arguments``). Logging is switched off (``verbosity_level=-1``).
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import _harness
from smolagents import ChatMessage, Model, Tool, ToolCallingAgent, tool
from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole
from smolagents.monitoring import LogLevel, TokenUsage


class ScriptedModel(Model):
    def __init__(self, scenario: _harness.Scenario) -> None:
        super().__init__(model_id="scripted")
        self._turns = _harness.ScriptedTurns(scenario)

    def generate(
        self,
        messages: list[ChatMessage | dict[str, Any]],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: list[Tool] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        done = sum(1 for m in messages if _role(m) == MessageRole.ASSISTANT)
        calls = self._turns.next_turn(done)
        if calls is None:
            tool_calls = [_call("call_final", "final_answer", {"answer": _harness.FINAL_ANSWER})]
        else:
            tool_calls = [_call(c.call_id, _harness.TOOL_NAME, c.parsed_arguments()) for c in calls]
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            content="",
            tool_calls=tool_calls,
            token_usage=TokenUsage(input_tokens=10, output_tokens=5),
        )


def _role(message: ChatMessage | dict[str, Any]) -> Any:
    return message["role"] if isinstance(message, dict) else message.role


def _call(call_id: str, name: str, arguments: dict[str, object]) -> ChatMessageToolCall:
    return ChatMessageToolCall(
        id=call_id,
        type="function",
        function=ChatMessageToolCallFunction(name=name, arguments=arguments),
    )


def setup(add: _harness.ToolFunction) -> _harness.SyncRun:
    @tool
    def add_tool(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: first addend
            b: second addend
        """
        return int(add(a, b))

    add_tool.name = _harness.TOOL_NAME
    agents = {
        s.name: ToolCallingAgent(
            tools=[add_tool], model=ScriptedModel(s), verbosity_level=LogLevel.OFF
        )
        for s in [*_harness.SCENARIOS.values(), _harness.PROBE]
    }

    def run(scenario: _harness.Scenario) -> str:
        return str(agents[scenario.name].run("go"))

    return run


def main() -> None:
    _harness.main_sync(
        "smolagents",
        version("smolagents"),
        setup,
        notes="ToolCallingAgent.run (sync), final answer via final_answer tool",
    )


if __name__ == "__main__":
    main()
