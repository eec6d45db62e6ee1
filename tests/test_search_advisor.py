"""ToolSearchTool and ToolSearchToolCallingAdvisor, over the real loop with ScriptedModel."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Sequence

import pytest

from search_fakes import BagOfWordsModel
from tooluse.advisors import ToolCallingAdvisor
from tooluse.client import ChatClient
from tooluse.embedding import Vectors
from tooluse.memory import CONVERSATION_ID
from tooluse.messages import SystemMessage, ToolResponseMessage
from tooluse.search import (
    AlwaysEvictStrategy,
    CompositeEvictionStrategy,
    HybridToolIndex,
    LruEvictionStrategy,
    NeverEvictStrategy,
    RegexToolIndex,
    ReplaceableToolIndex,
    ToolIndex,
    ToolReference,
    ToolSearchRequest,
    ToolSearchResponse,
    ToolSearchTool,
    ToolSearchToolCallingAdvisor,
    TtlEvictionStrategy,
    tool_fingerprint,
)
from tooluse.testing import ScriptedModel, ScriptExhaustedError, tool_call
from tooluse.tools import FunctionToolCallback, ToolCallback, ToolContext, tool, tool_callbacks


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"sunny in {city}"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email to a contact."""
    return "sent"


@tool
def book_flight(destination: str) -> str:
    """Book a flight to a destination."""
    return "booked"


TOOLS = [get_weather, send_email, book_flight]


class CountingIndex:
    """Wraps an index and counts the calls the advisor makes."""

    def __init__(self, inner: ToolIndex) -> None:
        self.inner = inner
        self.indexed: list[tuple[str, list[str]]] = []
        self.cleared: list[str] = []
        self.searches: list[ToolSearchRequest] = []

    def index_tool(self, session_id: str, reference: ToolReference) -> None:
        self.index_tools(session_id, [reference])

    def index_tools(self, session_id: str, references: Sequence[ToolReference]) -> None:
        self.indexed.append((session_id, [r.tool_name for r in references]))
        self.inner.index_tools(session_id, references)

    def search(self, request: ToolSearchRequest) -> ToolSearchResponse:
        self.searches.append(request)
        return self.inner.search(request)

    def clear_index(self, session_id: str) -> None:
        self.cleared.append(session_id)
        self.inner.clear_index(session_id)


def offered(model: ScriptedModel) -> list[list[str]]:
    return [[c.definition.name for c in p.options.tool_callbacks] for p in model.requests]


def client_for(model: ScriptedModel, advisor: ToolSearchToolCallingAdvisor) -> ChatClient:
    return ChatClient(model, tools=TOOLS, tool_calling_advisor=advisor)


def ask(client: ChatClient, text: str = "weather in Paris?", conversation: str = "c1") -> str:
    return client.prompt().user(text).context({CONVERSATION_ID: conversation}).call().content()


def test_full_loop_offers_search_tool_then_the_found_tool_which_runs() -> None:
    model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"query": "weather"}, id="s1"),
            tool_call("get_weather", {"city": "Paris"}, id="w1"),
            "It is sunny.",
        ]
    )
    advisor = ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex())
    assert isinstance(advisor, ToolCallingAdvisor)
    assert ask(client_for(model, advisor)) == "It is sunny."
    assert offered(model) == [
        ["toolSearchTool"],
        ["toolSearchTool", "get_weather"],
        ["toolSearchTool", "get_weather"],
    ]
    tool_results = [m for m in model.requests[2].messages if isinstance(m, ToolResponseMessage)]
    assert json.loads(tool_results[0].responses[0].data) == ["get_weather"]
    assert json.loads(tool_results[1].responses[0].data) == "sunny in Paris"
    system = model.requests[0].messages[0]
    assert isinstance(system, SystemMessage) and "toolSearchTool" in system.text


def test_missing_conversation_id_is_a_clear_error() -> None:
    model = ScriptedModel(["unused"])
    client = client_for(model, ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex()))
    with pytest.raises(ValueError, match="chat_memory_conversation_id"):
        client.prompt().user("hi").call()


def test_unchanged_tools_are_indexed_once_and_changes_reindex() -> None:
    index = CountingIndex(RegexToolIndex())
    model = ScriptedModel(["a", "b", "c", "d"])
    advisor = ToolSearchToolCallingAdvisor(tool_index=index)
    client = client_for(model, advisor)
    ask(client)
    ask(client)
    assert index.indexed == [("c1", ["get_weather", "send_email", "book_flight"])]
    client.prompt().user("x").tools(get_weather).context({CONVERSATION_ID: "c1"}).call()
    assert index.indexed[-1] == ("c1", ["get_weather"])
    ask(client, conversation="c2")
    assert [session for session, _ in index.indexed] == ["c1", "c1", "c2"]


