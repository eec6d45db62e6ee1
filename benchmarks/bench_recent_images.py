"""What ``RecentImagesAdvisor`` saves over a loop that takes a screenshot every round, with
and without a provider's prompt cache.

    .venv/bin/python benchmarks/bench_recent_images.py --rounds 30

Per setting: the images sent over all requests, the most in one request, how many requests
changed a message of the request before them (a prompt-cache miss from there on), and the
images billed at Anthropic's cache prices (a read 0.1x, a write 1.25x) with a cache breakpoint
at the end of each request. Counted in images, so the figures hold for any screenshot size.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from tooluse import ChatClient, ToolCallingManager
from tooluse.advisors import Advisor, RecentImagesAdvisor, ToolCallingAdvisor
from tooluse.messages import Message, ToolResponseMessage
from tooluse.testing import ScriptedModel, tool_call
from tooluse.tools import Image, tool

CACHE_READ, CACHE_WRITE = 0.1, 1.25


@tool
def screenshot() -> Image:
    """The screen as it looks now."""
    return Image(b"\x89PNG" + bytes(100_000), "image/png")


def images(messages: Sequence[Message]) -> int:
    return sum(
        len(r.images) for m in messages if isinstance(m, ToolResponseMessage) for r in m.responses
    )


def run(rounds: int, advisors: list[Advisor]) -> tuple[int, int, int, float]:
    model = ScriptedModel([*(tool_call("screenshot") for _ in range(rounds)), "Done."])
    unlimited = ToolCallingAdvisor(
        tool_calling_manager=ToolCallingManager(max_calls_per_tool=None, max_total_tool_calls=None)
    )
    client = ChatClient(model, tools=[screenshot], advisors=[unlimited, *advisors])
    client.prompt("Log in.").call()
    sent = [images(prompt.messages) for prompt in model.requests]
    billed, changes = 0.0, 0
    previous: tuple[Message, ...] = ()
    for prompt in model.requests:
        messages = prompt.messages
        shared = 0
        while shared < min(len(previous), len(messages)) and previous[shared] == messages[shared]:
            shared += 1
        changes += shared < len(previous)
        read = images(messages[:shared])
        billed += CACHE_READ * read + CACHE_WRITE * (images(messages) - read)
        previous = messages
    return sum(sent), max(sent), changes, billed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--keep", type=int, default=3)
    arguments = parser.parse_args()
    keep = arguments.keep
    settings: list[tuple[str, list[Advisor]]] = [
        ("no trimming", []),
        (f"keep={keep}, removal_chunk=1", [RecentImagesAdvisor(keep, removal_chunk=1)]),
        (f"keep={keep} (removal_chunk={keep})", [RecentImagesAdvisor(keep)]),
        (f"keep={keep}, removal_chunk=10", [RecentImagesAdvisor(keep, removal_chunk=10)]),
    ]
    print(
        f"| {arguments.rounds} rounds | images sent | most per request | prefix changes | billed |"
    )
    for label, advisors in settings:
        total, most, changes, billed = run(arguments.rounds, advisors)
        print(f"| {label} | {total} | {most} | {changes} | {billed:.1f} |")


if __name__ == "__main__":
    main()
