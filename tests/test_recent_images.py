"""``RecentImagesAdvisor``: over a loop of screenshot rounds the model is shown only the most
recent screenshots, the older results keep their ids and get a note, images go in chunks so
the prompt prefix repeats between removals, and neither memory nor the loop's history lose an
image."""

from __future__ import annotations

import base64
from collections.abc import Sequence

import pytest

from provider_models import model_maker
from provider_payloads import (
    anthropic_message,
    openai_call,
    openai_completion,
    text_block,
    tool_use_block,
)
from provider_server import ProviderServer, Reply, shared_server
from tooluse import ChatClient, Prompt
from tooluse.advisors import (
    HIGHEST_PRECEDENCE,
    OMITTED_IMAGES_NOTE,
    RecentImagesAdvisor,
    omit_older_images,
)
from tooluse.memory import (
    CONVERSATION_ID,
    InMemoryChatMemoryRepository,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
)
from tooluse.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.models import AnthropicChatModel, OpenAIChatModel
from tooluse.testing import ScriptedModel, tool_call
from tooluse.tools import Image, tool

ONE_NOTE = OMITTED_IMAGES_NOTE.format(images="image")
taken: list[str] = []  # the screenshots taken, "shot 1" first


@tool(read_only=True)
def screenshot() -> Image:
    """The screen as it looks now."""
    taken.append(f"shot {len(taken) + 1}")
    return Image(taken[-1].encode(), "image/png")


@pytest.fixture(autouse=True)
def _no_screenshots_yet() -> None:
    taken.clear()


def screenshot_rounds(rounds: int) -> ScriptedModel:
    """A model that takes ``rounds`` screenshots, one per round (call ids ``s1``...), then
    answers."""
    return ScriptedModel(
        [*(tool_call("screenshot", id=f"s{n}") for n in range(1, 1 + rounds)), "Done."]
    )


def tool_results(messages: Sequence[Message]) -> list[ToolResponse]:
    return [r for m in messages if isinstance(m, ToolResponseMessage) for r in m.responses]


def shown(prompt: Prompt) -> list[str]:
    """Per tool result of ``prompt``, in order: the screenshot it shows, or its text."""
    return [
        base64.b64decode(r.images[0].data).decode() if r.images else r.data
        for r in tool_results(prompt.messages)
    ]


def image_counts(model: ScriptedModel) -> list[int]:
    return [sum(1 for item in shown(p) if item.startswith("shot")) for p in model.requests]


def assert_pairs_intact(messages: Sequence[Message]) -> None:
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            results = messages[index + 1]
            assert isinstance(results, ToolResponseMessage)
            assert [r.id for r in results.responses] == [c.id for c in message.tool_calls]


def test_each_request_shows_only_the_most_recent_screenshots() -> None:
    model = screenshot_rounds(5)
    client = ChatClient(
        model, tools=[screenshot], advisors=[RecentImagesAdvisor(2, removal_chunk=1)]
    )

    response = client.prompt("Log in.").call()

    assert response.content() == "Done."
    assert shown(model.requests[5]) == [ONE_NOTE, ONE_NOTE, ONE_NOTE, "shot 4", "shot 5"]
    assert image_counts(model) == [0, 1, 2, 2, 2, 2]
    for prompt in model.requests:
        assert_pairs_intact(prompt.messages)
    # The loop's history, which the caller and an outer memory get, keeps every screenshot.
    history = response.conversation_history
    assert [(r.data, len(r.images)) for r in tool_results(history)] == [("", 1)] * 5


def test_without_the_advisor_every_request_resends_every_screenshot() -> None:
    model = screenshot_rounds(5)
    ChatClient(model, tools=[screenshot]).prompt("Log in.").call()

    assert image_counts(model) == [0, 1, 2, 3, 4, 5]


async def test_a_stream_is_trimmed_the_same_way() -> None:
    model = screenshot_rounds(4)
    client = ChatClient(
        model, tools=[screenshot], advisors=[RecentImagesAdvisor(1, removal_chunk=1)]
    )

    text = "".join([chunk async for chunk in client.prompt("Log in.").stream().content()])

    assert text == "Done."
    assert shown(model.requests[4]) == [ONE_NOTE, ONE_NOTE, ONE_NOTE, "shot 4"]


def test_images_go_in_chunks_so_the_prefix_repeats_between_removals() -> None:
    model = screenshot_rounds(8)
    client = ChatClient(
        model, tools=[screenshot], advisors=[RecentImagesAdvisor(2, removal_chunk=3)]
    )

    client.prompt("Log in.").call()

    # Three omitted at a time once five results have images: between 2 and 4 are shown.
    assert image_counts(model) == [0, 1, 2, 3, 4, 2, 3, 4, 2]
    assert shown(model.requests[8]) == [ONE_NOTE] * 6 + ["shot 7", "shot 8"]
    # A request repeats the one before it (a cache hit on the provider's prefix) except when
    # a chunk was removed.
    repeats = [
        model.requests[n + 1].messages[: len(model.requests[n].messages)]
        == model.requests[n].messages
        for n in range(8)
    ]
    assert repeats == [True, True, True, True, False, True, True, False]


