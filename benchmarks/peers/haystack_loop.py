"""Haystack: ``Agent.run_async`` with a scripted chat-generator component, async.

The generator parses the JSON argument text into ``ToolCall.arguments`` as Haystack's provider
generators do. Haystack calls the tool function with the arguments as given: no validation
against the signature (the probe shows the string reaching ``add``).
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import _harness
from haystack import component
from haystack.components.agents import Agent
from haystack.dataclasses import ChatMessage, ChatRole, ToolCall
from haystack.tools import Tool, create_tool_from_function

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


@component
class ScriptedChatGenerator:
    def __init__(self, scenario: _harness.Scenario) -> None:
        self._turns = _harness.ScriptedTurns(scenario)

    def _reply(self, messages: list[ChatMessage]) -> dict[str, list[ChatMessage]]:
        done = sum(1 for m in messages if m.role == ChatRole.ASSISTANT)
        calls = self._turns.next_turn(done)
        if calls is None:
            reply = ChatMessage.from_assistant(_harness.FINAL_ANSWER, meta={"usage": USAGE})
        else:
            reply = ChatMessage.from_assistant(
                tool_calls=[
                    ToolCall(
                        tool_name=_harness.TOOL_NAME, arguments=c.parsed_arguments(), id=c.call_id
                    )
                    for c in calls
                ],
                meta={"usage": USAGE},
            )
        return {"replies": [reply]}

    @component.output_types(replies=list[ChatMessage])
    def run(
        self, messages: list[ChatMessage], tools: list[Tool] | None = None, **kwargs: Any
    ) -> dict[str, list[ChatMessage]]:
        return self._reply(messages)

    @component.output_types(replies=list[ChatMessage])
    async def run_async(
        self, messages: list[ChatMessage], tools: list[Tool] | None = None, **kwargs: Any
    ) -> dict[str, list[ChatMessage]]:
        return self._reply(messages)


def setup(add: _harness.ToolFunction) -> _harness.AsyncRun:
    add_tool = create_tool_from_function(add)
    agents = {
        s.name: Agent(chat_generator=ScriptedChatGenerator(s), tools=[add_tool])
        for s in [*_harness.SCENARIOS.values(), _harness.PROBE]
    }
    for agent in agents.values():
        agent.warm_up()

    async def run(scenario: _harness.Scenario) -> str:
        result = await agents[scenario.name].run_async([ChatMessage.from_user("go")])
        return str(result["last_message"].text)

    return run


def main() -> None:
    _harness.main_async(
        "haystack",
        version("haystack-ai"),
        setup,
        notes="Agent.run_async, custom chat generator; no argument validation",
    )


if __name__ == "__main__":
    main()
