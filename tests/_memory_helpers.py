"""Shared helpers of the memory tests: message builders, a well-formedness check, and the
writer function that concurrent processes run (importable by a child process)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from tooluse.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
from tooluse.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)


def user(text: str) -> UserMessage:
    return UserMessage(text=text)


def answer(text: str) -> AssistantMessage:
    return AssistantMessage(text=text)


def system(text: str) -> SystemMessage:
    return SystemMessage(text=text)


def calls(*ids: str) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=tuple(ToolCall(id=i, name="lookup", arguments='{"q": 1}') for i in ids)
    )


def results(*ids: str) -> ToolResponseMessage:
    return ToolResponseMessage(
        responses=tuple(ToolResponse(id=i, name="lookup", data=f"result {i}") for i in ids)
    )


def tool_pairing_problems(messages: Sequence[Message]) -> list[str]:
    """What a provider would reject: results without their call right before them, and
    calls not answered by the tool messages right after them (written independently of
    ``repair_tool_pairs`` so it can check it)."""
    problems: list[str] = []
    open_calls: set[str] = set()
    in_group = False
    for index, message in enumerate(messages):
        if isinstance(message, ToolResponseMessage):
            for response in message.responses:
                if not in_group or response.id not in open_calls:
                    problems.append(f"orphan result {response.id} at {index}")
                open_calls.discard(response.id)
            continue
        if open_calls:
            problems.append(f"unanswered calls {sorted(open_calls)} before {index}")
        open_calls = set()
        in_group = isinstance(message, AssistantMessage) and bool(message.tool_calls)
        if in_group:
            assert isinstance(message, AssistantMessage)
            open_calls = {call.id for call in message.tool_calls}
    if open_calls:
        problems.append(f"unanswered calls {sorted(open_calls)} at the end")
    return problems


def write_messages(path: str, conversation_id: str, writer: int, count: int) -> None:
    """Add ``count`` user messages, one ``add`` each, through a repository of its own."""
    repository = SqliteChatMemoryRepository(path)
    try:
        memory = MessageWindowChatMemory(max_messages=100_000, repository=repository)
        for number in range(count):
            memory.add(conversation_id, user(f"writer {writer} message {number}"))
    finally:
        repository.close()


def assert_no_message_lost(stored: Sequence[Message], writers: int, per_writer: int) -> None:
    """Every message the writers ``0..writers-1`` added (``write_messages``' texts) is
    stored, once."""
    expected = {f"writer {w} message {n}" for w in range(writers) for n in range(per_writer)}
    assert {m.text for m in stored if isinstance(m, UserMessage)} == expected
    assert len(stored) == len(expected)


def write_in_threads_when_told(
    path: str, conversation_id: str, writers: Sequence[int], count: int, go_file: Path
) -> None:
    """Run one writer thread per number in ``writers``, all starting once ``go_file`` exists
    (so that writers in several processes really overlap)."""
    while not go_file.exists():
        time.sleep(0.005)
    failures: list[BaseException] = []

    def write(writer: int) -> None:
        try:
            write_messages(path, conversation_id, writer, count)
        except BaseException as error:
            failures.append(error)
            raise

    threads = [threading.Thread(target=write, args=(writer,)) for writer in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:  # a writer thread's exception must fail the process, not just print
        raise SystemExit(f"{len(failures)} writer(s) failed: {failures[0]!r}")


if __name__ == "__main__":  # python _memory_helpers.py PATH CONVERSATION FIRST LAST COUNT GO
    database, conversation, first, last, per_writer, go = sys.argv[1:]
    print("ready", flush=True)
    write_in_threads_when_told(
        database, conversation, range(int(first), int(last)), int(per_writer), Path(go)
    )