def test_a_replaceable_index_is_reindexed_in_one_step() -> None:
    # With clear_index then index_tools, a search of the conversation running meanwhile (a
    # second request of it) found an empty session.
    class Recording(RegexToolIndex):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[tuple[str, list[str]]] = []

        def replace_tools(self, session_id: str, references: Sequence[ToolReference]) -> None:
            self.calls.append(("replace", [r.tool_name for r in references]))
            super().replace_tools(session_id, references)

        def clear_index(self, session_id: str) -> None:
            self.calls.append(("clear", []))
            super().clear_index(session_id)

    index = Recording()
    assert isinstance(index, ReplaceableToolIndex)
    client = client_for(ScriptedModel(["a", "b"]), ToolSearchToolCallingAdvisor(tool_index=index))
    ask(client)
    client.prompt().user("x").tools(get_weather).context({CONVERSATION_ID: "c1"}).call()
    assert index.calls == [
        ("replace", ["get_weather", "send_email", "book_flight"]),
        ("replace", ["get_weather"]),
    ]
    assert not isinstance(CountingIndex(index), ReplaceableToolIndex)  # cleared, then indexed


def test_fingerprint_ignores_order_and_schema() -> None:
    a = [ToolReference("b", None, "y"), ToolReference("a", None, "x", {"type": "object"})]
    b = [ToolReference("a", None, "x"), ToolReference("b", None, "y")]
    assert tool_fingerprint(a) == tool_fingerprint(b)
    assert tool_fingerprint(a) != tool_fingerprint([ToolReference("a", None, "changed"), a[0]])


def test_discovery_order_is_stable_and_capped_dropping_the_oldest() -> None:
    model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"query": "email"}, id="s1"),
            tool_call("toolSearchTool", {"query": "flight"}, id="s2"),
            tool_call("toolSearchTool", {"query": "weather"}, id="s3"),
            tool_call("toolSearchTool", {"query": "email"}, id="s4"),
            "done",
        ]
    )
    advisor = ToolSearchToolCallingAdvisor(
        tool_index=RegexToolIndex(), max_results=1, max_exposed_tools=2
    )
    ask(client_for(model, advisor))
    assert offered(model) == [
        ["toolSearchTool"],
        ["toolSearchTool", "send_email"],
        ["toolSearchTool", "send_email", "book_flight"],
        ["toolSearchTool", "book_flight", "get_weather"],  # send_email, the oldest, dropped
        ["toolSearchTool", "send_email", "get_weather"],  # found again: back, in first order
    ]


def test_without_accumulation_only_the_last_search_counts() -> None:
    model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"query": "email"}, id="s1"),
            tool_call("toolSearchTool", {"query": "flight"}, id="s2"),
            "done",
        ]
    )
    advisor = ToolSearchToolCallingAdvisor(
        tool_index=RegexToolIndex(), max_results=1, accumulate=False
    )
    ask(client_for(model, advisor))
    assert offered(model)[2] == ["toolSearchTool", "book_flight"]


def test_results_that_are_not_names_or_not_attached_are_ignored() -> None:
    index = RegexToolIndex()
    index.index_tools("c1", [ToolReference("ghost", None, "weather")])
    model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"wrong": "args"}, id="bad"),  # an error result
            "done",
        ]
    )
    advisor = ToolSearchToolCallingAdvisor(tool_index=index)
    ask(client_for(model, advisor))
    assert offered(model) == [["toolSearchTool"], ["toolSearchTool"]]
    found = advisor._found_rounds(
        [
            ToolResponseMessage(
                responses=(
                    _response('"just text"'),
                    _response("not json"),
                    _response('["get_weather", 3]'),
                    _response('["send_email", "ghost"]'),
                )
            )
        ]
    )
    assert found == [["send_email", "ghost"]]  # "ghost" is dropped later: not attached


def _response(data: str) -> object:
    from tooluse.messages import ToolResponse

    return ToolResponse(id="x", name="TOOLSEARCHTOOL", data=data)


def test_preselection_offers_the_top_tools_on_the_first_call() -> None:
    model = ScriptedModel([tool_call("get_weather", {"city": "Oslo"}, id="w"), "cold"])
    advisor = ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), preselect=1)
    assert ask(client_for(model, advisor), "what is the weather in Oslo") == "cold"
    assert offered(model)[0] == ["toolSearchTool", "get_weather"]


