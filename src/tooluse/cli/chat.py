"""``tooluse chat``: the QA pipeline of ``tooluse serve`` in a terminal."""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TextIO

from tooluse.calling import Approve, Decision, Deny
from tooluse.cli._options import (
    OptionError,
    add_service_arguments,
    close_model,
    configure_logging,
    open_service,
    start_service,
)
from tooluse.qa import (
    ApprovalRequiredEvent,
    DeltaEvent,
    DoneEvent,
    QaEvent,
    RouteEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from tooluse.service._failures import described_failure
from tooluse.service._service import QaService

__all__ = ["add_arguments", "run"]

_PREVIEW = 300  # characters of a tool result shown

# What a shell reports for a command that SIGINT stopped (128 + 2): a script running
# `tooluse chat "question"` then knows that it was interrupted, not answered.
_INTERRUPTED = 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Chat with the QA pipeline of `tooluse serve` in the terminal (its model, tools and "
        "SQLite file options). With a QUESTION, answer it and exit. Tool calls that need approval "
        "are asked about here."
    )
    parser.add_argument("question", nargs="?", help="answer this question and exit")
    parser.add_argument(
        "--conversation", help="conversation id (default: a new one); reuse it to continue"
    )
    add_service_arguments(parser)
    parser.set_defaults(log_level="warning")


def _ask(prompt: str) -> str:
    return input(prompt)


async def _ask_in_thread(ask: Callable[[str], str], prompt: str) -> str:
    """``ask(prompt)`` in a daemon thread, so that the event loop (the MCP sessions) goes on
    meanwhile. Not ``asyncio.to_thread``: its executor's threads are joined when the loop and
    the interpreter close, so after Ctrl+C the chat would wait for a line typed at a prompt
    nobody reads any more."""
    reply: concurrent.futures.Future[str] = concurrent.futures.Future()

    def read(stdin: TextIO) -> None:
        # ``stdin`` is only held. After Ctrl+C, input() still waits here, holding the lock of
        # stdin's buffer (when stdin is not a terminal), as the interpreter exits; if the exit
        # dropped the last reference to sys.stdin, closing it would need that lock, a fatal
        # error ("could not acquire lock for <_io.BufferedReader name='<stdin>'>").
        reply.set_running_or_notify_cancel()
        try:
            text = ask(prompt)
        except BaseException as exc:  # EOFError (Ctrl-D) included: raised by the await below
            reply.set_exception(exc)
        else:
            reply.set_result(text)

    threading.Thread(target=read, args=(sys.stdin,), name="tooluse-chat-input", daemon=True).start()
    return await asyncio.wrap_future(reply)


async def _show(
    events: AsyncIterator[QaEvent], ask: Callable[[str], str]
) -> tuple[ApprovalRequiredEvent, dict[str, Decision]] | None:
    """Print a run; for a pause, ask for the decisions and return them."""
    async for event in events:
        if isinstance(event, ToolCallEvent):
            print(f"  -> {event.name}({event.arguments})")
        elif isinstance(event, ToolResultEvent):
            mark = " (error)" if event.is_error else ""
            print(f"  <- {event.name}{mark}: {event.result[:_PREVIEW]}")
        elif isinstance(event, RouteEvent):
            source = "live data" if event.route == "tools" else "the knowledge base"
            print(f"  [answering from {source}]")
        elif isinstance(event, DeltaEvent):
            print(event.text, end="", flush=True)
        elif isinstance(event, DoneEvent):
            print()
            titles = [str(d.metadata.get("title") or d.id) for d in event.documents]
            if titles:
                print(f"  sources: {' · '.join(titles)}")
        elif isinstance(event, ApprovalRequiredEvent):
            decisions: dict[str, Decision] = {}
            for call in event.pending_tool_calls:
                reply = await _ask_in_thread(
                    ask, f"  approve {call.name}({call.arguments})? [y/N] "
                )
                yes = reply.strip().lower() in ("y", "yes")
                decisions[call.id] = Approve() if yes else Deny("The user denied this call.")
            return event, decisions
    return None


async def _answer(
    service: QaService, question: str, conversation_id: str, ask: Callable[[str], str]
) -> None:
    events = service.stream(question, conversation_id=conversation_id)
    while (paused := await _show(events, ask)) is not None:
        event, decisions = paused
        events = service.resume_stream(event.pause, decisions)


async def _chat(service: QaService, args: argparse.Namespace, ask: Callable[[str], str]) -> int:
    conversation_id = args.conversation or uuid.uuid4().hex
    status = 0
    try:  # closed however the chat ends: an error, Ctrl+C (this task cancelled), or done
        try:
            await start_service(service, args)
        except OptionError as exc:
            print(f"tooluse chat: {exc}", file=sys.stderr)
            return 2
        if args.question is not None:
            try:
                await _answer(service, args.question, conversation_id, ask)
            except Exception as exc:
                if not described_failure(exc):
                    raise  # a bug: its traceback helps
                print(f"tooluse chat: {exc}", file=sys.stderr)
                return 1
            return 0
        print(f"conversation {conversation_id}; an empty line or Ctrl-D ends it", file=sys.stderr)
        while True:
            try:
                question = await _ask_in_thread(ask, "you> ")
            except EOFError:
                break
            if not question.strip():
                break
            try:
                await _answer(service, question, conversation_id, ask)
            except Exception as exc:  # the next question may work (e.g. a provider hiccup)
                said = str(exc) if described_failure(exc) else f"{type(exc).__name__}: {exc}"
                print(f"error: {said}", file=sys.stderr)
                status = 1
    finally:
        await service.aclose()
    return status


def run(args: argparse.Namespace, ask: Callable[[str], str] = _ask) -> int:
    configure_logging(args.log_level)
    try:
        service = open_service(args, QaService)
    except OptionError as exc:
        print(f"tooluse chat: {exc}", file=sys.stderr)
        return 2
    try:
        # On Ctrl+C asyncio.run cancels _chat, which closes the service (stopping the MCP
        # servers), then raises KeyboardInterrupt here.
        return asyncio.run(_chat(service, args, ask))
    except KeyboardInterrupt:
        print(file=sys.stderr)  # the shell's prompt on a line of its own, after "^C"
        return _INTERRUPTED
    finally:
        close_model(service.config)
