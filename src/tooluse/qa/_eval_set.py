"""The labelled questions of ``tooluse eval``: families of questions, each labelled with the
tools it should call and, per question, what their arguments should be; or labelled "call
nothing". A follow-up family carries the earlier turns its conversation starts with."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, get_args

from tooluse.messages import AssistantMessage, Message, UserMessage

__all__ = ["ArgumentCheck", "CheckKind", "Question", "QuestionFamily", "normalised"]

CheckKind = Literal["equals", "like", "contains", "between", "pattern"]
_KINDS: Final = frozenset(get_args(CheckKind))


def normalised(text: str) -> str:
    """``text`` compared loosely: NFKC (full-width forms as ASCII), case folded, and only
    letters and digits kept ("People's Square" and "peoples square" are alike; Chinese is
    kept as it is)."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum())


@dataclasses.dataclass(frozen=True, slots=True)
class ArgumentCheck:
    """What one argument of a tool call must be:

    - ``equals``: the same JSON value (``1`` equals ``1.0``);
    - ``like``: a text equal to one of ``expected`` (a text or a list of texts) once both are
      :func:`normalised`;
    - ``contains``: a text holding one of ``expected`` once both are normalised;
    - ``between``: a number in ``[low, high]`` (``expected`` is the pair);
    - ``pattern``: a text in which the regular expression ``expected`` is found.

    An argument the call leaves out fails every check. In JSON a bare value means
    ``equals``; otherwise ``{"like": ["北京", "Beijing"]}`` and so on, one kind per check.
    """

    kind: CheckKind
    expected: Any

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown argument check {self.kind!r}: one of {sorted(_KINDS)}")
        if self.kind in ("like", "contains"):
            texts = [self.expected] if isinstance(self.expected, str) else self.expected
            if (
                not isinstance(texts, list | tuple)
                or not texts
                or not all(isinstance(t, str) and normalised(t) for t in texts)
            ):
                raise ValueError(
                    f"{self.kind!r} takes a text or a list of texts with letters or digits, "
                    f"got {self.expected!r:.100}"
                )
            object.__setattr__(self, "expected", tuple(texts))
        elif self.kind == "between":
            pair = self.expected
            if (
                not isinstance(pair, list | tuple)
                or len(pair) != 2
                or not all(_is_number(n) for n in pair)
                or pair[0] > pair[1]
            ):
                raise ValueError(f"'between' takes [low, high], got {pair!r:.100}")
            object.__setattr__(self, "expected", (pair[0], pair[1]))
        elif self.kind == "pattern":
            if not isinstance(self.expected, str):
                raise ValueError(f"'pattern' takes a regular expression, got {self.expected!r}")
            try:
                re.compile(self.expected)
            except re.error as exc:
                raise ValueError(f"'pattern' {self.expected!r} is not valid: {exc}") from exc

    @classmethod
    def from_json(cls, spec: Any) -> ArgumentCheck:
        if isinstance(spec, Mapping) and len(spec) == 1:
            ((kind, expected),) = spec.items()
            if kind in _KINDS:
                return cls(kind, expected)
        if isinstance(spec, Mapping):
            raise ValueError(
                f"an argument check is a value (equals) or one of {{{', '.join(sorted(_KINDS))}"
                f"}}: VALUE, got {json.dumps(spec, ensure_ascii=False):.100}"
            )
        return cls("equals", spec)

    def __call__(self, value: Any) -> bool:
        if self.kind == "equals":
            return _json_equal(value, self.expected)
        if self.kind == "between":
            low, high = self.expected
            return _is_number(value) and low <= value <= high
        if not isinstance(value, str):
            return False
        if self.kind == "pattern":
            return re.search(self.expected, value) is not None
        given = normalised(value)
        if self.kind == "like":
            return any(given == normalised(text) for text in self.expected)
        return any(normalised(text) in given for text in self.expected)

    def describe(self) -> str:
        return f"{self.kind} {json.dumps(self.expected, ensure_ascii=False)}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _json_equal(a: Any, b: Any) -> bool:
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


