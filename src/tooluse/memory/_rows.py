"""The row layout both SQL repositories store a conversation in: one row per message,
``(conversation_id, position, role, message JSON)``, and the messages' JSON both ways."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

from tooluse._fork import ProcessLock
from tooluse.messages import Message, message_from_json, message_to_json

__all__ = ["MessageRow", "changed_rows", "message_rows", "messages_from_rows"]

MessageRow = tuple[str, int, str, str]

# The largest position a row may have (PostgreSQL's INTEGER); an update that would go past
# it writes the conversation again from position 0.
_LAST_POSITION: Final = 2**31 - 1

# Messages a conversation's window holds: each request reads them and writes them back.
_REMEMBERED_TEXTS: Final = 4096


class _MessageTexts:
    """The JSON text of the messages this process read or wrote lately, both ways, so that
    a window read again and again (each request of a conversation, twice in the QA
    service) and written back whole is parsed and serialised once per message, not once
    per request. Messages are frozen, so the same text may stand for one message object.
    Keyed by text one way and by the message object (identity) the other; the least
    recently used go first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._messages: OrderedDict[str, Message] = OrderedDict()
        self._texts: dict[int, tuple[Message, str]] = {}  # id(message) -> (it, its text)
        self._lock = ProcessLock()

    def messages(self, texts: Sequence[str]) -> list[Message]:
        complete = True
        with self._lock:
            found = [self._messages.get(text) for text in texts]
            for text, message in zip(texts, found, strict=True):
                if message is None:
                    complete = False
                else:
                    self._messages.move_to_end(text)
        # Not `None in found`: that compares each message with None through pydantic's
        # __eq__, in Python, a window's worth of calls per read.
        if complete:
            return [message for message in found if message is not None]
        parsed = [
            message if message is not None else message_from_json(text)
            for text, message in zip(texts, found, strict=True)
        ]
        self._remember([(m, t) for m, t, f in zip(parsed, texts, found, strict=True) if f is None])
        return parsed

    def texts(self, messages: Sequence[Message]) -> list[str]:
        with self._lock:
            found = [self._texts.get(id(message)) for message in messages]
            known = [
                entry[1] if entry is not None and entry[0] is message else None
                for message, entry in zip(messages, found, strict=True)
            ]
            for text in known:
                if text is not None:
                    self._messages.move_to_end(text)
        texts = [
            text if text is not None else message_to_json(message)
            for message, text in zip(messages, known, strict=True)
        ]
        self._remember(
            [(m, t) for m, t, k in zip(messages, texts, known, strict=True) if k is None]
        )
        return texts

    def _remember(self, pairs: Sequence[tuple[Message, str]]) -> None:
        if not pairs:
            return
        with self._lock:
            for message, text in pairs:
                previous = self._messages.get(text)
                if previous is not None:  # the same text from another message object
                    self._texts.pop(id(previous), None)
                self._messages[text] = message
                self._messages.move_to_end(text)
                self._texts[id(message)] = (message, text)
            while len(self._messages) > self._size:
                _, evicted = self._messages.popitem(last=False)
                self._texts.pop(id(evicted), None)


_TEXTS = _MessageTexts(_REMEMBERED_TEXTS)


def message_rows(
    conversation_id: str, messages: Sequence[Message], start: int = 0
) -> list[MessageRow]:
    """The rows of ``messages``, at positions from ``start`` on."""
    texts = _TEXTS.texts(messages)
    return [
        (conversation_id, position, message.role, text)
        for position, (message, text) in enumerate(zip(messages, texts, strict=True), start)
    ]


def changed_rows(
    conversation_id: str,
    positions: Sequence[int],
    stored: Sequence[Message],
    updated: Sequence[Message],
) -> tuple[int | None, list[MessageRow]]:
    """What an update of a conversation changes in its rows (the ``stored`` messages, at
    ``positions``, ascending): the position below which the rows go (``None``: none go)
    and the rows to add after the last. A window memory's update keeps the stored messages
    but the first few and appends a turn: it deletes those and writes the turn rather than
    the whole window again (each row is work for the database; a window is a dozen rows or
    more). Any other update drops every row and adds ``updated`` whole. Past
    ``_LAST_POSITION`` every row goes and the rows start from 0 again.

    The stored messages are compared by identity (the ones the update kept are the objects
    it was given), so the rows end up holding ``updated`` exactly."""
    start = positions[-1] + 1 if positions else 0
    dropped = next(
        count for count in range(len(stored) + 1) if _starts_with(updated, stored[count:])
    )
    kept = len(stored) - dropped
    added = updated[kept:]
    if start + len(added) - 1 > _LAST_POSITION:
        return start, message_rows(conversation_id, updated)
    below = None if dropped == 0 else start if kept == 0 else positions[dropped]
    return below, message_rows(conversation_id, added, start)


def _starts_with(messages: Sequence[Message], first: Sequence[Message]) -> bool:
    return len(messages) >= len(first) and all(
        a is b for a, b in zip(messages, first, strict=False)
    )


def messages_from_rows(texts: Sequence[str]) -> list[Message]:
    """The messages the rows' JSON texts hold (what :func:`message_rows` wrote)."""
    return _TEXTS.messages(texts)