def test_a_preselected_tool_that_ran_stays_offered_in_later_turns() -> None:
    # Offered tools came from search results in the history only: a tool preselected in one
    # turn and used was gone in the next ("and in Rome?" preselects nothing), and the model,
    # which saw its earlier call replayed by memory (inside the loop: memory outside it keeps
    # no tool traffic), got "unknown tool".
    from tooluse.memory import MessageChatMemoryAdvisor, MessageWindowChatMemory

    model = ScriptedModel(
        [
            tool_call("get_weather", {"city": "Oslo"}, id="w1"),
            "cold",
            tool_call("get_weather", {"city": "Rome"}, id="w2"),
            "sunny",
        ]
    )
    advisor = ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), preselect=1)
    memory = MessageChatMemoryAdvisor(MessageWindowChatMemory(), inside_tool_loop=True)
    client = ChatClient(model, tools=TOOLS, tool_calling_advisor=advisor, advisors=[memory])
    assert ask(client, "what is the weather in Oslo") == "cold"
    assert ask(client, "and in Rome?") == "sunny"
    assert offered(model)[2:] == [["toolSearchTool", "get_weather"]] * 2
    last = [m for m in model.requests[-1].messages if isinstance(m, ToolResponseMessage)][-1]
    assert last.responses[0].data == '"sunny in Rome"'
    # A tool whose call failed (say, not offered: "unknown tool") is not carried over.
    other = ScriptedModel([tool_call("book_flight", {}, id="b1"), "no", "x"])
    client = ChatClient(other, tools=TOOLS, tool_calling_advisor=advisor, advisors=[memory])
    ask(client, "zzz", "c2")
    ask(client, "zzz", "c2")
    assert offered(other)[2] == ["toolSearchTool"]


def test_max_results_precedence_model_then_advisor_then_index() -> None:
    index = CountingIndex(RegexToolIndex())
    model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"query": "a", "max_results": 2}, id="s1"),
            tool_call("toolSearchTool", {"query": "b"}, id="s2"),
            "done",
        ]
    )
    ask(client_for(model, ToolSearchToolCallingAdvisor(tool_index=index, max_results=5)))
    assert [r.max_results for r in index.searches] == [2, 5]
    tool = ToolSearchTool(index)
    tool.callback.call('{"query": "c"}', ToolContext({"toolSearchToolSessionId": "c1"}))
    assert index.searches[-1].max_results is None  # the index decides: 10


def test_search_tool_without_session_is_an_error_for_the_model() -> None:
    with pytest.raises(ValueError, match="toolSearchToolSessionId"):
        ToolSearchTool(RegexToolIndex()).callback.call('{"query": "x"}')


async def test_concurrent_sessions_see_only_their_own_tools() -> None:
    index = HybridToolIndex(BagOfWordsModel())
    advisor = ToolSearchToolCallingAdvisor(tool_index=index, max_results=3)

    async def conversation(number: int) -> list[list[str]]:
        @tool(name=f"private_tool_{number}")
        def private() -> str:
            """Weather station readings."""
            return "ok"

        model = ScriptedModel([tool_call("toolSearchTool", {"query": "weather"}, id="s"), "x"])
        client = ChatClient(model, tools=[private], tool_calling_advisor=advisor)
        await client.prompt().user("q").context({CONVERSATION_ID: f"c{number}"}).acall()
        return offered(model)

    results = await asyncio.gather(*(conversation(n) for n in range(10)))
    for number, requests in enumerate(results):
        assert requests == [["toolSearchTool"], ["toolSearchTool", f"private_tool_{number}"]]


def test_eviction_lru_clears_the_least_recent_session() -> None:
    index = CountingIndex(RegexToolIndex())
    model = ScriptedModel(["a", "b", "c"])
    advisor = ToolSearchToolCallingAdvisor(
        tool_index=index, eviction_strategy=LruEvictionStrategy(1)
    )
    client = client_for(model, advisor)
    ask(client, conversation="c1")
    ask(client, conversation="c2")
    assert "c1" in index.cleared
    ask(client, conversation="c1")  # evicted: indexed again
    assert [session for session, _ in index.indexed] == ["c1", "c2", "c1"]


def test_eviction_always_reindexes_every_request() -> None:
    index = CountingIndex(RegexToolIndex())
    advisor = ToolSearchToolCallingAdvisor(
        tool_index=index, eviction_strategy=AlwaysEvictStrategy()
    )
    client = client_for(ScriptedModel(["a", "b"]), advisor)
    ask(client)
    ask(client)
    assert len(index.indexed) == 2