def test_the_default_chunk_is_keep() -> None:
    model = screenshot_rounds(6)
    ChatClient(model, tools=[screenshot], advisors=[RecentImagesAdvisor(2)]).prompt("Go.").call()

    assert image_counts(model) == [0, 1, 2, 3, 2, 3, 2]


def test_memory_keeps_every_screenshot_and_replayed_ones_are_trimmed() -> None:
    memory = MessageWindowChatMemory(max_messages=100)
    model = ScriptedModel(
        [
            tool_call("screenshot", id="s1"),
            tool_call("screenshot", id="s2"),
            "Logged in.",
            tool_call("screenshot", id="s3"),
            "Logged out.",
        ]
    )
    client = ChatClient(
        model,
        tools=[screenshot],
        advisors=[
            MessageChatMemoryAdvisor(memory, inside_tool_loop=True),
            RecentImagesAdvisor(1, removal_chunk=1),
        ],
    )

    client.prompt("Log in.").context({CONVERSATION_ID: "c1"}).call()
    client.prompt("Log out.").context({CONVERSATION_ID: "c1"}).call()

    # The second turn's last request: the replayed screenshots are omitted, its own is shown.
    assert shown(model.requests[4]) == [ONE_NOTE, ONE_NOTE, "shot 3"]
    assert_pairs_intact(model.requests[4].messages)
    assert [len(r.images) for r in tool_results(memory.get("c1"))] == [1, 1, 1]


def test_memory_is_trimmed_only_when_asked_through_its_repository() -> None:
    repository = InMemoryChatMemoryRepository()
    memory = MessageWindowChatMemory(max_messages=100, repository=repository)
    model = screenshot_rounds(3)
    client = ChatClient(
        model,
        tools=[screenshot],
        advisors=[MessageChatMemoryAdvisor(memory, inside_tool_loop=True)],
    )
    client.prompt("Log in.").context({CONVERSATION_ID: "c1"}).call()
    assert [len(r.images) for r in tool_results(memory.get("c1"))] == [1, 1, 1]

    repository.update("c1", lambda stored: omit_older_images(stored, keep=1, removal_chunk=1))

    stored = memory.get("c1")
    assert [(r.data, len(r.images)) for r in tool_results(stored)] == [
        (ONE_NOTE, 0),
        (ONE_NOTE, 0),
        ("", 1),
    ]
    assert_pairs_intact(stored)


def test_a_result_keeps_its_text_and_loses_all_its_images_at_once() -> None:
    images = (ImagePart("image/png", "aaaa"), ImagePart("image/jpeg", "bbbb"))
    older = ToolResponseMessage(
        [ToolResponse("a", "pages", '[{"image": 1}, {"image": 2}]', images=images)]
    )
    newer = ToolResponseMessage([ToolResponse("b", "pages", "", images=images[:1])])
    text_only = ToolResponseMessage([ToolResponse("t", "search", "two pages")])
    messages = [
        UserMessage("Compare."),
        AssistantMessage(tool_calls=[tool_call("search", id="t")]),
        text_only,
        AssistantMessage(tool_calls=[tool_call("pages", id="a")]),
        older,
        AssistantMessage(tool_calls=[tool_call("pages", id="b")]),
        newer,
    ]

    result = omit_older_images(messages, keep=1, removal_chunk=1)

    (trimmed,) = result[4].responses  # type: ignore[union-attr]
    assert trimmed == ToolResponse(
        "a",
        "pages",
        '[{"image": 1}, {"image": 2}]\n' + OMITTED_IMAGES_NOTE.format(images="2 images"),
    )
    # The messages it leaves as they were are the same objects: nothing else is copied.
    assert [new is old for new, old in zip(result, messages, strict=True)] == [
        True,
        True,
        True,
        True,
        False,
        True,
        True,
    ]
    assert omit_older_images(messages, keep=2)[4] is older


