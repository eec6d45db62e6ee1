"""LangChain 1.x ``create_agent`` (a LangGraph graph) with a scripted ``BaseChatModel``, async.

The fake model implements ``bind_tools`` the way provider models do (tools converted to the
OpenAI tool format, bound as a call kwarg), and turns the JSON argument text into the parsed
``tool_calls`` a provider adapter produces. Arguments are validated by the tool's pydantic
``args_schema`` (LangChain's default for ``@tool``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib.metadata import version
from typing import Any

import _harness
from langchain.agents import create_agent
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool

USAGE = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}


class ScriptedChatModel(BaseChatModel):
    scenario: _harness.Scenario

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        formatted = [convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=formatted, **kwargs)

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        done = sum(1 for m in messages if isinstance(m, AIMessage))
        calls = _harness.ScriptedTurns(self.scenario).next_turn(done)
        if calls is None:
            message = AIMessage(content=_harness.FINAL_ANSWER, usage_metadata=USAGE)
        else:
            message = AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": _harness.TOOL_NAME,
                        "args": c.parsed_arguments(),
                        "id": c.call_id,
                        "type": "tool_call",
                    }
                    for c in calls
                ],
                usage_metadata=USAGE,
            )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._reply(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._reply(messages)


def setup(add: _harness.ToolFunction) -> _harness.AsyncRun:
    add_tool = tool(add)
    agents = {
        s.name: create_agent(ScriptedChatModel(scenario=s), tools=[add_tool])
        for s in [*_harness.SCENARIOS.values(), _harness.PROBE]
    }

    async def run(scenario: _harness.Scenario) -> str:
        state = await agents[scenario.name].ainvoke({"messages": [("user", "go")]})
        return str(state["messages"][-1].content)

    return run


def main() -> None:
    _harness.main_async(
        "langchain",
        version("langchain"),
        setup,
        notes=f"create_agent on langgraph {version('langgraph')}, "
        f"langchain-core {version('langchain-core')}",
    )


if __name__ == "__main__":
    main()
