"""Document readers: plain text files and Markdown files (one document per section)."""

from __future__ import annotations

import codecs
import os
import re
from pathlib import Path

from tooluse.rag._document import Document

__all__ = ["MarkdownReader", "TextReader", "UndecodableFileError", "markdown_sections"]

# The closing run of ``#`` is one only after a space (CommonMark): ``# C#`` is "C#".
_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
# A fence is three or more backticks or tildes; it is closed by a run of the same character
# at least as long, with nothing after it (CommonMark).
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_CJK_TEXT = re.compile("[\u4e00-\u9fff]{2}")


class UndecodableFileError(ValueError):
    """A file whose bytes are not text in the reader's encoding; the message names the file,
    the byte and, for Chinese text in the legacy encoding, how to convert it."""


class _FileReader:
    """A reader of one text file; ``source`` (default: the file name) names its documents."""

    def __init__(
        self, path: str | os.PathLike[str], *, source: str | None = None, encoding: str = "utf-8"
    ) -> None:
        self._path = Path(path)
        self._source = source if source is not None else self._path.name
        self._encoding = encoding

    def _text(self) -> str:
        """The file's text. A byte order mark is honoured and never part of the text (editors
        on Windows write one before UTF-8, and save "Unicode" as UTF-16 with one): left in,
        it hid the first heading of a Markdown file."""
        data = self._path.read_bytes()
        encoding = self._encoding
        if codecs.lookup(encoding).name == "utf-8":
            for bom, with_bom in _BOMS:
                if data.startswith(bom):
                    encoding = with_bom
                    break
        try:
            return data.decode(encoding).removeprefix("\ufeff")
        except UnicodeDecodeError as exc:
            raise UndecodableFileError(
                f"{self._path} is not {encoding} text ({exc.reason} at byte {exc.start})"
                f"{_gb18030_hint(data, self._path.name) if encoding == self._encoding else ''}"
            ) from exc


# UTF-32's little-endian mark starts with UTF-16's: checked first.
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _gb18030_hint(data: bytes, name: str) -> str:
    """A hint for Chinese text saved in the legacy encoding (GBK, GB2312, GB18030): the
    files Chinese editions of Windows write by default. Only when the bytes read as such."""
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        return ""
    if not _CJK_TEXT.search(text):
        return ""
    return (
        f"; it reads as GBK/GB18030 Chinese text: convert it to UTF-8, e.g. "
        f"iconv -f GB18030 -t UTF-8 '{name}' > '{name}.utf8' (or save it as UTF-8)"
    )


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
