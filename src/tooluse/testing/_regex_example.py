"""A short string that a regular expression matches, for schema ``pattern``s.

It walks the parse tree of Python's own regex compiler (``re._parser``, the stage behind
``re.compile``), taking the first branch, the minimum repetition and the first character of
each class, and then checks the result with ``re.search``.
"""

from __future__ import annotations

import re
from re import _constants as sre  # type: ignore[attr-defined]  # no stub; stable since 3.11
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

__all__ = ["regex_example"]

# Candidates for "any character not in this class", most readable first.
_FALLBACK_CHARACTERS = "a0A _-.x9Z"
_CATEGORY_EXAMPLES: dict[Any, str] = {
    sre.CATEGORY_DIGIT: "0",
    sre.CATEGORY_NOT_DIGIT: "a",
    sre.CATEGORY_SPACE: " ",
    sre.CATEGORY_NOT_SPACE: "a",
    sre.CATEGORY_WORD: "a",
    sre.CATEGORY_NOT_WORD: " ",
}


def regex_example(pattern: str, *, stretch: int = 0) -> str:
    """A string ``re.search(pattern, s)`` accepts; ``ValueError`` when none can be built.

    Each repetition repeats its body at least ``stretch`` times where it allows that (to reach
    a ``minLength``); 0 gives the shortest string.
    """
    try:
        tree = sre_parse.parse(pattern)
    except re.error as exc:
        raise ValueError(f"Invalid regular expression {pattern!r}: {exc}") from exc
    groups: dict[int, str] = {}
    text = _sequence(tree, groups, stretch)
    if re.search(pattern, text) is None:
        raise ValueError(f"Could not build a string matching the pattern {pattern!r}")
    return text


def _sequence(items: Any, groups: dict[int, str], stretch: int) -> str:
    return "".join(_item(op, argument, groups, stretch) for op, argument in items)


def _item(op: Any, argument: Any, groups: dict[int, str], stretch: int) -> str:
    if op is sre.LITERAL:
        return chr(argument)
    if op is sre.NOT_LITERAL:
        return _character_outside([(sre.LITERAL, argument)])
    if op is sre.ANY:
        return "a"
    if op is sre.IN:
        return _character_in(argument)
    if op is sre.BRANCH:
        return _sequence(argument[1][0], groups, stretch)
    if op is sre.SUBPATTERN:
        group, _add_flags, _del_flags, body = argument
        text = _sequence(body, groups, stretch)
        if group is not None:
            groups[group] = text
        return text
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)):
        minimum, maximum, body = argument
        count: int = max(minimum, min(stretch, maximum))
        return _sequence(body, groups, stretch) * count
    if op is sre.GROUPREF:
        return groups.get(argument, "")
    if op is sre.ATOMIC_GROUP:
        return _sequence(argument, groups, stretch)
    # Anchors (AT), lookarounds (ASSERT, ASSERT_NOT) and conditionals consume nothing here;
    # the final re.search check catches a pattern they make unsatisfiable.
    return ""


def _character_in(items: Any) -> str:
    if items and items[0][0] is sre.NEGATE:
        return _character_outside(items[1:])
    op, argument = items[0]
    if op is sre.LITERAL:
        return chr(argument)
    if op is sre.RANGE:
        return chr(argument[0])
    if op is sre.CATEGORY:
        return str(_CATEGORY_EXAMPLES.get(argument, "a"))
    return "a"


def _character_outside(items: Any) -> str:
    excluded = re.compile("[" + "".join(_class_source(op, arg) for op, arg in items) + "]")
    for candidate in _FALLBACK_CHARACTERS:
        if not excluded.match(candidate):
            return candidate
    return "\u00e9"


def _class_source(op: Any, argument: Any) -> str:
    if op is sre.LITERAL:
        return re.escape(chr(argument))
    if op is sre.RANGE:
        return f"{re.escape(chr(argument[0]))}-{re.escape(chr(argument[1]))}"
    if op is sre.CATEGORY:
        return {
            sre.CATEGORY_DIGIT: r"\d",
            sre.CATEGORY_NOT_DIGIT: r"\D",
            sre.CATEGORY_SPACE: r"\s",
            sre.CATEGORY_NOT_SPACE: r"\S",
            sre.CATEGORY_WORD: r"\w",
            sre.CATEGORY_NOT_WORD: r"\W",
        }.get(argument, "")
    return ""
