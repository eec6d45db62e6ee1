"""Readers and the splitter: sections by heading, chunks by length with overlap, CJK-aware."""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tooluse.rag import (
    Document,
    MarkdownReader,
    TextReader,
    TextSplitter,
    estimate_tokens,
    markdown_sections,
)


def test_token_estimate_counts_cjk_characters_one_each() -> None:
    assert estimate_tokens("退货政策") == 4
    assert estimate_tokens("abcdefgh") == 2
    assert estimate_tokens("积分 points") == 2 + 2  # "积分" plus " points" (7 chars)


def test_markdown_sections_follow_the_heading_path_and_skip_code_fences() -> None:
    markdown = "\n".join(
        [
            "intro text",
            "# Guide",
            "## Returns",
            "Send it back.",
            "```python",
            "# not a heading",
            "```",
            "### Refunds",
            "Money back.",
            "## Shipping",
            "",
            "# Other",
            "Last words. ##",
        ]
    )
    assert markdown_sections(markdown) == [
        ("", "intro text"),
        ("Guide > Returns", "Send it back.\n```python\n# not a heading\n```"),
        ("Guide > Returns > Refunds", "Money back."),
        ("Other", "Last words. ##"),
    ]


def test_markdown_headings_keep_a_trailing_hash_and_long_fences_hold_short_ones() -> None:
    markdown = "\n".join(
        [
            "# C#",
            "About C sharp.",
            "## F# ##",
            "About F sharp.",
            "````markdown",
            "```python",
            "# a comment in the example",
            "```",
            "````",
            "~~~",
            "```bash",
            "# still inside the tilde fence",
            "~~~",
        ]
    )
    assert markdown_sections(markdown) == [
        ("C#", "About C sharp."),
        (
            "C# > F#",
            "About F sharp.\n````markdown\n```python\n# a comment in the example\n```\n````"
            "\n~~~\n```bash\n# still inside the tilde fence\n~~~",
        ),
    ]


def test_readers(tmp_path: Path) -> None:
    (tmp_path / "faq.md").write_text("# FAQ\n## 积分\n积分两年有效。\n", encoding="utf-8")
    (tmp_path / "note.txt").write_text("  plain note \n", encoding="utf-8")
    (tmp_path / "empty.txt").write_text(" \n", encoding="utf-8")
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    [section] = MarkdownReader(tmp_path / "faq.md").read()
    assert section == Document(
        id="faq.md#s0", text="积分两年有效。", metadata={"source": "faq.md", "title": "FAQ > 积分"}
    )
    assert TextReader(tmp_path / "note.txt", source="docs/note.txt").read() == [
        Document(id="docs/note.txt", text="plain note", metadata={"source": "docs/note.txt"})
    ]
    assert TextReader(tmp_path / "empty.txt").read() == []
    with pytest.raises(ValueError, match=r"latin1\.txt is not utf-8 text"):
        TextReader(tmp_path / "latin1.txt").read()


def test_readers_honour_a_byte_order_mark(tmp_path: Path) -> None:
    # Notepad and other Windows editors write a BOM before UTF-8 and save "Unicode" as UTF-16
    # with one. Left in the text, the BOM hid the first heading: "\ufeff# 会员积分" was a
    # section of its own and the document's title was lost from every chunk.
    markdown = "# 会员积分\n\n## 过期\n\n积分12个月后过期。\n"
    for encoding in ("utf-8-sig", "utf-16", "utf-16-be", "utf-32"):
        path = tmp_path / f"{encoding}.md"
        data = markdown.encode(encoding)
        if encoding == "utf-16-be":
            data = codecs.BOM_UTF16_BE + data
        path.write_bytes(data)
        assert [(d.metadata.get("title"), d.text) for d in MarkdownReader(path).read()] == [
            ("会员积分 > 过期", "积分12个月后过期。")
        ], encoding
    (tmp_path / "bom.txt").write_bytes("积分两年有效。\n".encode("utf-8-sig"))
    [document] = TextReader(tmp_path / "bom.txt").read()
    assert document.text == "积分两年有效。"


