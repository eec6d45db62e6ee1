"""``tooluse demo``: an offline run of the tool loop.

``TestModel`` (no network, no API key) calls the sample tools with arguments generated from
their schemas; the tool calls, their results and the answer are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
from typing import Annotated, Literal

from tooluse.client import ChatClient
from tooluse.messages import AssistantMessage, Message, ToolResponseMessage
from tooluse.testing import TestModel
from tooluse.tools import ToolParam, tool

_FORECASTS = {"paris": 18, "london": 14, "tokyo": 22}


@tool
def get_weather(
    city: Annotated[str, ToolParam(description="City name, e.g. Paris")],
    unit: Literal["celsius", "fahrenheit"] = "celsius",
) -> dict[str, object]:
    """Current temperature in a city (sample data)."""
    celsius = _FORECASTS.get(city.lower(), 20)
    value = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32)
    return {"city": city, "temperature": value, "unit": unit}


@tool
def current_time(utc_offset_hours: Annotated[int, ToolParam(description="e.g. 2")] = 0) -> str:
    """The current time at a UTC offset, ISO 8601."""
    zone = datetime.timezone(datetime.timedelta(hours=utc_offset_hours))
    return datetime.datetime.now(zone).isoformat(timespec="seconds")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "question",
        nargs="?",
        default="What is the weather, and what time is it?",
        help="the question to ask",
    )
    parser.add_argument("--stream", action="store_true", help="stream the answer")


def trace_lines(history: tuple[Message, ...]) -> list[str]:
    """One line per tool call and per tool result, in conversation order."""
    lines = []
    for message in history:
        if isinstance(message, AssistantMessage):
            lines += [f"-> {call.name}({call.arguments})" for call in message.tool_calls]
        elif isinstance(message, ToolResponseMessage):
            lines += [
                f"<- {response.name}: {response.data}" + (" (error)" if response.is_error else "")
                for response in message.responses
            ]
    return lines


async def _run(question: str, stream: bool) -> int:
    client = ChatClient(
        TestModel(), system="Use the tools for live data.", tools=[get_weather, current_time]
    )
    print("tooluse offline demo: TestModel (no model configured, nothing leaves this machine)")
    print(f"question: {question}")
    if stream:
        response = client.prompt(question).stream()
        answer = "".join([text async for text in response.content()])
        history = response.conversation_history
    else:
        result = await client.prompt(question).acall()
        history = result.conversation_history
        answer = result.content()
    for line in trace_lines(history):
        print(line)
    print(f"answer: {answer}")
    return 0


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args.question, args.stream))
