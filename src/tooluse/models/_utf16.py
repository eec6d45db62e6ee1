"""Text a provider's stream cut at UTF-16 code units (a gateway's fixed-size chunks): the two
halves of a character outside the BMP (an emoji, a rare CJK character) arrive as ``\\ud83d``
and ``\\ude00`` in two JSON strings. Joined as they are, they are two lone surrogates in
Python, which no JSON parser, tool or UTF-8 encoder takes for the character."""

from __future__ import annotations

import re

__all__ = ["StreamedText", "joined_surrogates"]

_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def joined_surrogates(text: str) -> str:
    """``text`` with each surrogate pair made the character it encodes (lone surrogates are
    left as they are)."""
    if text.isascii():
        return text
    return _SURROGATE_PAIR.sub(
        lambda pair: pair.group().encode("utf-16", "surrogatepass").decode("utf-16"), text
    )


def _is_high_surrogate(character: str) -> bool:
    return "\ud800" <= character <= "\udbff"


class StreamedText:
    """One text streamed in deltas (a choice's content, a content block): :meth:`add` gives
    what of a delta can be shown now, holding back a high surrogate that ends it until the
    next delta brings its low half; :meth:`end` gives what is still held when the text ends
    (a half nothing completed, passed on as it came)."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = ""

    def add(self, delta: str) -> str:
        text = joined_surrogates(self._held + delta)
        if text and _is_high_surrogate(text[-1]):
            self._held = text[-1]
            return text[:-1]
        self._held = ""
        return text

    def end(self) -> str:
        held, self._held = self._held, ""
        return held
