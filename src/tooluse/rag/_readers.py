"""Document readers: plain text files and Markdown files (one document per section)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tooluse.rag._document import Document

__all__ = ["MarkdownReader", "TextReader", "markdown_sections"]

# The closing run of ``#`` is one only after a space (CommonMark): ``# C#`` is "C#".
_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
# A fence is three or more backticks or tildes; it is closed by a run of the same character
# at least as long, with nothing after it (CommonMark).
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


class _FileReader:
    """A reader of one text file; ``source`` (default: the file name) names its documents."""

    def __init__(
        self, path: str | os.PathLike[str], *, source: str | None = None, encoding: str = "utf-8"
    ) -> None:
        self._path = Path(path)
        self._source = source if source is not None else self._path.name
        self._encoding = encoding

    def _text(self) -> str:
        try:
            return self._path.read_text(encoding=self._encoding)
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{self._path} is not {self._encoding} text ({exc.reason} at byte {exc.start})"
            ) from exc


class TextReader(_FileReader):
    """Reads a text file as one document; ``source`` (default: the file name) names it in the
    metadata and the id."""

    def read(self) -> list[Document]:
        text = self._text()
        if not text.strip():
            return []
        return [Document(id=self._source, text=text.strip(), metadata={"source": self._source})]


class MarkdownReader(_FileReader):
    """Reads a Markdown file as one document per heading section.

    ``metadata["title"]`` is the section's heading path (``"Guide > Returns"``) and the text
    is the section without its heading line: :class:`TextSplitter` puts the title at the top
    of every chunk, so each chunk says what it is about (the document's title included).
    Headings inside fenced code blocks are not headings; text before the first heading is a
    section of its own.
    """

    def read(self) -> list[Document]:
        documents = []
        for number, (title, text) in enumerate(markdown_sections(self._text())):
            metadata: dict[str, str] = {"source": self._source}
            if title:
                metadata["title"] = title
            documents.append(Document(id=f"{self._source}#s{number}", text=text, metadata=metadata))
        return documents


def markdown_sections(markdown: str) -> list[tuple[str, str]]:
    """Split Markdown at ATX headings into ``(heading path, section text)`` pairs, dropping
    sections that have no text besides their heading."""
    sections: list[tuple[str, str]] = []
    path: list[tuple[int, str]] = []  # (level, heading) of the enclosing headings
    lines: list[str] = []
    body = False
    fence: str | None = None

    def flush() -> None:
        if body:
            sections.append((" > ".join(h for _, h in path), "\n".join(lines).strip()))

    for line in markdown.splitlines():
        fence_match = _FENCE.match(line)
        if fence_match:
            marker, rest = fence_match.groups()
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence) and not rest.strip():
                fence = None
        heading = _ATX_HEADING.match(line) if fence is None and not fence_match else None
        if heading:
            flush()
            level = len(heading.group(1))
            path = [(lvl, h) for lvl, h in path if lvl < level] + [(level, heading.group(2))]
            lines, body = [], False
            continue
        lines.append(line)
        body = body or bool(line.strip())
    flush()
    return sections