def test_eviction_strategies() -> None:
    lru = LruEvictionStrategy(2)
    assert lru.on_access("a") == [] and lru.on_access("b") == []
    lru.on_access("a")
    assert lru.on_access("c") == ["b"]
    with pytest.raises(ValueError, match="max_sessions"):
        LruEvictionStrategy(0)
    now = [0.0]
    ttl = TtlEvictionStrategy(10, clock=lambda: now[0])
    ttl.on_access("a")
    now[0] = 5
    ttl.on_access("b")
    now[0] = 12
    assert ttl.on_access("b") == ["a"]
    now[0] = 100
    assert ttl.on_access("b") == []  # the current session is never evicted
    with pytest.raises(ValueError, match="ttl"):
        TtlEvictionStrategy(0)
    assert NeverEvictStrategy().on_access("a") == []
    assert AlwaysEvictStrategy().on_access("a") == ["a"]
    composite = CompositeEvictionStrategy(LruEvictionStrategy(1), AlwaysEvictStrategy())
    composite.on_access("x")
    assert composite.on_access("y") == ["x", "y"]
    with pytest.raises(ValueError, match="at least one"):
        CompositeEvictionStrategy()


def test_system_suffix_is_added_to_the_first_system_message_once() -> None:
    model = ScriptedModel([tool_call("toolSearchTool", {"query": "x"}, id="s"), "done"])
    advisor = ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), system_message_suffix="!S")
    client = ChatClient(model, system="Be brief.", tools=TOOLS, tool_calling_advisor=advisor)
    client.prompt().user("q").context({CONVERSATION_ID: "c"}).call()
    for request in model.requests:
        systems = [m.text for m in request.messages if isinstance(m, SystemMessage)]
        assert systems == ["Be brief.!S"]


def test_advisor_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="max_exposed_tools"):
        ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), max_exposed_tools=0)
    with pytest.raises(ValueError, match="preselect"):
        ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), preselect=-1)
    with pytest.raises(ValueError, match="suffix"):
        ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), system_message_suffix=" ")
    assert isinstance(ToolSearchTool(RegexToolIndex()).callback, ToolCallback)


