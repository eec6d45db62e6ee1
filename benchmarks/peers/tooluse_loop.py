"""tooluse: ``ChatClient`` with ``tooluse.testing.FunctionModel``, async, defaults on.

The defaults stay on: arguments validated by pydantic against ``add``'s signature, call
limits, the OpenTelemetry hooks (the API is installed; with no SDK configured no span is
recorded), sync tools run in the thread pool. Run with this repository's interpreter.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

import _harness

from tooluse import ChatClient, Prompt, Usage, tool
from tooluse.messages import AssistantMessage, ChatResponse, ToolCall
from tooluse.testing import FunctionModel, chat_response

USAGE = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)


def scripted(scenario: _harness.Scenario) -> FunctionModel:
    turns = _harness.ScriptedTurns(scenario)

    async def respond(prompt: Prompt) -> ChatResponse:
        done = sum(1 for m in prompt.messages if isinstance(m, AssistantMessage))
        calls = turns.next_turn(done)
        if calls is None:
            return chat_response(_harness.FINAL_ANSWER, usage=USAGE)
        return chat_response(
            tool_calls=[
                ToolCall(id=c.call_id, name=_harness.TOOL_NAME, arguments=c.arguments)
                for c in calls
            ],
            usage=USAGE,
        )

    return FunctionModel(respond, keep=0)  # a real model keeps nothing


def setup(add: _harness.ToolFunction, *, inline: bool = False) -> _harness.AsyncRun:
    # inline: a plain def runs on the loop's thread (``@tool(inline=True)``); async ones are
    # on the loop anyway
    add_tool = tool(inline=inline and not inspect.iscoroutinefunction(add))(add)
    models = {s.name: scripted(s) for s in [*_harness.SCENARIOS.values(), _harness.PROBE]}
    clients = {name: ChatClient(model, tools=[add_tool]) for name, model in models.items()}

    async def run(scenario: _harness.Scenario) -> str:
        response = await clients[scenario.name].prompt().user("go").acall()
        return response.content() or ""

    return run


def main() -> None:
    _harness.main_async(
        "tooluse", version("tooluse"), setup, notes="ChatClient.acall, FunctionModel, defaults on"
    )


if __name__ == "__main__":
    main()
