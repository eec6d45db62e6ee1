"""The tokens a round's tools spend on models of their own (``report_usage``): in the round's
``ToolExecutionResult.usage`` and in the run's usage, on the call and stream paths, across a
pause, and a search query's translation among them."""

from __future__ import annotations

import asyncio
import json

from search_fakes import BagOfWordsModel
from tooluse import ChatClient, ToolCallingManager, Usage, tool, tool_callbacks
from tooluse.calling import Approve, report_usage
from tooluse.messages import ChatOptions, Prompt, ToolResponseMessage
from tooluse.search import HybridToolIndex, QueryTranslator, ToolReference, ToolSearchTool
from tooluse.testing import FunctionModel, ScriptedModel, chat_response, tool_call


def usage(prompt: int, completion: int) -> Usage:
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


@tool
async def summarize(text: str) -> str:
    """Summarize a text with a model of the tool's own."""
    report_usage(usage(100, 10))
    return text[:10]


@tool
def classify(text: str) -> str:
    """Classify a text (a plain def: it runs in a worker thread)."""
    report_usage(usage(40, 2))
    return "news"


@tool
def lookup(key: str) -> str:
    """A tool that calls no model."""
    return key


def model_of_two_rounds(*answer_usage: Usage) -> ScriptedModel:
    return ScriptedModel(
        [
            chat_response(
                tool_calls=[
                    tool_call("summarize", {"text": "a long text"}, id="s"),
                    tool_call("classify", {"text": "a long text"}, id="c"),
                ],
                usage=usage(10, 5),
            ),
            chat_response("Done.", usage=answer_usage[0] if answer_usage else None),
        ]
    )


async def test_a_rounds_tools_usage_is_in_its_result_and_none_when_they_report_none() -> None:
    manager = ToolCallingManager()
    calls = chat_response(
        tool_calls=[
            tool_call("summarize", {"text": "x"}, id="s"),
            tool_call("classify", {"text": "x"}, id="c"),
        ]
    )
    result = await manager.aexecute_tool_calls(
        Prompt([], ChatOptions(tool_callbacks=tool_callbacks(summarize, classify))), calls
    )
    assert result.usage == usage(140, 12)
    quiet = chat_response(tool_calls=[tool_call("lookup", {"key": "k"}, id="l")])
    only_lookup = Prompt([], ChatOptions(tool_callbacks=tool_callbacks(lookup)))
    result = await manager.aexecute_tool_calls(only_lookup, quiet)
    assert result.usage is None


def test_usage_reported_outside_a_round_counts_nowhere() -> None:
    report_usage(usage(1, 1))  # a tool called directly: nothing to add it to, no error
    assert asyncio.run(summarize("abcdefghijklm")) == "abcdefghij"


async def test_the_runs_usage_adds_its_tools_model_calls_to_its_own() -> None:
    client = ChatClient(model_of_two_rounds(usage(20, 8)), tools=[summarize, classify])
    response = await client.prompt("Summarize and classify").acall()
    assert response.content() == "Done."
    assert response.chat_response().usage == usage(10 + 100 + 40 + 20, 5 + 10 + 2 + 8)


async def test_a_streamed_run_ends_with_its_tools_usage_counted() -> None:
    client = ChatClient(model_of_two_rounds(usage(20, 8)), tools=[summarize, classify])
    chunks = [chunk async for chunk in client.prompt("Summarize and classify").stream()]
    assert [c.usage for c in chunks if c.usage is not None] == [usage(170, 25)]
    # the last round reported none: the total still comes, in a chunk of its own
    client = ChatClient(model_of_two_rounds(), tools=[summarize, classify])
    chunks = [chunk async for chunk in client.prompt("Summarize and classify").stream()]
    assert chunks[-1].usage == usage(150, 17)


async def test_a_paused_runs_state_holds_its_tools_usage_and_the_resumed_round_adds_its() -> None:
    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish a text after checking it with a model."""
        report_usage(usage(7, 1))
        return "published"

    model = ScriptedModel(
        [
            chat_response(
                tool_calls=[
                    tool_call("summarize", {"text": "t"}, id="s"),
                    tool_call("publish", {"text": "t"}, id="p"),
                ],
                usage=usage(10, 5),
            ),
            chat_response("Published.", usage=usage(3, 3)),
        ]
    )
    client = ChatClient(model, tools=[summarize, publish])
    paused = await client.prompt("Summarize and publish").acall()
    assert paused.state is not None and paused.state.usage == usage(110, 15)
    done = await client.aresume(paused.state, {"p": Approve()})
    assert done.content() == "Published."
    assert done.chat_response().usage == usage(110 + 7 + 3, 15 + 1 + 3)


async def test_a_search_querys_translation_is_counted_once_while_cached() -> None:
    def translate(prompt: Prompt) -> object:
        return chat_response("Status of my order", usage=usage(30, 6))

    translator_model = FunctionModel(translate)
    index = HybridToolIndex(
        BagOfWordsModel(),
        background_embedding=False,
        gloss_weight=0,
        query_translator=QueryTranslator(translator_model),
    )
    index.index_tools(
        "s",
        [
            ToolReference("order_status", None, "Status of the order with the given id"),
            ToolReference("get_weather", None, "Current weather for a city"),
        ],
    )
    search = ToolSearchTool(index).callback
    arguments = json.dumps({"query": "我的订单现在是什么状态", "max_results": 1})
    manager = ToolCallingManager()
    options = ChatOptions(tool_callbacks=[search], tool_context={"toolSearchToolSessionId": "s"})
    prompt = Prompt([], options)
    name = search.definition.name
    for expected in (usage(30, 6), None):  # the second search finds the translation cached
        calls = chat_response(tool_calls=[tool_call(name, json.loads(arguments), id="q")])
        result = await manager.aexecute_tool_calls(prompt, calls)
        results = result.conversation_history[-1]
        assert isinstance(results, ToolResponseMessage)
        assert "order_status" in results.responses[0].data
        assert result.usage == expected
    assert len(translator_model.requests) == 1