def test_a_found_tool_that_needs_approval_pauses_and_resumes() -> None:
    from tooluse.calling import Approve
    from tooluse.client import RunState

    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file from the disk."""
        return f"deleted {path}"

    model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"query": "delete file"}, id="s1"),
            tool_call("delete_file", {"path": "/tmp/x"}, id="d1"),
            "Deleted.",
        ]
    )
    advisor = ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex())
    client = ChatClient(model, tools=[*TOOLS, delete_file], tool_calling_advisor=advisor)
    paused = client.prompt().user("remove /tmp/x").context({CONVERSATION_ID: "c1"}).call()
    assert [call.name for call in paused.pending_tool_calls] == ["delete_file"]
    state = RunState.from_json(paused.state.to_json())  # type: ignore[union-attr]
    resumed = client.resume(state, {"d1": Approve()})
    assert resumed.content() == "Deleted."
    assert offered(model)[-1] == ["toolSearchTool", "delete_file"]


async def test_streaming_uses_the_same_rules() -> None:
    model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"query": "weather"}, id="s1"),
            tool_call("get_weather", {"city": "Rome"}, id="w1"),
            "Sunny in Rome.",
        ],
        chunk_size=4,
    )
    advisor = ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex())
    client = client_for(model, advisor)
    stream = client.prompt().user("weather in Rome?").context({CONVERSATION_ID: "c"}).stream()
    text = "".join([chunk.text async for chunk in stream])
    assert text == "Sunny in Rome."
    assert offered(model) == [
        ["toolSearchTool"],
        ["toolSearchTool", "get_weather"],
        ["toolSearchTool", "get_weather"],
    ]


class ServerTool(FunctionToolCallback):
    """A tool that names its MCP server the way ``McpToolCallback`` does."""

    def __init__(self, function: object, server_name: str) -> None:
        super().__init__(function)
        self.server_name = server_name


def test_category_filter_selects_a_toolset_and_an_unknown_one_is_explained() -> None:
    tools = [ServerTool(get_weather, "weather-server"), ServerTool(send_email, "mail-server")]
    model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"query": "send", "category_filter": "news"}, id="s1"),
            tool_call(
                "toolSearchTool",
                {"query": "get weather send email", "category_filter": "Weather-Server"},
                id="s2",
            ),
            "done",
        ]
    )
    advisor = ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex())
    client = ChatClient(model, tools=[*tools, book_flight], tool_calling_advisor=advisor)
    assert ask(client) == "done"
    results = [
        m.responses[0] for m in model.requests[2].messages if isinstance(m, ToolResponseMessage)
    ]
    # The model guessed a category: it is told which there are, and searches again.
    assert "no tool has the category 'news'" in results[0].data
    assert "['mail-server', 'weather-server']" in results[0].data
    assert json.loads(results[1].data) == ["get_weather"]


def test_tool_category_is_the_users_choice_and_part_of_the_fingerprint() -> None:
    index = CountingIndex(RegexToolIndex())
    category = {"get_weather": "outdoors"}
    advisor = ToolSearchToolCallingAdvisor(
        tool_index=index, tool_category=lambda callback: category.get(callback.definition.name)
    )
    model = ScriptedModel(["one", "two"])
    client = client_for(model, advisor)
    ask(client)
    found = index.search(ToolSearchRequest("c1", "weather", category_filter="outdoors"))
    assert found.tool_names == ["get_weather"]
    category["get_weather"] = "weather"
    ask(client)  # same names and descriptions, another category: indexed again
    assert len(index.indexed) == 2
    with pytest.raises(ValueError, match=r"no tool has the category 'outdoors'.*\['weather'\]"):
        index.search(ToolSearchRequest("c1", "weather", category_filter="outdoors"))


def test_a_category_filter_without_categories_says_so() -> None:
    index = RegexToolIndex()
    index.index_tools("s", [ToolReference("get_weather", None, "weather")])
    with pytest.raises(ValueError, match=r"no tool has a category.*search without category_filter"):
        index.search(ToolSearchRequest("s", "weather", category_filter="weather"))


def test_found_tools_stay_offered_when_the_loop_sends_only_the_last_results() -> None:
    # Memory inside the loop with conversation_history=False (docs/memory-and-rag.md): each
    # model call's messages hold only the last round's results, yet a tool found two rounds
    # ago is still offered, as with the full history.
    from tooluse.memory import MessageChatMemoryAdvisor, MessageWindowChatMemory

    model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"query": "weather"}, id="s1"),
            tool_call("get_weather", {"city": "Paris"}, id="w1"),
            tool_call("get_weather", {"city": "Rome"}, id="w2"),
            "Sunny in both.",
        ]
    )
    advisor = ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), conversation_history=False)
    client = ChatClient(
        model,
        tools=TOOLS,
        tool_calling_advisor=advisor,
        advisors=[MessageChatMemoryAdvisor(MessageWindowChatMemory(), inside_tool_loop=True)],
    )
    assert ask(client) == "Sunny in both."
    assert offered(model) == [
        ["toolSearchTool"],
        ["toolSearchTool", "get_weather"],
        ["toolSearchTool", "get_weather"],
        ["toolSearchTool", "get_weather"],
    ]
    last = [m for m in model.requests[-1].messages if isinstance(m, ToolResponseMessage)][-1]
    assert last.responses[0].data == '"sunny in Rome"'  # it ran, not "unknown tool"


class _PausingIndex(CountingIndex):
    """Pauses inside ``index_tools`` for one session until told to go on."""

    def __init__(self, inner: ToolIndex, session: str) -> None:
        super().__init__(inner)
        self.session = session
        self.inside = threading.Event()
        self.go_on = threading.Event()

    def index_tools(self, session_id: str, references: Sequence[ToolReference]) -> None:
        super().index_tools(session_id, references)
        if session_id == self.session and not self.go_on.is_set():
            self.inside.set()
            assert self.go_on.wait(10)


@pytest.mark.parametrize("evict", ["strategy", "evict_session"])
def test_a_session_evicted_while_it_is_indexed_is_indexed_again(evict: str) -> None:
    # An eviction between indexing and recording the fingerprint left the fingerprint of a
    # cleared index: every later request skipped indexing and every search found nothing.
    index = _PausingIndex(RegexToolIndex(), "c1")
    advisor = ToolSearchToolCallingAdvisor(
        tool_index=index, eviction_strategy=LruEvictionStrategy(1)
    )
    first = threading.Thread(target=ask, args=(client_for(ScriptedModel(["a"]), advisor),))
    first.start()
    assert index.inside.wait(10)
    evicting = threading.Thread(
        target=ask if evict == "strategy" else advisor.evict_session,
        args=(client_for(ScriptedModel(["b"]), advisor), "q", "c2")
        if evict == "strategy"
        else ("c1",),
    )
    evicting.start()
    evicting.join(0.2)  # the eviction waits for the indexing (or, before the fix, clears)
    index.go_on.set()
    first.join(10)
    evicting.join(10)
    model = ScriptedModel([tool_call("toolSearchTool", {"query": "weather"}, id="s1"), "done"])
    ask(client_for(model, advisor))
    assert offered(model) == [["toolSearchTool"], ["toolSearchTool", "get_weather"]]


def test_a_failed_reindex_does_not_leave_the_old_catalogue_unindexed() -> None:
    # The index was cleared, indexing the new catalogue failed, and the old fingerprint stayed:
    # the next request with the old catalogue matched it and searched an empty index.
    class FailingOnce(CountingIndex):
        fail = False

        def index_tools(self, session_id: str, references: Sequence[ToolReference]) -> None:
            if self.fail:
                self.fail = False
                raise ConnectionError("vector store down")
            super().index_tools(session_id, references)

    index = FailingOnce(RegexToolIndex())
    advisor = ToolSearchToolCallingAdvisor(tool_index=index)
    ask(client_for(ScriptedModel(["a"]), advisor))
    index.fail = True
    with pytest.raises(ConnectionError):
        client = client_for(ScriptedModel(["b"]), advisor)
        client.prompt().user("q").tools(send_email).context({CONVERSATION_ID: "c1"}).call()
    model = ScriptedModel([tool_call("toolSearchTool", {"query": "weather"}, id="s1"), "done"])
    ask(client_for(model, advisor))
    assert offered(model) == [["toolSearchTool"], ["toolSearchTool", "get_weather"]]


@pytest.mark.parametrize("value", [2.5, 5.0, True, "5"])
@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda v: ToolSearchTool(RegexToolIndex(), max_results=v), "max_results"),
        (
            lambda v: ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), max_results=v),
            "max_results",
        ),
        (
            lambda v: ToolSearchToolCallingAdvisor(
                tool_index=RegexToolIndex(), max_exposed_tools=v
            ),
            "max_exposed_tools",
        ),
        (
            lambda v: ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), preselect=v),
            "preselect",
        ),
        (lambda v: RegexToolIndex(default_max_results=v), "default_max_results"),
        (lambda v: HybridToolIndex(BagOfWordsModel(), candidates=v), "candidates"),
    ],
)
def test_counts_that_are_not_integers_are_refused_when_configured(
    make: object, name: str, value: object
) -> None:
    # They were accepted, then failed on every request: an advisor with max_results=5.0 (read
    # from a config file) made every toolSearchTool call an error the model could not fix
    # ("max_results must be a positive integer, got 5.0"); max_exposed_tools=2.5 and
    # default_max_results=2.5 raised TypeError on each request or search.
    with pytest.raises(ValueError, match=f"{name} must be an integer"):
        make(value)  # type: ignore[operator]


@pytest.mark.parametrize("conversation_history", [True, False])
def test_tools_found_in_earlier_turns_replayed_by_memory_inside_the_loop_stay_offered(
    conversation_history: bool,
) -> None:
    # Memory inside the loop replays the earlier turns' tool traffic to the model, but after
    # this advisor chose the tools: the model saw its earlier search find get_weather, called
    # it again, and got "unknown tool" (docs: found tools include "earlier turns a memory
    # advisor replays").
    from tooluse.memory import MessageChatMemoryAdvisor, MessageWindowChatMemory

    model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"query": "weather"}, id="s1"),
            tool_call("get_weather", {"city": "Paris"}, id="w1"),
            "Sunny in Paris.",
            tool_call("get_weather", {"city": "Rome"}, id="w2"),
            "Sunny in Rome.",
        ]
    )
    advisor = ToolSearchToolCallingAdvisor(
        tool_index=RegexToolIndex(), conversation_history=conversation_history
    )
    memory = MessageChatMemoryAdvisor(MessageWindowChatMemory(), inside_tool_loop=True)
    client = ChatClient(model, tools=TOOLS, tool_calling_advisor=advisor, advisors=[memory])
    assert ask(client) == "Sunny in Paris."
    assert ask(client, "and in Rome?") == "Sunny in Rome."
    assert offered(model)[3:] == [["toolSearchTool", "get_weather"]] * 2
    last = [m for m in model.requests[-1].messages if isinstance(m, ToolResponseMessage)][-1]
    assert last.responses[0].data == '"sunny in Rome"'
    # Another conversation's memory is not this one's.
    other = ScriptedModel(["x"])
    ask(ChatClient(other, tools=TOOLS, tool_calling_advisor=advisor, advisors=[memory]), "q", "c2")
    assert offered(other) == [["toolSearchTool"]]


def test_a_search_names_at_most_the_cap_its_best_matches() -> None:
    # A result longer than the cap named tools the model could not call; and recency was once
    # a name's position in the flattened results, so the best match of a result was dropped.
    index = RegexToolIndex()
    model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"query": "flight email weather"}, id="s1"),
            tool_call("toolSearchTool", {"query": "weather", "max_results": 5}, id="s2"),
            "done",
        ]
    )
    advisor = ToolSearchToolCallingAdvisor(tool_index=index, max_exposed_tools=2)
    ask(client_for(model, advisor))
    results = [m for m in model.requests[2].messages if isinstance(m, ToolResponseMessage)]
    found = [json.loads(result.responses[0].data) for result in results]
    assert found == [["book_flight", "send_email"], ["get_weather"]]  # best first, <= 2
    assert offered(model) == [
        ["toolSearchTool"],
        ["toolSearchTool", "book_flight", "send_email"],
        ["toolSearchTool", "book_flight", "get_weather"],  # the older round's worse dropped
    ]
    schema = advisor.search_tool.callback.definition.input_schema
    assert schema["properties"]["max_results"]["description"] == (
        "How many tools to return (default 2, at most 2)."
    )


def test_the_model_is_told_the_real_default_and_limit_of_max_results() -> None:
    def described(tool: ToolSearchTool) -> str:
        text = tool.callback.definition.input_schema["properties"]["max_results"]["description"]
        assert isinstance(text, str)
        return text

    # It said "(default 10)" whatever the settings.
    assert described(ToolSearchTool(RegexToolIndex(default_max_results=4))) == (
        "How many tools to return (default 4)."
    )
    assert described(ToolSearchTool(RegexToolIndex(), max_results=3, max_results_limit=8)) == (
        "How many tools to return (default 3, at most 8)."
    )
    advisor = ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), max_results=6)
    assert described(advisor.search_tool) == "How many tools to return (default 6, at most 32)."
    deferring = ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), defer_loading=True)
    assert described(deferring.search_tool) == "How many tools to return (default 10)."
    # The schema made from the signature is shared: one tool's text is not another's.
    assert described(ToolSearchTool(RegexToolIndex())) == "How many tools to return (default 10)."
    with pytest.raises(ValueError, match=r"max_results \(40\) must not exceed max_exposed_tools"):
        ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), max_results=40)
    with pytest.raises(ValueError, match="must not exceed max_results_limit"):
        ToolSearchTool(RegexToolIndex(), max_results=9, max_results_limit=8)


def test_an_attached_tool_named_like_the_search_tool_is_an_error_not_dropped() -> None:
    @tool(name="toolSearchTool")
    def impostor(query: str) -> str:
        """Search the web."""
        return "web results"

    model = ScriptedModel(["never"])
    advisor = ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex())
    client = ChatClient(model, tools=[*TOOLS, impostor], tool_calling_advisor=advisor)
    # It was left out of the catalogue without a word.
    with pytest.raises(ValueError, match=r"A tool named 'toolSearchTool' is attached.*rename"):
        ask(client)
    assert model.requests == []


def test_names_not_attached_take_no_place_under_the_cap_and_parallel_searches_interleave() -> None:
    advisor = ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), max_exposed_tools=2)
    callbacks = [FunctionToolCallback(function) for function in TOOLS]
    attached = {callback.definition.name: callback for callback in callbacks}
    # A stale or hallucinated name ("ghost") used to fill a place, so fewer tools were offered.
    assert advisor._kept([["get_weather", "send_email", "ghost"]], attached) == [
        "get_weather",
        "send_email",
    ]
    # Two searches in one round: each one's best match counts before the other's second.
    rounds = advisor._found_rounds(
        [
            ToolResponseMessage(
                responses=(
                    _response('["get_weather", "book_flight"]'),
                    _response('["send_email", "book_flight"]'),
                )
            )
        ]
    )
    assert rounds == [["get_weather", "send_email", "book_flight", "book_flight"]]
    assert advisor._kept(rounds, attached) == ["get_weather", "send_email"]


def test_warm_up_builds_the_index_every_conversation_over_those_tools_uses() -> None:
    class SlowModel(BagOfWordsModel):
        """Embeds catalogues slowly: a session's own build would still be embedding."""

        def embed_documents(self, texts: Sequence[str]) -> Vectors:
            time.sleep(0.5)
            return super().embed_documents(texts)

    model = SlowModel(aliases={"forecast": "weather"})  # only the vectors relate them
    advisor = ToolSearchToolCallingAdvisor(tool_index=HybridToolIndex(model), max_results=1)
    advisor.warm_up(tool_callbacks(*TOOLS))
    assert len(model.embedded) == len(TOOLS)
    scripted = ScriptedModel([tool_call("toolSearchTool", {"query": "forecast"}, id="s1"), "ok"])
    ask(client_for(scripted, advisor))
    # The conversation's first search ranked with the warmed vectors, embedding nothing new.
    assert offered(scripted)[1] == ["toolSearchTool", "get_weather"]
    assert len(model.embedded) == len(TOOLS)