def test_a_gbk_file_is_refused_with_a_hint_to_convert_it(tmp_path: Path) -> None:
    (tmp_path / "积分.md").write_bytes("# 会员积分\n积分两年有效。\n".encode("gb18030"))
    with pytest.raises(ValueError, match=r"积分\.md is not utf-8 text") as raised:
        MarkdownReader(tmp_path / "积分.md").read()
    assert "GBK/GB18030" in str(raised.value) and "iconv -f GB18030 -t UTF-8" in str(raised.value)
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))  # not GBK: no such hint
    with pytest.raises(ValueError, match=r"latin1\.txt is not utf-8 text") as raised:
        TextReader(tmp_path / "latin1.txt").read()
    assert "GB18030" not in str(raised.value)


def test_short_text_is_one_chunk_with_its_title() -> None:
    document = Document(id="d", text="Short body.", metadata={"title": "FAQ > Q", "source": "s"})
    assert TextSplitter().split([document]) == [
        Document(
            id="d#0",
            text="FAQ > Q\nShort body.",
            metadata={"title": "FAQ > Q", "source": "s", "chunk_index": 0},
        )
    ]


def test_paragraphs_are_kept_whole_when_they_fit() -> None:
    paragraphs = [" ".join([f"p{n}w{i}" for i in range(10)]) for n in range(4)]
    chunks = TextSplitter(chunk_size=30, chunk_overlap=0).split_text("\n\n".join(paragraphs))
    assert chunks == ["\n\n".join(paragraphs[:2]), "\n\n".join(paragraphs[2:])]


def test_chinese_is_cut_at_sentence_ends() -> None:
    sentences = [f"第{n}句话讲的是积分规则的一部分内容。" for n in range(1, 7)]
    chunks = TextSplitter(chunk_size=40, chunk_overlap=0).split_text("".join(sentences))
    assert len(chunks) == 3
    assert all(chunk.endswith("。") for chunk in chunks)
    assert "".join(chunks) == "".join(sentences)


