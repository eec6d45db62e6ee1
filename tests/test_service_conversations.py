"""``GET /api/conversations/{id}``: a conversation's stored turns and its runs waiting for
approval, as a reloaded page shows them; unknown and invalid ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from _service_helpers import (
    SCREEN_URL,
    fake_llm,
    names,
    parse_sse,
    respond,
    screenshot,
    screenshotting,
    service,
    store_screenshot_turn,
)
from tooluse.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
from tooluse.messages import (
    AssistantMessage,
    Prompt,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.qa import PAUSED_TURN_NOTE, STOPPED_TURN_NOTE, RouteEvent
from tooluse.service._turn_displays import (
    MAX_SHOWN_RESULT_CHARS,
    MAX_TOOL_EVENTS,
    TurnDisplay,
    TurnDisplayStore,
)
from tooluse.testing import FunctionModel, ResponseLike, tool_call
from tooluse.tools import tool


class _TurnId:
    """Equal to any turn id (32 hex digits)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and len(other) == 32


ANY_TURN_ID: Any = _TurnId()


async def ask(client: httpx.AsyncClient, question: str, conversation_id: str) -> list[Any]:
    response = await client.post(
        "/api/chat", json={"message": question, "conversation_id": conversation_id}
    )
    assert response.status_code == 200
    return parse_sse(response.text)


def said(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["text"]) for m in messages]


async def test_a_conversation_comes_back_with_its_turns_and_its_waiting_approval(
    tmp_path: Path,
) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        await ask(client, "What's the weather in Paris?", "c1")
        await ask(client, "Any refund rules?", "c1")
        paused = (await ask(client, "Cancel order A1001", "c1"))[-1][1]
        response = await client.get("/api/conversations/c1")
    assert response.status_code == 200
    conversation = response.json()
    assert conversation["conversation_id"] == "c1"
    assert conversation["memory_window"] == 20
    messages = conversation["messages"]
    assert said(messages[:4]) == [
        ("user", "What's the weather in Paris?"),
        ("assistant", "From live data."),
        ("user", "Any refund rules?"),
        ("assistant", "From the knowledge base."),
    ]
    assert all(m["paused_turn"] is None and m.get("tool_calls", []) == [] for m in messages[:4])
    # The paused turn's record: its question, and the account the assistant reads.
    question, account = messages[4:]
    held_call = {"id": "cancel-1", "name": "cancel_order", "arguments": '{"order_id": "A1001"}'}
    assert question == {
        "role": "user",
        "text": "Cancel order A1001",
        "paused_turn": ANY_TURN_ID,
        "events": [{"event": "tool_call", "data": held_call}],  # what its page showed
    }
    assert account["text"].startswith(PAUSED_TURN_NOTE)
    assert account["paused_turn"] == question["paused_turn"]
    # ... and its run, waiting, which stands for it on the page.
    (pending,) = conversation["pending_approvals"]
    assert pending["approval_id"] == paused["approval_id"]
    assert (pending["status"], pending["turn_id"]) == ("pending", question["paused_turn"])
    assert [c["name"] for c in pending["pending_tool_calls"]] == ["cancel_order"]
    assert pending["events"] == question["events"]


