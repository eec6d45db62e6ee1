"""openai-agents: ``Runner.run`` with a custom ``Model`` returning Responses-API items, async.

Arguments are validated by the pydantic model ``function_tool`` builds from ``add``'s signature.
Tracing is switched off: its default processor exports to OpenAI's servers, which a benchmark
must not call (and ours, with no OpenTelemetry SDK configured, records no spans either).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from importlib.metadata import version
from typing import Any

import _harness
from agents import (
    Agent,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    Runner,
    Tool,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import TResponseInputItem, TResponseStreamEvent
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)


def _usage() -> Usage:
    return Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)


class ScriptedModel(Model):
    def __init__(self, scenario: _harness.Scenario) -> None:
        self._turns = _harness.ScriptedTurns(scenario)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        **kwargs: Any,
    ) -> ModelResponse:
        items = [] if isinstance(input, str) else input
        done = sum(1 for item in items if _item_type(item) == "function_call_output")
        calls = self._turns.next_turn(done // self._turns.calls_per_turn)
        if calls is None:
            answer = ResponseOutputMessage(
                id="msg_final",
                type="message",
                role="assistant",
                status="completed",
                content=[
                    ResponseOutputText(
                        type="output_text", text=_harness.FINAL_ANSWER, annotations=[]
                    )
                ],
            )
            return ModelResponse(output=[answer], usage=_usage(), response_id=None)
        output = [
            ResponseFunctionToolCall(
                type="function_call",
                id=f"fc_{c.call_id}",
                call_id=c.call_id,
                name=_harness.TOOL_NAME,
                arguments=c.arguments,
            )
            for c in calls
        ]
        return ModelResponse(output=output, usage=_usage(), response_id=None)

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        **kwargs: Any,
    ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the benchmark times Runner.run, which does not stream")


def _item_type(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else getattr(item, "type", None)


def setup(add: _harness.ToolFunction) -> _harness.AsyncRun:
    add_tool = function_tool(add)
    agents = {
        s.name: Agent(name="bench", model=ScriptedModel(s), tools=[add_tool])
        for s in [*_harness.SCENARIOS.values(), _harness.PROBE]
    }

    async def run(scenario: _harness.Scenario) -> str:
        result = await Runner.run(agents[scenario.name], "go")
        return str(result.final_output)

    return run


def main() -> None:
    set_tracing_disabled(True)
    _harness.main_async(
        "openai-agents",
        version("openai-agents"),
        setup,
        notes="Runner.run, custom Model, tracing disabled",
    )


if __name__ == "__main__":
    main()