def test_a_line_break_inside_a_sentence_is_no_place_to_cut() -> None:
    # Markdown and text files are often wrapped at a fixed width, inside sentences: a line
    # break counted as a sentence end, so chunks ended mid-sentence ("can be returned within")
    # and the overlap began with a line's tail.
    english = (
        "Orders placed before four in the afternoon ship the same day, and delivery takes one\n"
        "to three working days. Orders to remote areas can take up to a week, because the\n"
        "carrier collects parcels there only twice a week. International orders take five to\n"
        "ten days and customs duties are paid by the recipient. Unused items can be returned\n"
        "within thirty days of delivery, and the return label is free for members. Opened\n"
        "electronics can only be returned within fourteen days, with all their accessories."
    )
    chinese = (
        "首次使用时长按顶部的麦克风键六秒，指示灯变成橙色闪烁后，"
        "打开手机上的声悦 App，按提示选择家里的\n"
        "Wi-Fi 并输入密码。音箱只支持 2.4GHz 频段，不支持 5GHz 网络；"
        "如果路由器是双频合一，请在路由器里\n"
        "暂时把 2.4GHz 单独分出来。默认唤醒词是“你好声悦”。"
        "在 App 的“设备设置 - 唤醒词”里可以改成“小悦小悦”或自定义四个字的\n"
        "唤醒词。自定义唤醒词需要在安静的环境里录三遍，录好后大约一分钟生效。"
    )
    for text, size, ends in ((english, 60, "."), (chinese, 60, "。；")):
        chunks = TextSplitter(chunk_size=size, chunk_overlap=size // 4).split_text(text)
        assert len(chunks) > 2
        sentences = re.findall(rf".+?[{ends}]", text.replace("\n", " "))
        starts = {sentence.strip()[:12] for sentence in sentences}
        for chunk in chunks:
            assert chunk[-1] in ends, chunks
            assert chunk.replace("\n", " ")[:12] in starts, chunks


def test_latin_punctuation_in_chinese_text_ends_a_sentence() -> None:
    sentences = [f"第{n}个问题是关于积分规则的内容吗?是的!" for n in range(1, 7)]
    chunks = TextSplitter(chunk_size=40, chunk_overlap=0).split_text("".join(sentences))
    assert len(chunks) == 3
    assert all(chunk.endswith("!") for chunk in chunks)


def test_a_chinese_sentence_longer_than_a_chunk_is_cut_after_a_comma() -> None:
    clauses = [f"第{n}个分句讲的是积分规则" for n in range(1, 13)]
    chunks = TextSplitter(chunk_size=40, chunk_overlap=0).split_text("，".join(clauses) + "。")
    assert len(chunks) > 2
    assert all(chunk[-1] in "，。" for chunk in chunks), chunks
    assert "".join(chunks) == "，".join(clauses) + "。"


def test_a_numbered_item_is_not_cut_from_its_number() -> None:
    items = "\n".join(f"{n}. Item number {n} explains one more rule." for n in range(1, 9))
    for chunk in TextSplitter(chunk_size=30, chunk_overlap=6).split_text(items):
        assert re.match(r"\d\. Item number \d", chunk), chunk
        assert not re.search(r"\d\.$", chunk), chunk


def test_overlap_repeats_the_end_of_the_previous_chunk() -> None:
    sentences = [f"Sentence number {n} is here." for n in range(12)]
    chunks = TextSplitter(chunk_size=30, chunk_overlap=8).split_text(" ".join(sentences))
    assert len(chunks) > 2
    for previous, following in itertools.pairwise(chunks):
        last_sentence = previous.rsplit(". ", 1)[-1]
        assert following.startswith(last_sentence.rstrip("."))


def test_a_sentence_longer_than_a_chunk_is_cut_between_words_or_characters() -> None:
    long_word_run = " ".join(f"word{n}" for n in range(200))
    for chunk in TextSplitter(chunk_size=20, chunk_overlap=0).split_text(long_word_run):
        assert estimate_tokens(chunk) <= 20
        assert not chunk.startswith("ord")  # never inside a word
    cjk = "无标点的长句" * 30
    cjk_chunks = TextSplitter(chunk_size=50, chunk_overlap=0).split_text(cjk)
    assert "".join(cjk_chunks) == cjk
    assert all(len(c) <= 50 for c in cjk_chunks)


@pytest.mark.parametrize(
    ("size", "overlap", "message"),
    [(0, 0, "chunk_size must be a positive int"), (10, 10, "chunk_overlap must be >= 0")],
)
def test_bad_settings(size: int, overlap: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TextSplitter(chunk_size=size, chunk_overlap=overlap)


_words = st.sampled_from(
    ["alpha", "beta", "积分", "规则", "有效", "two-year", "x" * 30, "。", ". "]
)
_texts = st.lists(
    st.one_of(_words, st.sampled_from([" ", "\n", "\n\n", "！", "?"])), min_size=1, max_size=300
).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=_texts, size=st.integers(8, 80), overlap_share=st.floats(0, 0.5))
# Found by hypothesis: the overlap "beta" (1 token) and the next piece (7) made a 9-token chunk
# of 8 once joined by a line break.
@example(text="beta\nbeta积分积分积分alpha", size=8, overlap_share=0.5)
def test_chunks_fit_and_lose_no_word(text: str, size: int, overlap_share: float) -> None:
    overlap = int(size * overlap_share)
    chunks = TextSplitter(chunk_size=size, chunk_overlap=overlap).split_text(text)
    for chunk in chunks:
        assert chunk.strip() == chunk and chunk
        assert estimate_tokens(chunk) <= size
    # Chunks are ordered pieces of the text, overlapping: every non-space character of the
    # text appears in the chunks in order (a word longer than a chunk is cut, not lost).
    remaining = iter("".join("".join(chunks).split()))
    assert all(character in remaining for character in "".join(text.split()))


@settings(max_examples=300, deadline=None)
@given(text=_texts, size=st.integers(3, 40))
# Found by hypothesis: a sentence longer than a chunk was cut into groups of words that were
# stripped and then packed together again, gluing "积分" and "beta" into "积分beta".
@example(text="alphaalphaalphaalphabeta积分 beta", size=3)
@example(text="First one. Then more words here.", size=5)
def test_cutting_a_long_sentence_never_glues_words_together(text: str, size: int) -> None:
    chunks = TextSplitter(chunk_size=size, chunk_overlap=0).split_text(text)
    words = text.split()
    for chunk in chunks:
        for word in chunk.split():  # a whole word, or a piece of one cut because it is long
            assert any(word in original for original in words), (word, chunks)
    assert "".join("".join(chunks).split()) == "".join(words)  # no overlap: nothing repeated


def test_text_without_sentence_ends_still_overlaps() -> None:
    words = [f"w{n:02d}" for n in range(60)]
    chunks = TextSplitter(chunk_size=20, chunk_overlap=5).split_text(" ".join(words))
    assert len(chunks) > 2
    for previous, following in itertools.pairwise(chunks):
        assert estimate_tokens(following) <= 20
        assert following.split()[0] in previous.split()[1:]  # starts inside the previous one


def test_a_title_longer_than_half_a_chunk_is_cut_and_chunks_still_fit() -> None:
    title = " > ".join(f"Heading number {n}" for n in range(20))  # ~100 tokens
    body = " ".join(f"word{n}" for n in range(100))
    document = Document(id="d", text=body, metadata={"title": title})
    chunks = TextSplitter(chunk_size=40, chunk_overlap=0).split([document])
    assert chunks
    for chunk in chunks:
        assert estimate_tokens(chunk.text) <= 40
        heading = chunk.text.split("\n", 1)[0]
        assert heading.endswith("…") and title.startswith(heading[:-1].rstrip())
        assert estimate_tokens(heading + "\n") <= 20  # at most half a chunk
        assert chunk.metadata["title"] == title  # the metadata keeps it whole
    assert " ".join(c.text.split("\n", 1)[1] for c in chunks).split() == body.split()


def test_a_title_that_fits_half_a_chunk_is_kept_whole() -> None:
    document = Document(id="d", text="alpha " * 40, metadata={"title": "FAQ > Returns"})
    chunks = TextSplitter(chunk_size=20, chunk_overlap=0).split([document])
    assert len(chunks) > 1
    assert all(c.text.startswith("FAQ > Returns\nalpha") for c in chunks)
    assert all(estimate_tokens(c.text) <= 20 for c in chunks)


def test_a_chunk_too_small_for_any_title_has_none() -> None:
    document = Document(id="d", text="积分两年有效", metadata={"title": "积分规则"})
    chunks = TextSplitter(chunk_size=1, chunk_overlap=0).split([document])
    assert [c.text for c in chunks] == list("积分两年有效")
    one_word = Document(id="d", text="body", metadata={"title": "x" * 200})
    [chunk] = TextSplitter(chunk_size=4, chunk_overlap=0).split([one_word])
    assert chunk.text == "xxxxxx…\nbody"  # a word longer than the title's share is cut too


@settings(max_examples=200, deadline=None)
@given(
    title=_texts,
    text=_texts,
    size=st.integers(1, 80),
    overlap_share=st.floats(0, 0.5),
    length=st.sampled_from([estimate_tokens, len]),
)
def test_chunks_with_their_title_fit(
    title: str, text: str, size: int, overlap_share: float, length: Callable[[str], int]
) -> None:
    overlap = min(int(size * overlap_share), size - 1)
    splitter = TextSplitter(chunk_size=size, chunk_overlap=overlap, length_function=length)
    document = Document(id="d", text=text, metadata={"title": title})
    chunks = splitter.split([document])
    for chunk in chunks:
        assert length(chunk.text) <= size, chunk.text
    if title.strip() and length(f"{title}\n") <= size // 2 and chunks:
        assert all(c.text.startswith(f"{title}\n") for c in chunks)
