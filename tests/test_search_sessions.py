"""What a new conversation costs over a known catalogue: no pass over the tools' texts, no copy
of them (the work per session is bounded by mechanism here; docs/benchmarks.md times it)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

import tooluse.search._advisor as advisor_module
import tooluse.search._sessions as sessions_module
from tooluse.client import ChatClient
from tooluse.memory import CONVERSATION_ID
from tooluse.search import (
    BM25ToolIndex,
    RegexToolIndex,
    ToolCatalogue,
    ToolReference,
    ToolSearchRequest,
    ToolSearchToolCallingAdvisor,
)
from tooluse.testing import ScriptedModel, tool_call
from tooluse.tools import FunctionToolCallback, ToolCallback, ToolDefinition


def run(arguments: dict[str, object]) -> str:
    return "ok"


def callbacks(count: int) -> list[ToolCallback]:
    return [
        FunctionToolCallback(
            run,
            name=f"tool_{number}",
            description=f"Does thing number {number} for the weather",
            input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        )
        for number in range(count)
    ]


class Counting:
    """Counts the calls of a module function, calling it through."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> None:
        self.calls = 0
        original = getattr(module, name)

        def counted(*args: object) -> object:
            self.calls += 1
            return original(*args)

        monkeypatch.setattr(module, name, counted)


def converse(
    advisor: ToolSearchToolCallingAdvisor, tools: Sequence[ToolCallback], conversations: list[str]
) -> None:
    model = ScriptedModel(
        [tool_call("toolSearchTool", {"query": "weather"}, id="s"), "done"] * len(conversations)
    )
    client = ChatClient(model, tools=list(tools), tool_calling_advisor=advisor)
    for conversation in conversations:
        client.prompt().user("weather?").context({CONVERSATION_ID: conversation}).call()


def test_new_conversations_over_known_tools_neither_hash_nor_copy_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fingerprints = Counting(monkeypatch, advisor_module, "tool_fingerprint")
    catalogue_keys = Counting(monkeypatch, sessions_module, "_catalogue_key")
    references = Counting(monkeypatch, ToolReference, "from_callback")
    index = BM25ToolIndex()
    advisor = ToolSearchToolCallingAdvisor(tool_index=index)
    tools = callbacks(50)
    advisor.warm_up(tools)
    assert (fingerprints.calls, catalogue_keys.calls, references.calls) == (1, 1, 50)
    converse(advisor, tools, [f"conversation-{number}" for number in range(5)] + ["c0"] * 3)
    # Eight turns of six conversations: no tool read again, no catalogue hashed again.
    assert (fingerprints.calls, catalogue_keys.calls, references.calls) == (1, 1, 50)
    shared = {id(index._sessions[f"conversation-{n}"].catalogue) for n in range(5)}
    assert len(shared) == 1  # one catalogue object, not a copy per session
    found = index.search(ToolSearchRequest("conversation-3", "thing number 7", max_results=1))
    assert found.tool_names == ["tool_7"]


class Replaceable:
    """A callback whose definition can be swapped, as a protocol implementation may do."""

    def __init__(self, name: str, description: str) -> None:
        self.definition = ToolDefinition(name, description, {"type": "object"})
        self.metadata = FunctionToolCallback(run, name=name).metadata

    def call(self, arguments: str, context: object = None) -> str:
        return "ok"

    async def acall(self, arguments: str, context: object = None) -> str:
        return "ok"


def test_a_replaced_definition_or_another_tool_list_is_read_again() -> None:
    index = BM25ToolIndex()
    advisor = ToolSearchToolCallingAdvisor(tool_index=index)
    tools: list[ToolCallback] = [*callbacks(3), Replaceable("lookup", "Find a book")]
    converse(advisor, tools, ["c"])
    assert index.search(ToolSearchRequest("c", "book")).tool_names == ["lookup"]
    tools[3].definition = ToolDefinition("lookup", "Find a film", {"type": "object"})  # type: ignore[misc]
    converse(advisor, tools, ["c"])
    assert index.search(ToolSearchRequest("c", "film")).tool_names == ["lookup"]
    converse(advisor, tools[:2], ["c"])
    assert index.size("c") == 2