class _WaitingModel(ScriptedModel):
    """A ScriptedModel whose first call waits until released: a turn kept under way."""

    def __init__(self, responses: list[object]) -> None:
        super().__init__(responses)  # type: ignore[arg-type]
        self.waiting = threading.Event()
        self.release = threading.Event()

    def _respond(self, prompt):  # type: ignore[no-untyped-def]
        if not self.requests:
            self.waiting.set()
            assert self.release.wait(10)
        return super()._respond(prompt)


@pytest.mark.parametrize("streamed", [False, True])
def test_a_session_the_strategy_evicts_during_its_turn_is_evicted_after_the_turn(
    streamed: bool,
) -> None:
    # Evicted while its model call was under way, the session's index was empty when its
    # search ran: the model read "[]" and concluded that no tool could help.
    index = CountingIndex(RegexToolIndex())
    advisor = ToolSearchToolCallingAdvisor(
        tool_index=index, eviction_strategy=LruEvictionStrategy(1)
    )
    model = _WaitingModel([tool_call("toolSearchTool", {"query": "weather"}, id="s1"), "done"])
    client = client_for(model, advisor)

    def first_turn() -> None:
        spec = client.prompt().user("weather?").context({CONVERSATION_ID: "c1"})
        if streamed:

            async def consume() -> None:
                async for _ in spec.stream():
                    pass

            asyncio.run(consume())
        else:
            spec.call()

    turn = threading.Thread(target=first_turn)
    turn.start()
    try:
        assert model.waiting.wait(10)
        cleared = index.cleared.count("c1")  # its first indexing clears it
        ask(client_for(ScriptedModel(["hi"]), advisor), conversation="c2")  # LRU(1): evicts c1
        assert index.cleared.count("c1") == cleared  # not while its turn is under way
    finally:
        model.release.set()
        turn.join(10)
    search_result = model.requests[1].messages[-1]
    assert isinstance(search_result, ToolResponseMessage)
    assert json.loads(search_result.responses[0].data) == ["get_weather"]
    assert index.cleared.count("c1") == cleared + 1  # evicted once the turn ended
    assert offered(model)[1] == ["toolSearchTool", "get_weather"]


