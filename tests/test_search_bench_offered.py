"""``offered_by_turn`` (bench_search's "offered All@k") counts what the real advisor offers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from tooluse.client import ChatClient
from tooluse.memory import CONVERSATION_ID, MessageChatMemoryAdvisor, MessageWindowChatMemory
from tooluse.messages import Prompt, UserMessage
from tooluse.search import (
    ToolReference,
    ToolSearchRequest,
    ToolSearchResponse,
    ToolSearchToolCallingAdvisor,
)
from tooluse.search.bench import BenchQuery, complete_within, offered_by_turn
from tooluse.testing import FunctionModel, ResponseLike, tool_call
from tooluse.tools import FunctionToolCallback, ToolCallback

NAMES = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
# Each turn's search finds these, best first ("ghost" is not attached: it takes no place).
FOUND = {
    "turn 0": ["alpha", "bravo"],
    "turn 1": ["charlie", "alpha"],  # alpha found again: recent
    "turn 2": ["delta", "echo"],  # five found, cap 4: bravo, the least recent, dropped
    "turn 3": ["ghost", "bravo"],  # bravo back; alpha (turn 1's second) dropped
    "turn 4": ["foxtrot"],
}


class ScriptedSearchIndex:
    """A tool index whose search for a query returns the names ``FOUND`` gives it."""

    def __init__(self, found: Mapping[str, Sequence[str]]) -> None:
        self.found = found

    def index_tool(self, session_id: str, reference: ToolReference) -> None:
        pass  # the results are scripted: nothing to index

    def index_tools(self, session_id: str, references: Sequence[ToolReference]) -> None:
        pass

    def clear_index(self, session_id: str) -> None:
        pass

    def search(self, request: ToolSearchRequest) -> ToolSearchResponse:
        names = self.found[request.query][: request.max_results]
        return ToolSearchResponse(
            tuple(ToolReference(name, 1.0 / (rank + 1), name) for rank, name in enumerate(names))
        )


def _callback(name: str) -> ToolCallback:
    return FunctionToolCallback(lambda arguments: "ok", name=name, description=f"tool {name}")


def _search_then_answer(prompt: Prompt) -> ResponseLike:
    """Each turn searches once with the user's text, then answers."""
    last = prompt.messages[-1]
    if isinstance(last, UserMessage):
        return tool_call("toolSearchTool", {"query": last.text}, id=f"s-{len(prompt.messages)}")
    return "done"


@pytest.mark.parametrize("inside_tool_loop", [False, True])
@pytest.mark.parametrize("accumulate", [True, False])
def test_offered_by_turn_is_what_the_advisor_offers_after_each_turns_search(
    accumulate: bool, inside_tool_loop: bool
) -> None:
    advisor = ToolSearchToolCallingAdvisor(
        tool_index=ScriptedSearchIndex(FOUND),
        max_results=2,
        max_exposed_tools=4,
        accumulate=accumulate,
    )
    memory = MessageChatMemoryAdvisor(
        MessageWindowChatMemory(max_messages=100), inside_tool_loop=inside_tool_loop
    )
    model = FunctionModel(_search_then_answer)
    client = ChatClient(
        model,
        tools=[_callback(name) for name in NAMES],
        tool_calling_advisor=advisor,
        advisors=[memory],
    )
    for text in FOUND:
        client.prompt().user(text).context({CONVERSATION_ID: "c"}).call()
    # Each turn's second model call comes after its search.
    after_search = [
        [c.definition.name for c in request.options.tool_callbacks][1:]
        for request in model.requests[1::2]
    ]
    # A memory outside the loop stores the question and the answer, not the searches: each
    # turn is then offered its own search's tools, as if it were a conversation of its own.
    conversations = [list(FOUND)] if inside_tool_loop else [[turn] for turn in FOUND]
    counted = offered_by_turn(advisor, conversations, FOUND, 2, NAMES)
    assert [counted[turn] for turn in FOUND] == after_search
    if not inside_tool_loop:
        assert after_search[1] == ["charlie", "alpha"]
    elif accumulate:
        assert after_search[2] == ["alpha", "charlie", "delta", "echo"]
        assert after_search[3] == ["bravo", "charlie", "delta", "echo"]
    else:
        assert after_search[3] == ["bravo"]


def test_offered_by_turn_keeps_conversations_apart_and_takes_the_top_k() -> None:
    advisor = ToolSearchToolCallingAdvisor(tool_index=ScriptedSearchIndex(FOUND))
    rankings = {"a0": ["alpha", "bravo"], "a1": ["charlie"], "b0": ["delta"]}
    counted = offered_by_turn(advisor, [["a0", "a1"], ["b0"]], rankings, 1, NAMES)
    assert counted == {"a0": ["alpha"], "a1": ["alpha", "charlie"], "b0": ["delta"]}
    queries = [
        BenchQuery("a1", "q", ("alpha", "charlie"), {}),  # one tool from each turn: complete
        BenchQuery("b0", "q", ("delta", "echo"), {}),
    ]
    assert complete_within(queries, counted) == 0.5


def test_offered_by_turn_refuses_bad_input() -> None:
    advisor = ToolSearchToolCallingAdvisor(tool_index=ScriptedSearchIndex(FOUND))
    with pytest.raises(ValueError, match="k must be an integer of at least 1, got 0"):
        offered_by_turn(advisor, [["a0"]], {}, 0, NAMES)
    deferring = ToolSearchToolCallingAdvisor(
        tool_index=ScriptedSearchIndex(FOUND), defer_loading=True
    )
    with pytest.raises(ValueError, match="without deferred loading; this one has defer_loading"):
        offered_by_turn(deferring, [["a0"]], {}, 1, NAMES)
    with pytest.raises(ValueError, match="'a0' is a turn of more than one conversation"):
        offered_by_turn(advisor, [["a0"], ["a0"]], {}, 1, NAMES)
    with pytest.raises(ValueError, match="at least one query"):
        complete_within([], {})
