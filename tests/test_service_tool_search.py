"""``tooluse serve`` with many tools: the router searches for its tools (``--tool-search``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from _rag_helpers import HashingEmbeddingModel
from _service_helpers import config, names, parse_sse, service
from tooluse.cli import build_parser
from tooluse.cli._options import OptionError, config_from_arguments
from tooluse.messages import Prompt, SystemMessage, ToolResponseMessage, Usage, UserMessage
from tooluse.search import (
    HybridToolIndex,
    ToolReference,
    ToolSearchRequest,
    ToolSearchToolCallingAdvisor,
)
from tooluse.service import QaService
from tooluse.service._samples import SAMPLE_TOOLS
from tooluse.service._service import TOOL_SEARCH_ABOVE, router_advisor
from tooluse.testing import FunctionModel, ResponseLike, chat_response, tool_call
from tooluse.tools import tool, tool_callbacks


def _archive_tool(number: int) -> object:
    def lookup(record_id: str) -> str:
        return f"record {record_id} of archive {number}"

    return tool(
        name=f"archive_{number}",
        description=f"Look up a record of archive {number}",
        read_only=True,
    )(lookup)


# The sample tools and enough others to pass the threshold.
MANY_TOOLS = (*SAMPLE_TOOLS, *(_archive_tool(n) for n in range(TOOL_SEARCH_ABOVE)))


def _searching_router(prompt: Prompt) -> ResponseLike:
    """A model that searches first, then calls what it asked about among the tools found."""
    offered = [callback.definition.name for callback in prompt.options.tool_callbacks]
    if not offered:  # the answer stage
        question = next(m.text for m in reversed(prompt.messages) if isinstance(m, UserMessage))
        return "From live data." if question.startswith("Data fetched") else "No data."
    last = prompt.messages[-1]
    if not isinstance(last, ToolResponseMessage):
        return tool_call("toolSearchTool", {"query": "cancel an order"}, id="search-1")
    if last.responses[0].name == "toolSearchTool":
        if "cancel_order" not in offered:
            return "Nothing found."
        return tool_call("cancel_order", {"order_id": "A1001"}, id="cancel-1")
    return ""


def _offered_per_router_call(model: FunctionModel) -> list[list[str]]:
    return [
        [c.definition.name for c in p.options.tool_callbacks]
        for p in model.requests
        if p.options.tool_callbacks
    ]


def test_tool_search_is_on_above_the_threshold_or_as_asked(tmp_path: Path) -> None:
    samples, many = tool_callbacks(*SAMPLE_TOOLS), tool_callbacks(*MANY_TOOLS)

    def searches(router: object) -> bool:
        return isinstance(router, ToolSearchToolCallingAdvisor)

    assert not searches(router_advisor(config(tmp_path / "a.db"), samples))
    assert searches(router_advisor(config(tmp_path / "b.db"), many))
    assert not searches(router_advisor(config(tmp_path / "c.db", tool_search=False), many))
    assert searches(router_advisor(config(tmp_path / "d.db", tool_search=True), samples))
    parser = build_parser(["serve"])
    for flag, expected in (("auto", None), ("on", True), ("off", False)):
        arguments = parser.parse_args(["serve", "--model", "test", "--tool-search", flag])
        assert config_from_arguments(arguments).tool_search is expected
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--tool-search", "maybe"])


async def test_the_router_sees_the_search_tool_then_what_it_found(tmp_path: Path) -> None:
    model = FunctionModel(_searching_router)
    async with service(tmp_path / "s.db", model=model, tools=MANY_TOOLS) as client:
        paused = parse_sse(
            (
                await client.post(
                    "/api/chat", json={"message": "Cancel order A1001", "conversation_id": "c1"}
                )
            ).text
        )
        health = (await client.get("/healthz")).json()
        listed = (await client.get("/api/tools")).json()
    assert health["tool_search"] is True and health["tools"] == len(MANY_TOOLS)
    assert len(listed) == len(MANY_TOOLS)  # the page lists every tool
    # The search and its result are in the trace; the found tool needs approval.
    assert names(paused) == ["tool_call", "tool_result", "tool_call", "approval_required"]
    search_call, search_result = paused[0][1], paused[1][1]
    assert search_call["name"] == "toolSearchTool"
    assert "cancel_order" in json.loads(search_result["result"])
    offered = _offered_per_router_call(model)
    assert offered[0] == ["toolSearchTool"]
    assert "cancel_order" in offered[1] and len(offered[1]) <= 11  # not all 24 tools

    # Approved after a restart: the new process offers the found tool again and runs it; the
    # search result is not live data, the tool's result is.
    model = FunctionModel(_searching_router)
    async with service(tmp_path / "s.db", model=model, tools=MANY_TOOLS) as client:
        approval_id = paused[-1][1]["approval_id"]
        resumed = parse_sse(
            (
                await client.post(
                    f"/api/approvals/{approval_id}",
                    json={"decisions": {"cancel-1": {"approve": True}}},
                )
            ).text
        )
    assert names(resumed) == ["tool_result", "route", "delta", "done"]
    assert json.loads(resumed[0][1]["result"])["cancelled"] is True
    assert resumed[1][1] == {"route": "tools", "fetched": 1}
    assert resumed[-1][1]["answer"] == "From live data."


async def test_a_search_that_finds_nothing_useful_is_not_live_data(tmp_path: Path) -> None:
    def router(prompt: Prompt) -> ResponseLike:
        if prompt.options.tool_callbacks and not isinstance(
            prompt.messages[-1], ToolResponseMessage
        ):
            return tool_call("toolSearchTool", {"query": "refund policy"}, id="s")
        return _searching_router(prompt) if not prompt.options.tool_callbacks else ""

    model = FunctionModel(router)
    async with service(tmp_path / "s.db", model=model, tools=MANY_TOOLS) as client:
        events = parse_sse(
            (await client.post("/api/chat", json={"message": "What is the refund policy?"})).text
        )
    # The search ran; no tool fetched data, so the answer comes from the knowledge base.
    assert names(events) == ["tool_call", "tool_result", "route", "delta", "done"]
    assert events[2][1] == {"route": "knowledge", "fetched": 0}


async def test_offline_model_searches_with_the_question_then_calls_the_tool(
    tmp_path: Path,
) -> None:
    async with service(tmp_path / "s.db", tools=MANY_TOOLS) as client:
        events = parse_sse(
            (await client.post("/api/chat", json={"message": "What's the weather in Paris?"})).text
        )
    calls = [data for name, data in events if name == "tool_call"]
    assert [call["name"] for call in calls] == ["toolSearchTool", "get_weather"]
    assert json.loads(calls[0]["arguments"]) == {"query": "What's the weather in Paris?"}
    assert events[-1][0] == "done"


def test_the_service_builds_the_tool_index_at_start(tmp_path: Path) -> None:
    # Embedding a new catalogue takes minutes with the bundled model: it starts with the
    # service, not with the first question.
    settings = config(tmp_path / "s.db", tools=MANY_TOOLS)
    embedding_model = settings.embedding_model
    assert isinstance(embedding_model, HashingEmbeddingModel)
    qa = QaService(settings)
    try:
        qa.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not _archives(embedding_model.embedded):
            time.sleep(0.02)
        assert _archives(embedding_model.embedded) == TOOL_SEARCH_ABOVE
    finally:
        qa.close()


def _archives(texts: list[str]) -> int:
    return sum("archive" in text for text in texts)


def test_tool_search_translation_translates_a_question_the_tools_cannot_match(
    tmp_path: Path,
) -> None:
    asked: list[str] = []

    def translating(prompt: Prompt) -> ResponseLike:
        asked.append(str(prompt.messages[-1].text))
        return "cancel my order A1001"

    model = FunctionModel(translating)
    router = router_advisor(
        config(tmp_path / "a.db", model=model, tool_search=True, tool_search_translation=True),
        tool_callbacks(*MANY_TOOLS),
    )
    assert isinstance(router, ToolSearchToolCallingAdvisor)
    index = router.tool_index
    assert isinstance(index, HybridToolIndex)
    index.index_tools("s", [ToolReference.from_callback(c) for c in tool_callbacks(*MANY_TOOLS)])
    index.build("s")  # the language mix is weighed once the catalogue is embedded
    found = index.search(ToolSearchRequest("s", "帮我取消订单A1001", max_results=3))
    assert asked == ["帮我取消订单A1001"]
    assert found.tool_names[0] == "cancel_order"
    index.search(ToolSearchRequest("s", "cancel order A1001", max_results=3))
    assert asked == ["帮我取消订单A1001"]  # a question in the tools' language is not translated


async def test_a_turns_usage_counts_the_translation_its_search_asked_for(
    tmp_path: Path,
) -> None:
    def spent(tokens: int) -> Usage:
        return Usage(prompt_tokens=tokens, completion_tokens=1, total_tokens=tokens + 1)

    def translating(prompt: Prompt) -> bool:
        first = prompt.messages[0]
        return isinstance(first, SystemMessage) and first.text.startswith("Translate")

    def model_answer(prompt: Prompt) -> ResponseLike:
        if translating(prompt):
            return chat_response("cancel my order A1001", usage=spent(300))
        if not prompt.options.tool_callbacks:  # the answer stage
            return chat_response("Found how to cancel it.", usage=spent(20))
        if isinstance(prompt.messages[-1], ToolResponseMessage):
            return chat_response("Found it.", usage=spent(10))
        search = tool_call("toolSearchTool", {"query": "帮我取消订单A1001"}, id="search-1")
        return chat_response(tool_calls=[search], usage=spent(10))

    model = FunctionModel(model_answer)
    settings = {"model": model, "tools": MANY_TOOLS, "tool_search_translation": True}
    async with service(tmp_path / "s.db", **settings) as client:
        events = parse_sse(
            (await client.post("/api/chat", json={"message": "帮我取消订单A1001"})).text
        )
    assert len([p for p in model.requests if translating(p)]) == 1
    assert events[-1][0] == "done"
    # the router's two calls, the translation and the answer
    assert events[-1][1]["usage"]["prompt_tokens"] == 10 + 10 + 300 + 20
    assert events[-1][1]["usage"]["completion_tokens"] == 4


def test_tool_search_translation_needs_a_model(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tool_search_translation translates with the service"):
        config(tmp_path / "a.db", tool_search_translation=True)
    parser = build_parser(["serve"])
    assert not config_from_arguments(
        parser.parse_args(["serve", "--model", "test"])
    ).tool_search_translation
    with pytest.raises(OptionError, match="not with --model test"):
        config_from_arguments(
            parser.parse_args(["serve", "--model", "test", "--tool-search-translation"])
        )