async def test_an_approved_run_comes_back_as_its_answered_turn(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        paused = (await ask(client, "Cancel order A1001", "c1"))[-1][1]
        decided = await client.post(
            f"/api/approvals/{paused['approval_id']}",
            json={"decisions": {"cancel-1": {"approve": True}}},
        )
        assert names(parse_sse(decided.text))[-1] == "done"
        conversation = (await client.get("/api/conversations/c1")).json()
    assert said(conversation["messages"]) == [
        ("user", "Cancel order A1001"),
        ("assistant", "From live data."),
    ]
    assert conversation["pending_approvals"] == []


async def test_a_withdrawn_approval_comes_back_as_the_account_of_what_did_not_run(
    tmp_path: Path,
) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        await ask(client, "Cancel order A1001", "c1")
        await ask(client, "Any refund rules?", "c1")
        conversation = (await client.get("/api/conversations/c1")).json()
    question, account, *later = conversation["messages"]
    assert question["text"] == "Cancel order A1001"
    assert account["text"].startswith(PAUSED_TURN_NOTE)
    assert 'Not run: cancel_order {"order_id": "A1001"}' in account["text"]
    assert said(later) == [("user", "Any refund rules?"), ("assistant", "From the knowledge base.")]
    assert conversation["pending_approvals"] == []


async def test_stored_tool_calls_come_back_in_the_shapes_of_the_stream(tmp_path: Path) -> None:
    # A memory that keeps tool traffic (a ChatClient whose memory advisor sits inside the
    # tool loop), written to the service's file.
    db = tmp_path / "s.db"
    call = ToolCall(id="w1", name="get_weather", arguments='{"city": "Paris"}')
    with SqliteChatMemoryRepository(db) as repository:
        MessageWindowChatMemory(repository=repository).add(
            "tools",
            [
                SystemMessage(text="Be brief."),
                UserMessage(text="Weather in Paris?"),
                AssistantMessage(text=None, tool_calls=(call,)),
                ToolResponseMessage(
                    responses=(ToolResponse(id="w1", name="get_weather", data='{"sky": "sun"}'),)
                ),
                AssistantMessage(text="Sunny."),
            ],
        )
    async with service(db, model=fake_llm()) as client:
        messages = (await client.get("/api/conversations/tools")).json()["messages"]
    assert messages == [  # the system message is for the model, not shown
        {"role": "user", "text": "Weather in Paris?", "paused_turn": None, "events": []},
        {
            "role": "assistant",
            "text": None,
            "tool_calls": [{"id": "w1", "name": "get_weather", "arguments": '{"city": "Paris"}'}],
            "paused_turn": None,
        },
        {
            "role": "tool",
            "results": [
                {
                    "id": "w1",
                    "name": "get_weather",
                    "result": '{"sky": "sun"}',
                    "is_error": False,
                    "images": [],
                }
            ],
            "paused_turn": None,
        },
        {"role": "assistant", "text": "Sunny.", "tool_calls": [], "paused_turn": None},
    ]


async def test_a_stored_result_s_images_come_back_as_data_urls(tmp_path: Path) -> None:
    store_screenshot_turn(tmp_path / "s.db", "screen")
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        messages = (await client.get("/api/conversations/screen")).json()["messages"]
    assert messages[2] == {
        "role": "tool",
        "results": [
            {
                "id": "s1",
                "name": "screenshot",
                "result": "the screen",
                "is_error": False,
                "images": [SCREEN_URL],
            }
        ],
        "paused_turn": None,
    }


async def test_an_id_with_a_slash_is_read_percent_encoded(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        await ask(client, "Any refund rules?", "team/a?b#c")
        response = await client.get("/api/conversations/team%2Fa%3Fb%23c")
    assert response.status_code == 200
    assert response.json()["conversation_id"] == "team/a?b#c"


async def test_an_id_with_a_control_character_is_refused_where_it_could_not_be_read_back(
    tmp_path: Path,
) -> None:
    # The URL route of GET /api/conversations/{id} matches no line break: a conversation
    # opened under "a\nb" could be written but never read back (a bare "Not Found").
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        chat = await client.post("/api/chat", json={"message": "Hi", "conversation_id": "a\nb"})
        read = await client.get("/api/conversations/a%0Ab")
        approvals = await client.get("/api/approvals", params={"conversation_id": "a\x1bb"})
    assert [r.status_code for r in (chat, read, approvals)] == [422] * 3
    refused = (
        "conversation id must not hold control characters (line breaks, tabs, escapes); "
        "it holds '\\n' at position 1"  # the id itself is not echoed
    )
    assert chat.json()["detail"] == read.json()["detail"] == refused
    assert "'\\x1b' at position 1" in approvals.json()["detail"]


async def test_an_unknown_conversation_is_a_404_that_says_so(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        await ask(client, "Any refund rules?", "c1")
        response = await client.get("/api/conversations/" + "c" * 200)
    assert response.status_code == 404
    assert response.json()["detail"] == (
        f"No conversation {'c' * 200!r} is stored: its memory holds no messages (none of its "
        "questions was answered, or it was cleared) and no run in it waits for approval"
    )


async def test_an_id_no_memory_can_store_is_a_422_that_says_why(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        nul = await client.get("/api/conversations/a%00b")
        blank = await client.get("/api/conversations/%20%20")
        too_long = await client.get("/api/conversations/" + "c" * 201)
        # The approvals of a conversation are looked up under the same rules.
        approvals_nul = await client.get("/api/approvals", params={"conversation_id": "a\0b"})
        approvals_too_long = await client.get("/api/approvals?conversation_id=" + "c" * 201)
    assert [r.status_code for r in (nul, blank, too_long)] == [422] * 3
    assert nul.json()["detail"] == (
        "conversation id must be text every repository can store; it holds a NUL character at "
        "position 1: 'a\\x00b'"
    )
    assert blank.json()["detail"] == "conversation id must not be blank"
    (error,) = too_long.json()["detail"]
    assert (error["loc"], error["msg"]) == (
        ["path", "conversation_id"],
        "String should have at most 200 characters",
    )
    assert approvals_nul.status_code == approvals_too_long.status_code == 422
    assert "NUL character" in approvals_nul.json()["detail"]
    assert approvals_too_long.json()["detail"][0]["loc"] == ["query", "conversation_id"]


async def test_an_api_key_guards_the_conversations(tmp_path: Path) -> None:
    async with service(tmp_path / "s.db", model=fake_llm(), api_key="s3cret") as client:
        right = {"Authorization": "Bearer s3cret"}
        await client.post(
            "/api/chat", json={"message": "Hi", "conversation_id": "c1"}, headers=right
        )
        refused = await client.get("/api/conversations/c1")
        shown = await client.get("/api/conversations/c1", headers=right)
    assert refused.status_code == 401
    assert said(shown.json()["messages"]) == [
        ("user", "Hi"),
        ("assistant", "From the knowledge base."),
    ]


SHOWN = {"tool_call", "tool_result", "route"}


def shown(events: list[Any]) -> list[dict[str, Any]]:
    """What a turn's stream showed besides its answer: its display events as the service
    keeps them (the sources of ``done`` as a ``sources`` event)."""
    kept = [{"event": name, "data": data} for name, data in events if name in SHOWN]
    kept += [
        {"event": "sources", "data": {"sources": data["sources"]}}
        for name, data in events
        if name == "done"
    ]
    return kept


async def test_a_reloaded_conversation_brings_back_each_turn_s_route_tool_trace_and_sources(
    tmp_path: Path,
) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        weather = await ask(client, "What's the weather in Paris?", "c1")
        refunds = await ask(client, "Any refund rules?", "c1")
        again = await ask(client, "What's the weather in Paris?", "c1")  # the same question
        messages = (await client.get("/api/conversations/c1")).json()["messages"]
    assert [m["events"] for m in messages if m["role"] == "user"] == [
        shown(weather),
        shown(refunds),
        shown(again),
    ]
    call, result, route, sources = messages[0]["events"]
    assert (call["event"], call["data"]["name"], result["event"]) == (
        "tool_call",
        "get_weather",
        "tool_result",
    )
    assert route == {"event": "route", "data": {"route": "tools", "fetched": 1}}
    assert sources == {"event": "sources", "data": {"sources": []}}
    knowledge_route, knowledge_sources = messages[2]["events"]
    assert knowledge_route["data"]["route"] == "knowledge"
    assert knowledge_sources["data"]["sources"]  # the documents the answer was given
    assert "events" not in messages[1]  # an answer's text is in memory


async def test_an_approved_turn_comes_back_with_its_trace_before_and_after_the_pause(
    tmp_path: Path,
) -> None:
    async with service(tmp_path / "s.db", model=fake_llm()) as client:
        asked = await ask(client, "Cancel order A1001", "c1")
        paused = asked[-1][1]
        decided = await client.post(
            f"/api/approvals/{paused['approval_id']}",
            json={"decisions": {"cancel-1": {"approve": True}}},
        )
        conversation = (await client.get("/api/conversations/c1")).json()
    question = conversation["messages"][0]
    assert question["events"] == shown(asked) + shown(parse_sse(decided.text))
    assert [e["event"] for e in question["events"]] == [
        "tool_call",
        "tool_result",
        "route",
        "sources",
    ]


async def test_an_approved_turn_that_failed_comes_back_with_the_calls_that_ran(
    tmp_path: Path,
) -> None:
    answering: list[bool] = []  # the answer stage fails once this holds True

    def failing_answer(prompt: Prompt) -> ResponseLike:
        if answering and not prompt.options.tool_callbacks:
            raise ConnectionError("the model went away")
        return respond(prompt)

    async with service(tmp_path / "s.db", model=FunctionModel(failing_answer)) as client:
        paused = (await ask(client, "Cancel order A1001", "c1"))[-1][1]
        answering.append(True)
        decided = await client.post(
            f"/api/approvals/{paused['approval_id']}",
            json={"decisions": {"cancel-1": {"approve": True}}},
        )
        assert names(parse_sse(decided.text))[-1] == "error"
        question, account = (await client.get("/api/conversations/c1")).json()["messages"]
    assert account["text"].startswith(STOPPED_TURN_NOTE)  # memory's record of the turn
    # The answer failed after the route: no sources.
    call, result, route = question["events"]
    assert (call["event"], result["event"], route["event"]) == ("tool_call", "tool_result", "route")
    assert result["data"]["name"] == "cancel_order" and not result["data"]["is_error"]


async def test_a_screenshot_comes_back_with_its_image(tmp_path: Path) -> None:
    model = FunctionModel(screenshotting)
    async with service(tmp_path / "s.db", model=model, tools=[screenshot]) as client:
        await ask(client, "What is on screen?", "c1")
        messages = (await client.get("/api/conversations/c1")).json()["messages"]
    result = next(e["data"] for e in messages[0]["events"] if e["event"] == "tool_result")
    assert (result["name"], result["images"]) == ("screenshot", [SCREEN_URL])


async def test_a_turn_s_trace_is_kept_within_bounds(tmp_path: Path) -> None:
    def chatty(prompt: Prompt) -> ResponseLike:
        """Calls shout and whisper 30 times each, in one round (a tool is called 40 times
        a turn at most), then answers."""
        if not prompt.options.tool_callbacks:
            return "Done."
        if isinstance(prompt.messages[-1], ToolResponseMessage):
            return ""
        return [
            tool_call(name, {}, id=f"{name}{n}") for name in ("shout", "whisper") for n in range(30)
        ]

    @tool(read_only=True)
    def shout() -> str:
        """A long text (a test tool)."""
        return "a" * (MAX_SHOWN_RESULT_CHARS + 10)

    @tool(read_only=True)
    def whisper() -> str:
        """A short text (a test tool)."""
        return "a"

    async with service(
        tmp_path / "s.db", model=FunctionModel(chatty), tools=[shout, whisper]
    ) as client:
        await ask(client, "Shout", "c1")
        (question, _) = (await client.get("/api/conversations/c1")).json()["messages"]
    *tool_events, route, sources, omitted = question["events"]
    # 60 calls, then the first 40 results.
    assert len(tool_events) == MAX_TOOL_EVENTS == 100
    assert [e["event"] for e in tool_events[59:61]] == ["tool_call", "tool_result"]
    assert omitted["data"]["name"] == "20 more tool calls and results"
    assert omitted["data"]["result"] == "not kept for display: a turn keeps its first 100"
    assert tool_events[60]["data"]["result"] == (
        '"' + "a" * (MAX_SHOWN_RESULT_CHARS - 1) + "… (12 more characters, not kept for display)"
    )
    assert (route["event"], sources["event"]) == ("route", "sources")


def test_a_turn_s_record_is_deleted_after_its_retention(store_location: str) -> None:
    display = TurnDisplay()
    display.add(RouteEvent("knowledge", 0))
    with TurnDisplayStore(store_location, retention=3600) as store:
        store.save("c1", "Any refund rules?", None, display)
        assert [r.question for r in store.recent("c1", 10)] == ["Any refund rules?"]
    with TurnDisplayStore(store_location, retention=1e-6) as store:  # deletes on opening
        assert store.recent("c1", 10) == []
    with pytest.raises(ValueError, match=r"retention must be > 0 seconds, got 0"):
        TurnDisplayStore(store_location, retention=0)


def test_a_paused_turn_s_record_gathers_its_resumed_run_s_events(store_location: str) -> None:
    paused, resumed = TurnDisplay(), TurnDisplay()
    paused.add(RouteEvent("tools", 0))
    resumed.add(RouteEvent("knowledge", 0))
    with TurnDisplayStore(store_location) as store:
        store.save("c1", "Cancel A1", "t1", paused)
        store.save("c1", "Next?", None, TurnDisplay())
        store.save("c1", "Cancel A1", "t1", resumed)
        first, second = store.recent("c1", 10)
        assert (first.turn_id, second.question) == ("t1", "Next?")  # the order turns began
        assert [event["data"]["route"] for event in first.events] == ["tools", "knowledge"]
        assert store.recent("c2", 10) == []
