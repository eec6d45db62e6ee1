"""Images in tool results: a tool's ``Image`` reaches the ``ToolResponse`` as an ``ImagePart``
(never as base64 text), types no provider takes become a note, too many image bytes an
error result, and the structured form survives JSON and the test models."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pydantic import ValidationError

from _calling_tools import prompt_with, tool_calls_response
from tooluse import ChatClient, ToolCallingManager, ToolResponse, ToolResponseMessage
from tooluse.calling import DEFAULT_MAX_IMAGE_BYTES
from tooluse.messages import (
    ImagePart,
    UserMessage,
    messages_from_json,
    messages_to_json,
)
from tooluse.testing import ScriptedModel, TestModel, tool_call
from tooluse.tools import FunctionToolCallback, Image, ToolResult, tool

PNG = Image(b"\x89PNG\r\n\x1a\n a screenshot", "image/png")
PNG_PART = ImagePart("image/png", base64.b64encode(PNG.data).decode())


@tool
def screenshot() -> Image:
    """The page as it looks."""
    return PNG


async def run_one(callback: Any, manager: ToolCallingManager | None = None) -> ToolResponse:
    name = callback.definition.name
    result = await (manager or ToolCallingManager()).aexecute_tool_calls(
        prompt_with([callback]), tool_calls_response((name, "{}"))
    )
    message = result.conversation_history[-1]
    assert isinstance(message, ToolResponseMessage)
    return message.responses[0]


async def test_a_returned_image_becomes_an_image_part_not_text() -> None:
    response = await run_one(FunctionToolCallback(screenshot))
    assert response == ToolResponse("c0", "screenshot", "", images=[PNG_PART])


async def test_a_function_may_return_its_own_text_beside_its_images() -> None:
    @tool
    def capture() -> ToolResult:
        """Take a screenshot."""
        return ToolResult("Took a screenshot of the home page", [PNG])

    response = await run_one(FunctionToolCallback(capture))
    assert response == ToolResponse(
        "c0", "capture", "Took a screenshot of the home page", images=[PNG_PART]
    )


def test_a_return_direct_image_reaches_the_caller() -> None:
    @tool(return_direct=True)
    def chart() -> ToolResult:
        """Draw the chart."""
        return ToolResult("Sales by month", [PNG])

    model = ScriptedModel([tool_call("chart", {})])
    response = ChatClient(model, tools=[chart]).prompt("chart please").call().chat_response()
    (generation,) = response.generations
    assert generation.message.text == "Sales by month"
    assert generation.metadata["images"] == (PNG_PART,)
    assert generation.finish_reason == "returnDirect"


async def test_images_of_other_types_are_named_in_a_note_and_left_out() -> None:
    tiff = Image(b"II*\x00", "image/tiff")
    wav = Image(b"RIFF", "audio/wav")

    def page() -> dict[str, Any]:
        return {"title": "Home", "shots": [PNG, tiff, wav, Image(b"", "image/png")]}

    response = await run_one(FunctionToolCallback(page))
    text, *notes = response.data.split("\n")
    assert json.loads(text) == {
        "title": "Home",
        "shots": [
            {"image": 1, "mimeType": "image/png"},
            {"image": 2, "mimeType": "image/tiff"},
            {"image": 3, "mimeType": "audio/wav"},
            {"image": 4, "mimeType": "image/png"},
        ],
    }
    shown = "models are shown only image/gif, image/jpeg, image/png, image/webp"
    assert notes == [
        f"[image 2 (image/tiff) is not shown: {shown}]",
        f"[image 3 (audio/wav) is not shown: {shown}]",
        "[image 4 (image/png) is not shown: it is empty]",
    ]
    assert response.images == (PNG_PART,)
    assert not response.is_error


async def test_images_over_the_limit_are_an_error_result() -> None:
    size = len(PNG.data)
    exact = await run_one(
        FunctionToolCallback(screenshot), ToolCallingManager(max_image_bytes=size)
    )
    assert exact.images == (PNG_PART,)

    def two() -> list[Image]:
        return [PNG, PNG]

    over = await run_one(FunctionToolCallback(two), ToolCallingManager(max_image_bytes=size))
    assert over.is_error and over.images == ()
    assert over.data == (
        f"Tool 'two' returned 2 image(s) of {2 * size} bytes in all; the limit is {size} "
        "bytes of images per result. Ask the tool for fewer or smaller images if it can give "
        "them."
    )
    big = Image(bytes(DEFAULT_MAX_IMAGE_BYTES + 1), "image/png")
    refused = await run_one(FunctionToolCallback(lambda: big, name="huge"))
    assert refused.is_error and "the limit is 3932160 bytes" in refused.data
    unlimited = await run_one(
        FunctionToolCallback(lambda: big, name="huge"), ToolCallingManager(max_image_bytes=None)
    )
    assert len(unlimited.images) == 1


def test_the_image_limit_must_be_a_positive_integer_or_none() -> None:
    with pytest.raises(ValueError, match="max_image_bytes must be a positive integer or None"):
        ToolCallingManager(max_image_bytes=0)


async def test_a_result_converter_and_a_callback_may_return_a_tool_result() -> None:
    def caption(value: str) -> ToolResult:
        return ToolResult(f"caption: {value}", [PNG])

    @tool(result_converter=caption)
    def describe() -> str:
        """A captioned picture."""
        return "home page"

    response = await run_one(FunctionToolCallback(describe))
    assert (response.data, response.images) == ("caption: home page", (PNG_PART,))


def test_image_parts_take_only_the_types_models_are_shown_and_round_trip_as_json() -> None:
    with pytest.raises(ValidationError, match="'image/png', 'image/jpeg', 'image/gif'"):
        ImagePart("image/tiff", "SUkqAA==")
    with pytest.raises(ValidationError, match="at least 1 character"):
        ImagePart("image/png", "")
    assert PNG_PART.data_url() == f"data:image/png;base64,{PNG_PART.data}"
    # A screenshot's base64 stays out of logs and test diffs.
    assert repr(ImagePart("image/png", "iVBORw==")) == (
        "ImagePart(mime_type='image/png', data='<8 base64 characters>')"
    )
    messages = [
        UserMessage("look"),
        ToolResponseMessage([ToolResponse("c1", "screenshot", "", images=[PNG_PART])]),
    ]
    stored = messages_to_json(messages)
    assert messages_from_json(stored) == messages
    # Conversations stored before images existed still load.
    old = '[{"role": "tool", "responses": [{"id": "c1", "name": "t", "data": "x"}]}]'
    assert messages_from_json(old) == [ToolResponseMessage([ToolResponse("c1", "t", "x")])]


async def test_the_test_models_run_a_loop_with_an_image_tool() -> None:
    scripted = ScriptedModel([tool_call("screenshot"), "It shows the home page."])
    answer = await ChatClient(scripted, tools=[screenshot]).prompt("What is on screen?").acall()
    assert answer.content() == "It shows the home page."
    results = scripted.requests[1].messages[-1]
    assert isinstance(results, ToolResponseMessage)
    assert results.responses[0].images == (PNG_PART,)

    # TestModel's summary names the images it was shown, after the text if there is any.
    @tool
    def gallery() -> dict[str, Any]:
        """Captioned pictures."""
        return {"caption": "home", "shots": [PNG, Image(b"GIF89a", "image/gif")]}

    model = TestModel(call_tools=["screenshot", "gallery"])
    client = ChatClient(model, tools=[screenshot, gallery])
    answer = await client.prompt("What is on screen?").acall()
    assert json.loads(answer.content()) == {
        "screenshot": "[1 image: image/png]",
        "gallery": (
            '{"caption":"home","shots":[{"image":1,"mimeType":"image/png"},'
            '{"image":2,"mimeType":"image/gif"}]}\n[2 images: image/png, image/gif]'
        ),
    }