def test_a_catalogue_keeps_the_last_of_a_name_and_a_session_adding_to_it_copies_it() -> None:
    first = ToolReference("a", None, "one")
    catalogue = ToolCatalogue(
        [first, ToolReference("b", None, "two"), ToolReference("a", None, "x")]
    )
    assert [(r.tool_name, r.summary) for r in catalogue] == [("b", "two"), ("a", "x")]
    assert catalogue[0].tool_name == "b" and len(catalogue[:1]) == 1
    with pytest.raises(TypeError, match="expected ToolReference, got str"):
        ToolCatalogue(["a"])  # type: ignore[list-item]
    index = BM25ToolIndex()
    index.replace_tools("s1", catalogue)
    index.replace_tools("s2", catalogue)
    index.index_tools("s2", [ToolReference("c", None, "three")])
    assert index.size("s1") == 2 and index.size("s2") == 3
    assert len(catalogue) == 2  # the shared catalogue is not changed
    assert index.search(ToolSearchRequest("s1", "three")).tool_names == []
    assert index.search(ToolSearchRequest("s2", "three")).tool_names == ["c"]
    index.replace_tools("s1", ToolCatalogue([]))
    assert index.size("s1") == 0


def test_a_known_session_with_nothing_changed_starts_its_turn_without_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = BM25ToolIndex()
    advisor = ToolSearchToolCallingAdvisor(tool_index=index)
    prepared = Counting(monkeypatch, advisor, "_prepare_session")  # what runs in a thread
    tools = callbacks(50)
    converse(advisor, tools, ["c0", "c0", "c0", "c1", "c0"])
    assert prepared.calls == 2  # each session's first turn indexes it; the others start here
    tools[7] = FunctionToolCallback(run, name="tool_7", description="Books a flight")
    converse(advisor, tools, ["c0", "c0"])  # another list: indexed again, once
    assert prepared.calls == 3
    assert index.search(ToolSearchRequest("c0", "flight", max_results=1)).tool_names == ["tool_7"]


class CountedDefinition(FunctionToolCallback):
    """A built-in callback (its definition fixed) that counts the reads of its definition."""

    reads = 0

    @property
    def definition(self) -> ToolDefinition:
        CountedDefinition.reads += 1
        return super().definition


def test_a_known_list_of_fixed_definitions_is_not_read_again_per_request() -> None:
    tools = [
        CountedDefinition(run, name=f"tool_{number}", description=f"Does thing {number}")
        for number in range(200)
    ]
    advisor = ToolSearchToolCallingAdvisor(tool_index=BM25ToolIndex())
    model = ScriptedModel([tool_call("toolSearchTool", {"query": "thing"}, id="s"), "ok"] * 4)
    client = ChatClient(model, tools=tools, tool_calling_advisor=advisor)
    reads = []
    for conversation in ("c", "c", "c", "d"):
        before = CountedDefinition.reads
        client.prompt().user("thing?").context({CONVERSATION_ID: conversation}).call()
        reads.append(CountedDefinition.reads - before)
    # The first turn made the catalogue (every definition read); a later one, of a known
    # session or a new one, reads at most those of the few tools offered to the model.
    assert reads[0] >= len(tools)
    assert max(reads[1:]) < 20


def test_a_bm25_search_runs_on_the_loop_once_built_other_indexes_in_the_tool_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    threads: list[str] = []
    for index in (BM25ToolIndex(), RegexToolIndex()):
        search = index.search

        def recorded(request: ToolSearchRequest, search: Any = search) -> Any:
            threads.append(threading.current_thread().name)
            return search(request)

        monkeypatch.setattr(index, "search", recorded)
        advisor = ToolSearchToolCallingAdvisor(tool_index=index)
        converse(advisor, callbacks(20), ["c", "c", "c"])
    main = threading.current_thread().name
    # BM25: the first search builds the session's structures (in the pool), then on the loop.
    assert threads[0] != main and threads[1:3] == [main, main]
    assert all(name != main for name in threads[3:]) and len(threads) == 6
