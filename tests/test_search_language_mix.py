"""The hybrid's language mix: a query in another script than a tool leans on the embeddings."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from search_fakes import BagOfWordsModel, RecordingModel
from tooluse.embedding import Vectors
from tooluse.search import HybridToolIndex, ToolReference, ToolSearchRequest, embedding_text
from tooluse.search._hybrid import request_spans
from tooluse.search._scripts import ScriptMix
from tooluse.search._text import SCRIPTS, request_parts, requests, script_counts


def counts(**by_script: int) -> list[int]:
    return [by_script.get(script, 0) for script in SCRIPTS]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Get the weather in Paris", counts(latin=5)),
        ("查询 weather 2024", counts(latin=1, han=2)),  # digits belong to no script
        ("2024-06-01 12:30", counts()),
        ("Get the weather (天气)", counts(latin=3, han=2)),
        ("東京のてんき", counts(han=2, kana=4)),
        ("서울 날씨", counts(hangul=4)),
        ("Погода в Москве", counts(cyrillic=3)),
        ("café naïve", counts(latin=2)),
        ("อากาศ today", counts(latin=1, other=1)),
        ("订单“C6H12O6”", counts(latin=3, han=2)),
    ],
)
def test_script_counts(text: str, expected: list[int]) -> None:
    assert script_counts(text) == expected


ENGLISH_TOOLS = [
    ToolReference("get_weather", None, "Current weather and forecast for a city"),
    ToolReference("order_status", None, "Status of the order with the given id"),
    ToolReference("send_email", None, "Send an email to a recipient"),
]
CHINESE_TOOL = ToolReference("query_weather", None, "根据城市名称查询当前天气和天气预报")


def test_one_language_needs_no_weighting() -> None:
    mix = ScriptMix.of(ENGLISH_TOOLS)
    assert mix.matchable("weather in Paris") is None
    assert mix.matchable("12345") is None  # no words: nothing to weigh
    assert ScriptMix.of([CHINESE_TOOL]).matchable("北京 weather 天气") is None  # names are Latin


def test_a_tool_can_match_the_share_of_the_query_written_in_its_scripts() -> None:
    mix = ScriptMix.of([*ENGLISH_TOOLS, CHINESE_TOOL])
    share = mix.matchable("查询北京的 weather")  # 5 Han characters, 1 Latin word
    assert share is not None
    np.testing.assert_allclose(share[:3], 1 / 6, rtol=1e-6)  # English tools: the Latin word
    assert share[3] == pytest.approx(1.0)  # the Chinese tool is written in both scripts
    all_han = mix.matchable("查询北京天气")
    assert all_han is not None
    assert list(all_han) == [0.0, 0.0, 0.0, 1.0]


def test_a_few_words_of_another_script_count_for_little() -> None:
    # One Chinese example among the English words: the tool is not written in Chinese.
    tool = ToolReference(
        "translate",
        None,
        "Translate a text from one language into another one, e.g. 你好 into hello; the "
        "source language is detected when it is not given",
    )
    share = ScriptMix.of([tool]).matchable("你好")
    assert share is not None
    assert 0.0 < share[0] < 0.5


# The fake model reads these Chinese words as the English ones (a multilingual model's job).
ALIASES = {"天气": "weather", "预报": "forecast", "邮件": "email", "发送": "send"}


def hybrid(tools: list[ToolReference], **options: object) -> HybridToolIndex:
    index = HybridToolIndex(BagOfWordsModel(ALIASES), background_embedding=False, **options)  # type: ignore[arg-type]
    index.index_tools("s", tools)
    return index


def test_a_chinese_question_over_english_tools_ranks_as_the_embeddings_do() -> None:
    # BM25 matches only the order id; before the language mix its best match, scaled to 1,
    # beat the weather tool that the embeddings put first.
    query = "帮我查一下订单12345那个城市的天气预报"
    with_mix = hybrid(ENGLISH_TOOLS)
    without = hybrid(ENGLISH_TOOLS, language_mix=False)
    tools = [*ENGLISH_TOOLS, ToolReference("order_12345", None, "Order 12345 details")]
    for index in (with_mix, without):
        index.index_tools("s", tools)
    first = {
        name: index.search(ToolSearchRequest("s", query, max_results=1)).tool_names[0]
        for name, index in (("mix", with_mix), ("no mix", without))
    }
    assert first == {"mix": "get_weather", "no mix": "order_12345"}


_ENGLISH = ["weather", "city", "email", "send", "order", "status", "forecast", "id"]
_HAN = ["天气", "预报", "邮件", "发送", "订单", "城市"]


def english_texts(min_size: int) -> st.SearchStrategy[list[str]]:
    """``min_size`` to 8 texts of 1 to 4 English words."""
    text = st.lists(st.sampled_from(_ENGLISH), min_size=1, max_size=4).map(" ".join)
    return st.lists(text, min_size=min_size, max_size=8)


@settings(max_examples=100, deadline=None)
@given(
    texts=english_texts(2),
    han=st.lists(st.sampled_from(_HAN), min_size=1, max_size=4),
    digits=st.sampled_from(["", " 12345", " 2024"]),
)
def test_a_query_without_a_word_of_the_catalogues_script_ranks_by_the_embeddings_alone(
    texts: list[str], han: list[str], digits: str
) -> None:
    tools = [
        ToolReference(f"tool{i}", None, f"{text}{digits if i == 0 else ''}")
        for i, text in enumerate(texts)
    ]
    query = "".join(han) + digits  # the digits match tool0 lexically: they must not count
    model = BagOfWordsModel(ALIASES)
    # Without the glossary, whose English words for the query would match (test_search_glossary).
    index = HybridToolIndex(model, background_embedding=False, query_tokens=None, gloss_weight=0)
    index.index_tools("s", tools)
    found = index.search(ToolSearchRequest("s", query, max_results=len(tools))).tool_references
    cosines = model.embed_documents([embedding_text(t) for t in tools]) @ model.embed_query(query)
    by_name = {f"tool{i}": float(c) for i, c in enumerate(cosines)}
    ranked = [by_name[reference.tool_name] for reference in found]
    # In the embeddings' order (equal cosines may come either way round).
    assert all(a >= b - 1e-6 for a, b in itertools.pairwise(ranked))


@settings(max_examples=100, deadline=None)
@given(
    texts=english_texts(1),
    query=st.lists(st.sampled_from(_ENGLISH), min_size=1, max_size=3).map(" ".join),
)
def test_a_query_in_the_catalogues_script_ranks_as_without_the_language_mix(
    texts: list[str], query: str
) -> None:
    tools = [ToolReference(f"tool{i}", None, text) for i, text in enumerate(texts)]
    results = [
        [
            (r.tool_name, round(r.relevance_score or 0.0, 5))
            for r in hybrid(tools, language_mix=mix)
            .search(ToolSearchRequest("s", query))
            .tool_references
        ]
        for mix in (True, False)
    ]
    assert results[0] == results[1]


# -- a task of several requests ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Compare the two files, then post the differences",
            ["Compare the two files", "post the differences"],
        ),
        (
            "Fill the tank and then start the engine. Also lock the doors",
            ["Fill the tank", "start the engine", "lock the doors"],
        ),
        ("Find flights from Paris and Rome", ["Find flights from Paris and Rome"]),
        ("比较这两份文件，然后把差异发到推特上", ["比较这两份文件", "把差异发到推特上"]),
        (
            "帮我买一张票，再买一张火车票。另外查一下天气",
            ["帮我买一张票", "买一张火车票", "查一下天气"],
        ),
        ("好的。谢谢", []),  # too short to be requests
        (
            # An enumerated task: a part per ordinal, its details and back-references in it,
            # the preamble before "First" left out.
            "Can you help me with a few things? First, find the court case 123. Could you "
            "fetch its judge for me? Second, get the chess rating of Magnus Carlsen.",
            [
                "First, find the court case 123 Could you fetch its judge for me",
                "Second, get the chess rating of Magnus Carlsen",
            ],
        ),
        (
            # Not enumerated: a sentence per request, a short one that refers back joined.
            "Price a room at the Hilton for 5 nights. How much would that be? "
            "I am renting a sedan for 10 days.",
            [
                "Price a room at the Hilton for 5 nights How much would that be",
                "I am renting a sedan for 10 days",
            ],
        ),
        (
            "首先查一下北京的天气。其次订一张去上海的机票",
            ["首先查一下北京的天气", "其次订一张去上海的机票"],
        ),
        # Traditional Chinese: its connectives split as their Simplified forms do, and a short
        # sentence that refers back (這個) is joined to the one before.
        ("比較這兩份檔案，然後把差異發到推特上", ["比較這兩份檔案", "把差異發到推特上"]),
        (
            "幫我訂一間飯店，接著還要租一輛車。這個多少錢？",
            ["幫我訂一間飯店", "租一輛車 這個多少錢"],
        ),
        ("首先查一下臺北的天氣。最後訂一張機票", ["首先查一下臺北的天氣", "訂一張機票"]),
    ],
)
def test_requests(text: str, expected: list[str]) -> None:
    assert requests(text, 3) == expected
    # Each request's parts are found in the task in order, from its first part to its last.
    spans = request_spans(text, request_parts(text, 3), embed_quoted=True)
    assert spans is not None and len(spans) == len(expected)
    for (start, end), request in zip(spans, expected, strict=True):
        assert text[start:end].startswith(request.split()[0])
        assert text[start:end].endswith(request.split()[-1])
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))


def test_request_spans_are_none_when_a_part_is_not_in_the_task_as_embedded() -> None:
    task = "帮我查一下天气预报，然后发送邮件给老板"
    parts = request_parts(task, 3)
    assert request_spans(task, parts, embed_quoted=True) == [(0, 9), (12, 19)]
    assert request_spans(task[5:], parts, embed_quoted=True) is None  # cut to its tail
    assert request_spans(task, parts[::-1], embed_quoted=True) is None  # not in order


TASK_TOOLS = [
    ToolReference("get_weather", None, "weather forecast"),
    ToolReference("send_email", None, "send email"),
    # Closer to the whole task than either, each further from each request.
    ToolReference("weather_mailer", None, "weather forecast send email"),
    ToolReference("forecast_sender", None, "forecast send email"),
]


def test_a_task_in_another_script_gets_each_requests_best_tool() -> None:
    # Each request alone ranks its tool first; the whole task, embedded as one, ranks first
    # the tools that touch both requests.
    query = "帮我查一下天气预报，然后发送邮件给老板"
    found = {
        split: hybrid(TASK_TOOLS, split_requests=split)
        .search(ToolSearchRequest("s", query, max_results=3))
        .tool_names
        for split in (True, False)
    }
    assert {"get_weather", "send_email"} <= set(found[True])
    assert not {"get_weather", "send_email"} <= set(found[False])


@settings(max_examples=100, deadline=None)
@given(
    texts=english_texts(2),
    task=st.lists(
        st.tuples(
            st.lists(st.sampled_from(_HAN), min_size=2, max_size=4).map("".join),
            st.sampled_from(["", " weather", " email"]),
        ).map("".join),
        min_size=2,
        max_size=6,
    ),
    chinese=st.lists(st.sampled_from(_HAN), min_size=1, max_size=3).map("".join),
    digits=st.sampled_from(["", " 12345"]),
    fusion=st.sampled_from(["scores", "ranks"]),
    limit=st.integers(1, 6),
    category=st.sampled_from([None, "suite"]),
)
def test_a_split_tasks_one_pass_ranking_merges_each_requests_own_ranking(
    texts: list[str],
    task: list[str],
    chinese: str,
    digits: str,
    fusion: str,
    limit: int,
    category: str | None,
) -> None:
    # The task and each of its requests (its last 4) ranked alone, one search each, merged as
    # documented: the task's best, then each request's best, then the task's others. The one
    # pass over all of them gives the same tools with the same scores, bit for bit. A request
    # may have an English word (its own share of the query the tools can match), one tool
    # of three or more is described in Chinese (BM25 counts for it), half of them form a
    # toolset (lifted together), which a category filter can also keep.
    descriptions = [f"{texts[0]}{digits}", *texts[1:], chinese]
    tools = [
        ToolReference(f"tool{i}", summary=text, category="suite" if i % 2 else None)
        for i, text in enumerate(descriptions)
    ]
    query = "，然后".join(task) + digits
    settings_ = {"fusion": fusion, "toolset_min_size": 2}
    split = hybrid(tools, **settings_)
    alone = hybrid(tools, split_requests=False, request_share=0.0, **settings_)

    def ranking(index: HybridToolIndex, text: str, count: int) -> list[tuple[str, float | None]]:
        request = ToolSearchRequest("s", text, max_results=count, category_filter=category)
        return [(r.tool_name, r.relevance_score) for r in index.search(request).tool_references]

    whole = ranking(alone, query, limit)
    merged = dict(whole[:1])
    for part in requests(query, 3)[-4:]:
        merged.update(
            (name, score) for name, score in ranking(alone, part, 1) if name not in merged
        )
    merged.update((name, score) for name, score in whole[1:] if name not in merged)
    assert ranking(split, query, limit) == list(merged.items())[:limit]


class BatchingModel(BagOfWordsModel):
    """Embeds queries in batches too; records each batch and each query embedded alone."""

    def __init__(self, aliases: dict[str, str] | None = None) -> None:
        super().__init__(aliases)
        self.batches: list[list[str]] = []
        self.alone: list[str] = []

    def embed_query(self, text: str) -> Vectors:
        self.alone.append(text)
        return super().embed_query(text)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        self.batches.append(list(texts))
        return np.stack([self._vector(text) for text in texts])


def test_a_split_tasks_requests_are_embedded_in_one_call() -> None:
    query = "帮我查一下天气预报，然后发送邮件给老板"
    model = BatchingModel(ALIASES)
    index = HybridToolIndex(model, background_embedding=False)
    index.index_tools("s", TASK_TOOLS)
    found = index.search(ToolSearchRequest("s", query, max_results=3)).tool_names
    assert model.batches == [[query, *requests(query, 3)]]  # the task and each request
    assert model.alone == []  # each ranking found its vector in the cache
    assert (
        found == hybrid(TASK_TOOLS).search(ToolSearchRequest("s", query, max_results=3)).tool_names
    )


class FailingBatchModel(BatchingModel):
    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        raise RuntimeError("rate limited")


def test_a_split_task_whose_texts_fail_to_embed_ranks_with_bm25(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The Chinese tool shares words with the task: BM25 finds it, the English ones not.
    query = "帮我查一下天气预报，然后发送邮件给老板"
    tools = [*TASK_TOOLS, ToolReference("query_weather", None, "查询天气预报")]
    model = FailingBatchModel(ALIASES)
    index = HybridToolIndex(model, background_embedding=False, gloss_weight=0)  # the query's words
    index.index_tools("s", tools)
    found = index.search(ToolSearchRequest("s", query, max_results=3)).tool_names
    assert found == ["query_weather"]
    assert model.alone == []  # not embedded one by one either
    failures = [r for r in caplog.records if "requests failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None
    assert "rate limited" in str(failures[0].exc_info[1])


def test_a_task_in_the_catalogues_script_is_not_split() -> None:
    model = RecordingModel()
    index = HybridToolIndex(model, background_embedding=False)
    index.index_tools("s", TASK_TOOLS)
    index.search(ToolSearchRequest("s", "Get the weather forecast, then send an email"))
    assert model.queries == ["Get the weather forecast, then send an email"]  # one embedding


def test_a_query_in_another_script_is_embedded_whole_not_its_last_line() -> None:
    model = RecordingModel(ALIASES)
    index = HybridToolIndex(model, background_embedding=False, split_requests=False)
    index.index_tools("s", ENGLISH_TOOLS)
    query = "我下周要去北京出差，想提前做好准备\n请帮我查一下那里未来几天的天气预报情况"
    index.search(ToolSearchRequest("s", query))
    last = "Please tell me what the weather will be like there on each day from Monday to Friday"
    index.search(ToolSearchRequest("s", f"I fly to Beijing next week and want to be ready\n{last}"))
    assert model.queries == [query, last]


class SpanModel(BatchingModel):
    """Also embeds a query's spans from one call (each span's vector its substring's, as
    :class:`BatchingModel` embeds it alone); records each call."""

    def __init__(self, aliases: dict[str, str] | None = None) -> None:
        super().__init__(aliases)
        self.span_calls: list[tuple[str, list[str]]] = []

    def embed_query_spans(self, text: str, spans: Sequence[tuple[int, int]]) -> Vectors | None:
        self.span_calls.append((text, [text[start:end] for start, end in spans]))
        return np.stack([self._vector(text), *(self._vector(text[a:b]) for a, b in spans)])


def test_a_split_tasks_requests_are_embedded_from_one_pass_over_the_task() -> None:
    # The second request's parts span a sentence end: its span runs from the first to the
    # last, with what is between.
    query = "帮我查一下天气预报。另外，发送邮件给老板。谢谢"
    model = SpanModel(ALIASES)
    index = HybridToolIndex(model, background_embedding=False)
    index.index_tools("s", TASK_TOOLS)
    found = index.search(ToolSearchRequest("s", query, max_results=3)).tool_names
    assert model.span_calls == [(query, ["帮我查一下天气预报", "发送邮件给老板。谢谢"])]
    assert model.batches == [] and model.alone == []
    apart = HybridToolIndex(BatchingModel(ALIASES), background_embedding=False)
    apart.index_tools("s", TASK_TOOLS)
    assert found == apart.search(ToolSearchRequest("s", query, max_results=3)).tool_names


def test_a_task_that_does_not_split_or_whose_requests_are_not_found_embeds_as_before() -> None:
    model = SpanModel(ALIASES)
    index = HybridToolIndex(model, background_embedding=False)
    index.index_tools("s", TASK_TOOLS)
    index.search(ToolSearchRequest("s", "帮我查一下天气预报"))  # one request
    assert model.span_calls == [] and model.batches == [] and model.alone == ["帮我查一下天气预报"]
    # A quote across two parts is left out of the task as embedded (and of the request,
    # whose parts are joined): its first part is not in it.
    quoted = "帮我查一下“北京的天气。预报”，然后发送邮件给老板"
    index.search(ToolSearchRequest("s", quoted))
    assert model.span_calls == []
    assert model.batches == [["帮我查一下 ，然后发送邮件给老板", "帮我查一下 ", "发送邮件给老板"]]