def test_a_failed_turn_does_not_keep_its_session_from_eviction() -> None:
    index = CountingIndex(RegexToolIndex())
    advisor = ToolSearchToolCallingAdvisor(
        tool_index=index, eviction_strategy=LruEvictionStrategy(1)
    )
    with pytest.raises(ScriptExhaustedError):
        ask(client_for(ScriptedModel([]), advisor), conversation="c1")
    cleared = index.cleared.count("c1")
    ask(client_for(ScriptedModel(["hi"]), advisor), conversation="c2")
    assert index.cleared.count("c1") == cleared + 1  # its turn ended with the failure


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: LruEvictionStrategy(2.5), "max_sessions must be an integer"),
        (lambda: LruEvictionStrategy("3"), "max_sessions must be an integer"),
        (lambda: LruEvictionStrategy(True), "max_sessions must be an integer"),
        (lambda: TtlEvictionStrategy("10"), "ttl must be a timedelta or a number of seconds"),
        (lambda: TtlEvictionStrategy(None), "ttl must be a timedelta or a number of seconds"),
        (lambda: TtlEvictionStrategy(float("nan")), "ttl must be positive and finite"),
        (
            lambda: CompositeEvictionStrategy(object()),
            "strategies must be an EvictionStrategy, got object",
        ),
        (
            lambda: CompositeEvictionStrategy(NeverEvictStrategy),
            "the class NeverEvictStrategy, not an instance",
        ),
        (
            lambda: ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex),
            "tool_index must be a ToolIndex; got the class RegexToolIndex, not an instance",
        ),
        (
            lambda: ToolSearchToolCallingAdvisor(tool_index=object()),
            "tool_index must be a ToolIndex",
        ),
        (
            lambda: ToolSearchToolCallingAdvisor(
                tool_index=RegexToolIndex(), eviction_strategy=LruEvictionStrategy
            ),
            "eviction_strategy must be an EvictionStrategy; got the class",
        ),
        (
            lambda: ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), tool_category="mail"),
            "tool_category must be a function",
        ),
        (
            lambda: ToolSearchToolCallingAdvisor(
                tool_index=RegexToolIndex(), system_message_suffix=None
            ),
            "system_message_suffix must be a non-blank string",
        ),
        (
            lambda: ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex(), session_id_key=None),
            "session_id_key must be a non-blank string",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_bad_settings_are_refused_when_made_not_on_the_first_request(
    make: object, message: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=re.escape(message)):
        make()  # type: ignore[operator]