KEEP_MUST_BE_AN_INT = (
    "keep must be an int (how many of the most recent image-carrying tool results keep their "
    "images)"
)


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"keep": 0}, ValueError, "keep must be 1 or more, got 0: with none kept the model"),
        (
            {"keep": True},
            TypeError,
            f"{KEEP_MUST_BE_AN_INT}, got bool: True",
        ),
        (
            {"keep": "3"},
            TypeError,
            f"{KEEP_MUST_BE_AN_INT}, got str: '3'",
        ),
        (
            {"keep": 2, "removal_chunk": 0},
            ValueError,
            "removal_chunk must be 1 or more (1: omit each image as soon as it is no longer "
            "among the 2 most recent), got 0",
        ),
        (
            {"keep": 2, "removal_chunk": 2.0},
            TypeError,
            "removal_chunk must be an int or None, got float: 2.0",
        ),
    ],
)
def test_bad_settings_are_refused(
    settings: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as advisor_error:
        RecentImagesAdvisor(**settings)  # type: ignore[arg-type]
    with pytest.raises(error) as function_error:
        omit_older_images([], **settings)  # type: ignore[arg-type]
    assert str(advisor_error.value).startswith(message)
    assert str(function_error.value) == str(advisor_error.value)


def test_an_advisor_outside_the_loop_is_refused() -> None:
    outside = RecentImagesAdvisor(2, order=HIGHEST_PRECEDENCE + 100)
    client = ChatClient(screenshot_rounds(1), tools=[screenshot], advisors=[outside])

    with pytest.raises(ValueError) as error:
        client.prompt("Go.").call()

    assert str(error.value) == (
        "RecentImagesAdvisor (order -2147483548) must be inside Tool Calling Advisor (order "
        "-2147483348), which runs the tool loop, whose screenshots would never be trimmed: give "
        "it a higher order, e.g. the default RecentImagesAdvisor.DEFAULT_ORDER (-2147483148)"
    )


def test_an_advisor_outside_a_memory_in_the_loop_is_refused() -> None:
    memory = MessageChatMemoryAdvisor(MessageWindowChatMemory(), inside_tool_loop=True)
    trimmer = RecentImagesAdvisor(2, order=HIGHEST_PRECEDENCE + 350)
    client = ChatClient(screenshot_rounds(1), tools=[screenshot], advisors=[memory, trimmer])

    with pytest.raises(
        ValueError,
        match=r"must be inside MessageChatMemoryAdvisor \(order -2147483248\), which replays",
    ):
        client.prompt("Go.").context({CONVERSATION_ID: "c1"}).call()


# -- on the wire ---------------------------------------------------------------------------------


@pytest.fixture
def server() -> ProviderServer:
    return shared_server()


def _wire_image(shot: int) -> dict[str, object]:
    data = base64.b64encode(f"shot {shot}".encode()).decode()
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


async def test_anthropic_gets_the_older_results_as_text_and_the_latest_as_an_image_block(
    server: ProviderServer,
) -> None:
    server.expect(
        *(
            Reply.json(
                anthropic_message(
                    tool_use_block(f"toolu_{n}", "screenshot", {}), stop_reason="tool_use"
                )
            )
            for n in (1, 2, 3)
        ),
        Reply.json(anthropic_message(text_block("Done."))),
    )
    async with model_maker(
        AnthropicChatModel, "claude-test", base_url=server.url, api_key="k"
    ) as make:
        client = ChatClient(
            make(), tools=[screenshot], advisors=[RecentImagesAdvisor(1, removal_chunk=1)]
        )
        assert (await client.prompt("Log in.").acall()).content() == "Done."

    results = [
        block
        for message in server.requests[3].body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    assert results == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": ONE_NOTE},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": ONE_NOTE},
        {"type": "tool_result", "tool_use_id": "toolu_3", "content": [_wire_image(3)]},
    ]


async def test_openai_gets_one_image_message_for_the_latest_screenshot_only(
    server: ProviderServer,
) -> None:
    server.expect(
        *(
            Reply.json(
                openai_completion(
                    None, [openai_call(f"call_{n}", "screenshot", "{}")], finish_reason="tool_calls"
                )
            )
            for n in (1, 2, 3)
        ),
        Reply.json(openai_completion("Done.")),
    )
    async with model_maker(
        OpenAIChatModel, "gpt-test", base_url=f"{server.url}/v1", api_key="k"
    ) as make:
        client = ChatClient(
            make(), tools=[screenshot], advisors=[RecentImagesAdvisor(1, removal_chunk=1)]
        )
        assert (await client.prompt("Log in.").acall()).content() == "Done."

    wire = server.requests[3].body["messages"]
    tools = [(m["tool_call_id"], m["content"]) for m in wire if m["role"] == "tool"]
    images = [m["content"] for m in wire if m["role"] == "user"][1:]  # after the question
    assert [call_id for call_id, _ in tools] == ["call_1", "call_2", "call_3"]
    assert tools[0][1] == tools[1][1] == ONE_NOTE
    assert len(images) == 1 and wire[-1]["content"] == images[0]
    assert [part["type"] for part in images[0]] == ["text", "image_url"]
    assert (
        images[0][1]["image_url"]["url"]
        == "data:image/png;base64," + base64.b64encode(b"shot 3").decode()
    )
