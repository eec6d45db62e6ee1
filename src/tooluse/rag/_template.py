"""``PromptTemplate``: ``{name}`` placeholders, as in Spring's templates."""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["PromptTemplate"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class PromptTemplate:
    """A text with ``{name}`` placeholders. Only identifiers in braces are placeholders, so
    JSON examples such as ``{"a": 1}`` stay literal. Rendering with a placeholder left
    without a value is an error that names it."""

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"a template is a str, got {type(text).__name__}")
        self._text = text
        self._variables = frozenset(_PLACEHOLDER.findall(text))

    @property
    def text(self) -> str:
        return self._text

    @property
    def variables(self) -> frozenset[str]:
        return self._variables

    def render(self, values: Mapping[str, object]) -> str:
        missing = sorted(self._variables - values.keys())
        if missing:
            raise KeyError(f"template variables without a value: {', '.join(missing)}")
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self._text)