ToolArgumentChecks = Mapping[str, Mapping[str, Callable[[Any], bool]]]
"""Per tool name, per argument name, a check of the argument's value (an
:class:`ArgumentCheck`, or in code any ``(value) -> bool``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Question:
    """One question of a family, with the checks of the arguments its tool calls must pass:
    ``arguments[tool][argument]``. A tool's checks pass when one of its calls passes them
    all; arguments without a check may be anything."""

    text: str
    arguments: ToolArgumentChecks = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError(f"a question must be a non-blank text, got {self.text!r:.100}")
        for tool, checks in self.arguments.items():
            for argument, check in checks.items():
                if not callable(check):
                    raise TypeError(
                        f"the check of {tool}.{argument} must be callable, got {check!r:.100}"
                    )

    @classmethod
    def from_json(cls, data: Any, where: str) -> Question:
        if isinstance(data, str):
            return cls(data)
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: a question is a text or {{'text', 'arguments'}}")
        unknown = sorted(set(data) - {"text", "arguments"})
        if unknown:
            raise ValueError(f"{where}: unknown keys {unknown}")
        arguments = data.get("arguments", {})
        if not isinstance(arguments, Mapping) or not all(
            isinstance(checks, Mapping) for checks in arguments.values()
        ):
            raise ValueError(
                f"{where}: 'arguments' maps a tool name to {{argument name: check}}, got "
                f"{json.dumps(arguments, ensure_ascii=False):.100}"
            )
        try:
            return cls(
                data.get("text"),  # type: ignore[arg-type]  # checked in __post_init__
                {
                    tool: {name: ArgumentCheck.from_json(spec) for name, spec in checks.items()}
                    for tool, checks in arguments.items()
                },
            )
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from exc


_ROLES: Final[Mapping[str, type[UserMessage] | type[AssistantMessage]]] = {
    "user": UserMessage,
    "assistant": AssistantMessage,
}


@dataclasses.dataclass(frozen=True, slots=True, init=False)
class QuestionFamily:
    """Questions asked in different words that should call the same tools:
    ``expected_tools`` (all of them, in any order, and besides them at most the
    ``allowed_tools``), or no tool at all when ``expected_tools`` is empty. Calls of
    ``toolSearchTool`` (tool search) count only when it is expected: it fetches no data.

    ``questions`` are texts or :class:`Question` s (texts with argument checks);
    ``category`` groups families in the report ("live data", "knowledge base", ...);
    ``history`` is the conversation every run of the family starts from (a follow-up)."""

    name: str
    questions: tuple[Question, ...]
    expected_tools: tuple[str, ...] = ()
    category: str = ""
    history: tuple[Message, ...] = ()
    allowed_tools: tuple[str, ...] = ()

    def __init__(
        self,
        name: str,
        questions: Sequence[str | Question],
        expected_tools: Sequence[str] = (),
        *,
        category: str = "",
        history: Sequence[Message] = (),
        allowed_tools: Sequence[str] = (),
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a family's name must be a non-blank text, got {name!r:.100}")
        asked = tuple(q if isinstance(q, Question) else Question(q) for q in questions)
        if not asked:
            raise ValueError(f"family {name!r} has no questions")
        for question in asked:
            unexpected = sorted(set(question.arguments) - set(expected_tools))
            if unexpected:
                raise ValueError(
                    f"family {name!r}: {question.text!r:.60} checks the arguments of "
                    f"{unexpected}, which the family does not expect"
                )
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "questions", asked)
        object.__setattr__(self, "expected_tools", tuple(expected_tools))
        object.__setattr__(self, "category", category)
        object.__setattr__(self, "history", tuple(history))
        object.__setattr__(self, "allowed_tools", tuple(allowed_tools))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "family") -> QuestionFamily:
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: a family is an object, got {type(data).__name__}")
        keys = {"name", "category", "questions", "expected_tools", "allowed_tools", "history"}
        unknown = sorted(set(data) - keys)
        if unknown:
            raise ValueError(f"{where}: unknown keys {unknown}")
        name = data.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{where}: 'name' must be a non-blank string")
        where = f"{where} {name!r}"
        questions = data.get("questions")
        if not isinstance(questions, list) or not questions:
            raise ValueError(f"{where}: 'questions' must be a non-empty list")
        asked = [Question.from_json(q, f"{where}: questions[{n}]") for n, q in enumerate(questions)]
        tools = {key: data.get(key, []) for key in ("expected_tools", "allowed_tools")}
        for key, names in tools.items():
            if not isinstance(names, list) or not all(isinstance(t, str) for t in names):
                raise ValueError(f"{where}: {key!r} must be a list of tool names")
        category = data.get("category", "")
        if not isinstance(category, str):
            raise ValueError(f"{where}: 'category' must be a string")
        try:
            return cls(
                name,
                asked,
                tools["expected_tools"],
                category=category,
                history=_history(data.get("history", []), where),
                allowed_tools=tools["allowed_tools"],
            )
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from exc


def _history(turns: Any, where: str) -> list[Message]:
    if not isinstance(turns, list):
        raise ValueError(f"{where}: 'history' must be a list of {{'role', 'text'}}")
    messages: list[Message] = []
    for n, turn in enumerate(turns):
        if (
            not isinstance(turn, Mapping)
            or set(turn) != {"role", "text"}
            or turn["role"] not in _ROLES
            or not isinstance(turn["text"], str)
        ):
            raise ValueError(
                f"{where}: history[{n}] must be {{'role': 'user' or 'assistant', 'text': ...}}"
            )
        messages.append(_ROLES[turn["role"]](text=turn["text"]))
    return messages
