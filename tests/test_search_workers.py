"""Tool search across workers: a conversation's discovered tools are the tools its stored
searches found, so they move with its memory (PostgreSQL, shared by the workers); each
worker's session state (the index of the attached tools, its fingerprint, the eviction
order) is rebuilt from the tools alone and needs no sharing."""

from __future__ import annotations

from test_search_advisor import TOOLS, ask, offered
from tooluse.client import ChatClient
from tooluse.memory import (
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    PostgresChatMemoryRepository,
)
from tooluse.search import RegexToolIndex, ToolSearchToolCallingAdvisor
from tooluse.testing import ScriptedModel, tool_call


def worker(model: ScriptedModel, repository: PostgresChatMemoryRepository) -> ChatClient:
    """One worker's client: its own advisor and index, the shared memory."""
    memory = MessageWindowChatMemory(repository=repository)
    return ChatClient(
        model,
        tools=TOOLS,
        tool_calling_advisor=ToolSearchToolCallingAdvisor(tool_index=RegexToolIndex()),
        advisors=[MessageChatMemoryAdvisor(memory, inside_tool_loop=True)],
    )


def test_tools_a_conversation_found_on_one_worker_are_offered_on_the_other(
    postgres_url: str,
) -> None:
    first_model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"query": "weather"}, id="s1"),
            tool_call("get_weather", {"city": "Paris"}, id="w1"),
            "Sunny in Paris.",
        ]
    )
    second_model = ScriptedModel([tool_call("get_weather", {"city": "Rome"}, id="w2"), "Rome."])
    with PostgresChatMemoryRepository(postgres_url) as repository:
        assert ask(worker(first_model, repository)) == "Sunny in Paris."
    # The next turn comes to another worker, whose index has never seen the conversation.
    with PostgresChatMemoryRepository(postgres_url) as repository:
        assert ask(worker(second_model, repository), "and in Rome?") == "Rome."
    assert offered(second_model) == [["toolSearchTool", "get_weather"]] * 2
