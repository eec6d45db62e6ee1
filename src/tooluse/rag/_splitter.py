"""``TextSplitter``: chunks that fit the embedding model, cut at natural boundaries."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from tooluse.rag._document import Document

__all__ = ["TextSplitter", "estimate_tokens"]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_CHAR = re.compile(f"[{_CJK}]")
_PARAGRAPHS = re.compile(r"\n[ \t]*\n\s*")
# A sentence ends at CJK or Latin terminal punctuation (plus closing quotes); Latin
# punctuation only before a space or CJK text ("3.5", "e.g.x" go on). A line break alone
# ends no sentence: Markdown and plain text are often wrapped inside a sentence.
_SENTENCE = re.compile(
    f".*?(?:[。！？；…]+[”’」』）)]*|[.!?;]+[\"'”’)]*(?=\\s|$|[{_CJK}])|$)", re.DOTALL
)
# An enumerator ("1.", "a)") at the start of a line is not a sentence of its own.
_ENUMERATOR = re.compile(r"\s*(?:\d{1,3}|[A-Za-z])[.)]")
# Inside a sentence too long for a chunk: its lines, then its clauses (after a comma or a
# colon; Latin ones only before a space or CJK text: "1,000" and "10:30" stay whole).
_LINE = re.compile(r".*?(?:\n|$)", re.DOTALL)
_CLAUSE = re.compile(f".*?(?:[，、：]+|[,:](?=\\s|[{_CJK}])|$)", re.DOTALL)
# The smallest units: one CJK character, or a word with the spaces after it.
_UNIT = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+\\s*|\\s+")


def estimate_tokens(text: str) -> int:
    """A model-independent token estimate: each CJK character about one token, other text
    about four characters a token (so Chinese and English chunks get similar sizes)."""
    cjk = len(_CJK_CHAR.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


class TextSplitter:
    """Splits documents into chunks of at most ``chunk_size`` (``length_function`` units,
    estimated tokens by default), with about ``chunk_overlap`` carried from one chunk to the
    next.

    Cuts fall between paragraphs where possible, then between sentences (Chinese, Japanese and
    Latin punctuation; a line break alone ends none, as text is often wrapped mid-sentence);
    inside a sentence longer than a chunk, between its lines, then its clauses (after a
    comma or colon), then its words or CJK characters, and inside a word only when the word
    alone is longer than a chunk. A document whose metadata has a
    ``title`` (Markdown sections) gets it as the first line of every chunk, so each chunk says
    what it is about; the chunk, title line included, still fits ``chunk_size``: a title line
    longer than half a chunk is cut to fit in half and ends with "…" (the metadata keeps the
    whole title). Chunk ids are ``<document id>#<n>``; metadata is the document's plus
    ``chunk_index``.
    """

    def __init__(
        self,
        chunk_size: int = 256,
        chunk_overlap: int = 32,
        *,
        length_function: Callable[[str], int] = estimate_tokens,
    ) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
        if not 0 <= chunk_overlap < chunk_size:
            raise ValueError(
                f"chunk_overlap must be >= 0 and smaller than chunk_size ({chunk_size}), "
                f"got {chunk_overlap!r}"
            )
        self._size = chunk_size
        self._overlap = chunk_overlap
        self._length = length_function

    @property
    def fingerprint(self) -> str:
        """Identifies the settings and the rules, so ingestion can tell chunks cut
        differently (``/2``: line breaks no longer end sentences; files ingested before are
        split again on the next ingestion)."""
        return f"TextSplitter/2({self._size},{self._overlap},{self._length.__qualname__})"

    def split(self, documents: Sequence[Document]) -> list[Document]:
        chunks: list[Document] = []
        for document in documents:
            heading = self._heading(document.metadata.get("title"))
            for index, text in enumerate(self._split_under(heading, document.text)):
                chunks.append(
                    Document(
                        id=f"{document.id}#{index}",
                        text=text,
                        metadata={**document.metadata, "chunk_index": index},
                    )
                )
        return chunks

    def _heading(self, title: object) -> str:
        """The title line put at the top of each chunk: the title, or as much of it as fits
        in half a chunk (cut after a word or CJK character, inside a word only when the
        first is too long, and marked with "…"); ``""`` when not even that fits."""
        if not isinstance(title, str) or not title.strip():
            return ""
        limit = self._size // 2
        if self._length(f"{title}\n") <= limit:
            return f"{title}\n"

        def fits(kept: str) -> bool:
            return self._length(f"{kept.rstrip()}…\n") <= limit

        kept = ""
        for unit in _UNIT.findall(title.strip()):
            if fits(kept + unit):
                kept += unit
                continue
            if not kept:  # the first word alone is too long: as much of it as fits
                for character in unit:
                    if not fits(kept + character):
                        break
                    kept += character
            break
        return f"{kept.rstrip()}…\n" if kept.strip() else ""

    def _split_under(self, heading: str, text: str) -> list[str]:
        """The chunks of ``text``, each starting with ``heading`` and at most ``chunk_size``
        long with it. The text's budget is what the heading leaves, made smaller while the
        length function counts a joined chunk longer than its parts (the default estimate
        never does); without room for any text, the chunks have no heading."""
        if not heading:
            return self._split_text(text, self._size)
        budget = self._size - self._length(heading)
        while budget >= 1:
            chunks = [heading + piece for piece in self._split_text(text, budget)]
            if all(self._length(chunk) <= self._size for chunk in chunks):
                return chunks
            budget -= 1
        return self._split_text(text, self._size)

    def split_text(self, text: str) -> list[str]:
        return self._split_text(text, self._size)

    def _split_text(self, text: str, size: int) -> list[str]:
        pieces: list[str] = []
        for paragraph in _PARAGRAPHS.split(text.strip()):
            if paragraph.strip():
                pieces.extend(self._fit(paragraph + "\n\n", size))
        return self._merge(pieces, size)

    def _fit(self, text: str, size: int) -> list[str]:
        """``text`` as pieces no longer than ``size``: itself, or its sentences, a sentence
        too long as its lines, a line too long as its clauses, a clause too long as its
        units. Whitespace stays with the pieces, so joining them gives ``text`` back."""
        if self._length(text.strip()) <= size:
            return [text]
        return self._pieces(_sentences(text), size, (_LINE, _CLAUSE))

    def _pieces(self, parts: list[str], size: int, finer: tuple[re.Pattern[str], ...]) -> list[str]:
        pieces: list[str] = []
        for part in parts:
            if not part:
                continue
            if self._length(part.strip()) <= size:
                pieces.append(part)
            elif finer:
                pieces.extend(self._pieces(finer[0].findall(part), size, finer[1:]))
            else:
                # The units themselves, whitespace kept: packed into chunks by the caller's
                # merge, which carries the overlap (merging them here and stripping the
                # groups glued the words on either side of a cut together).
                pieces.extend(self._units(part, size))
        return pieces

    def _units(self, sentence: str, size: int) -> list[str]:
        """Words and CJK characters; a word longer than a chunk is cut into characters."""
        units: list[str] = []
        for unit in _UNIT.findall(sentence):
            if self._length(unit.strip()) <= size:
                units.append(unit)
            else:
                units.extend(unit)
        return units

    def _merge(self, pieces: list[str], size: int) -> list[str]:
        """Greedily pack pieces into chunks of at most ``size``, starting each new chunk with
        the previous chunk's last pieces up to the overlap."""
        chunks: list[str] = []
        current: list[str] = []
        for piece in pieces:
            if current and self._length("".join([*current, piece]).strip()) > size:
                chunks.append("".join(current).strip())
                current = self._tail(current, piece, size)
            current.append(piece)
        if current and "".join(current).strip():
            chunks.append("".join(current).strip())
        return [c for c in chunks if c]

    def _tail(self, pieces: list[str], following: str, size: int) -> list[str]:
        """The last pieces, up to the overlap, that still fit in one chunk with ``following``.
        Measured joined: lengths do not add up (``beta`` and ``beta`` are a token each, and
        ``beta\nbeta`` three, with the default estimate)."""
        tail: list[str] = []
        for piece in reversed(pieces):
            candidate = [piece, *tail]
            if self._length("".join(candidate).strip()) > self._overlap:
                break
            if self._length("".join([*candidate, following]).strip()) > size:
                break
            tail = candidate
        return tail


def _sentences(text: str) -> list[str]:
    """The sentences of ``text``, an enumerator kept with the sentence it numbers."""
    sentences: list[str] = []
    for sentence in _SENTENCE.findall(text):
        if sentences and _ENUMERATOR.fullmatch(sentences[-1].split("\n")[-1]):
            sentences[-1] += sentence
        elif sentence:
            sentences.append(sentence)
    return sentences
