"""pydantic-ai: ``Agent`` + ``FunctionModel`` (its own zero-latency test model), async.

Arguments are validated by pydantic against ``add``'s signature (pydantic-ai's default).
"""

from __future__ import annotations

from importlib.metadata import version

import _harness
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

USAGE = RequestUsage(input_tokens=10, output_tokens=5)


def build(scenario: _harness.Scenario, add: _harness.ToolFunction) -> Agent[None, str]:
    turns = _harness.ScriptedTurns(scenario)

    # An async function: FunctionModel runs a sync one in a worker thread, which a real
    # (network) model would not need either.
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(1 for m in messages if isinstance(m, ModelResponse))
        calls = turns.next_turn(done)
        if calls is None:
            return ModelResponse(parts=[TextPart(_harness.FINAL_ANSWER)], usage=USAGE)
        return ModelResponse(
            parts=[ToolCallPart(_harness.TOOL_NAME, c.arguments, c.call_id) for c in calls],
            usage=USAGE,
        )

    return Agent(FunctionModel(respond), tools=[add])


def setup(add: _harness.ToolFunction) -> _harness.AsyncRun:
    agents = {s.name: build(s, add) for s in [*_harness.SCENARIOS.values(), _harness.PROBE]}

    async def run(scenario: _harness.Scenario) -> str:
        result = await agents[scenario.name].run("go")
        return result.output

    return run


def main() -> None:
    _harness.main_async(
        "pydantic-ai",
        version("pydantic-ai-slim"),
        setup,
        notes="Agent.run, FunctionModel, pydantic-validated tool args",
    )


if __name__ == "__main__":
    main()
