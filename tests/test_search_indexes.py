"""The tool indexes: Spring's regex algorithm and our additions, BM25, vector, hybrid."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import threading
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from search_fakes import BagOfWordsModel, RecordingModel
from tooluse.embedding import E5EmbeddingModel, Vectors
from tooluse.search import (
    BM25ToolIndex,
    FieldBoosts,
    HybridToolIndex,
    RegexToolIndex,
    SessionToolIndex,
    ToolIndex,
    ToolReference,
    ToolSearchRequest,
    VectorToolIndex,
    compact_embedding_text,
    embedding_text,
    query_to_pattern,
)
from tooluse.search._documents import parameter_choices, tool_document
from tooluse.search._regex import STOP_WORDS
from tooluse.search._text import cjk_language, clauses, last_line, last_words, without_quoted
from tooluse.search._toolsets import Toolsets

WEATHER_TOOLS = [
    ToolReference("weatherTool", None, "Returns data"),
    ToolReference("genericTool", None, "Provides weather forecasts"),
    ToolReference("emailTool", None, "Sends an email"),
]


def search(index: ToolIndex, query: str, session: str = "s", **options: object) -> list[str]:
    return index.search(ToolSearchRequest(session, query, **options)).tool_names  # type: ignore[arg-type]


def phrases(
    words: list[str], *, max_words: int, max_count: int, min_words: int = 1
) -> st.SearchStrategy[list[str]]:
    """1 to ``max_count`` texts of ``min_words`` to ``max_words`` of ``words``."""
    phrase = st.lists(st.sampled_from(words), min_size=min_words, max_size=max_words)
    return st.lists(phrase.map(" ".join), min_size=1, max_size=max_count)


# -- RegexToolIndex: Spring's behaviour ------------------------------------------------------


def test_regex_worked_example_scores() -> None:
    index = RegexToolIndex()
    index.index_tools("s", WEATHER_TOOLS)
    response = index.search(ToolSearchRequest("s", "weather"))
    scores = {r.tool_name: r.relevance_score for r in response.tool_references}
    assert scores == {"weatherTool": 3.0, "genericTool": pytest.approx(1 + 0.5 / 1.9)}
    assert round(scores["genericTool"], 3) == 1.263
    assert response.tool_names == ["weatherTool", "genericTool"]
    assert response.search_type == "RegexToolIndex"
    assert response.total_matches == 2
    assert response.tool_references[0].summary == "Returns data"


@pytest.mark.parametrize(
    ("query", "pattern"),
    [
        ("weather tools", "(?i)(weather|tools)"),
        ("get user data", "(?i)(get|user|data)"),
        ("GET INVENTORY", "(?i)(get|inventory)"),
        ("", ".*"),
        ("   ", ".*"),
        ("the weather of the city", "(?i)(weather|city)"),
        ("the of", "(?i)(the|of)"),  # nothing survives the filter: all tokens come back
        ("a b", "(?i)(a|b)"),
        ("weather, weather; forecast!", "(?i)(weather|forecast)"),
        ("get_*_data", r"(?i)(get_\*_data|get|data)"),
        ("price (usd) $5+", r"(?i)(price|usd|\$5\+)"),
    ],
)
def test_regex_query_to_pattern(query: str, pattern: str) -> None:
    assert query_to_pattern(query) == pattern


def test_regex_stop_words_are_springs() -> None:
    assert {"the", "dare", "ought", "although", "whose", "so"} <= STOP_WORDS
    assert "weather" not in STOP_WORDS


def test_regex_pattern_is_capped_at_200_characters_but_keeps_one_token() -> None:
    long_query = " ".join(f"token{i:03d}" for i in range(60))
    pattern = query_to_pattern(long_query)
    assert len(pattern) <= 200
    assert pattern.startswith("(?i)(token000|token001|")
    huge = "x" * 300
    assert query_to_pattern(huge) == f"(?i)({huge})"


def test_regex_blank_query_matches_every_tool_in_order() -> None:
    index = RegexToolIndex()
    index.index_tools("s", WEATHER_TOOLS)
    assert search(index, "") == ["weatherTool", "genericTool", "emailTool"]


def test_regex_ties_keep_indexing_order_and_limit_applies() -> None:
    index = RegexToolIndex()
    index.index_tools("s", [ToolReference(f"tool{i}", None, "same text") for i in range(15)])
    assert search(index, "same") == [f"tool{i}" for i in range(10)]  # default limit 10
    assert search(index, "same", max_results=3) == ["tool0", "tool1", "tool2"]


@pytest.mark.parametrize("index_type", [RegexToolIndex, BM25ToolIndex])
def test_ties_at_the_cut_keep_indexing_order(index_type: type[SessionToolIndex[object]]) -> None:
    # One better tool in the middle, then 40 equal ones: the cut at 5 falls inside the tie.
    tools = [ToolReference(f"tool{i}", None, "same text") for i in range(40)]
    tools.insert(20, ToolReference("best", None, "same same text"))
    index = index_type()
    index.index_tools("s", tools)
    assert search(index, "same", max_results=5) == ["best", "tool0", "tool1", "tool2", "tool3"]


def test_regex_metacharacters_match_literally() -> None:
    index = RegexToolIndex()
    index.index_tools(
        "s",
        [ToolReference("a", None, "costs $5+ per call"), ToolReference("b", None, "costs 55")],
    )
    assert search(index, "$5+")[0] == "a"


# -- RegexToolIndex: our additions -----------------------------------------------------------


@pytest.mark.parametrize("query", ["getWeather", "get_weather", "get-weather", "weather.get"])
def test_regex_identifiers_are_split(query: str) -> None:
    index = RegexToolIndex()
    index.index_tools(
        "s",
        [ToolReference("fetch_forecast", None, "weather for a city"), *WEATHER_TOOLS[2:]],
    )
    assert search(index, query) == ["fetch_forecast"]


def test_regex_cjk_query_finds_chinese_description() -> None:
    index = RegexToolIndex()
    index.index_tools(
        "s",
        [
            ToolReference("email", None, "发送电子邮件"),
            ToolReference("w", None, "查询城市当前天气"),
        ],
    )
    assert search(index, "查询天气") == ["w"]
    assert query_to_pattern("查询天气") == "(?i)(查询天气|查询|天气)"


# -- BM25ToolIndex ---------------------------------------------------------------------------


CATALOGUE = [
    ToolReference("get_weather", None, "Current conditions for a city"),
    ToolReference("sendEmail", None, "Send a message to a recipient"),
    ToolReference(
        "book_flight",
        None,
        "Reserve a seat",
        {"type": "object", "properties": {"airport": {"type": "string", "description": "IATA"}}},
    ),
    ToolReference("math.factorial", None, "Calculate the factorial of a number"),
    ToolReference("query_city_weather", None, "查询城市当前天气"),
    ToolReference("translate", None, "翻译一段文字"),
]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("weather", "get_weather"),
        ("send email", "sendEmail"),
        ("factorial of 5", "math.factorial"),
        ("which airport", "book_flight"),  # parameter names are indexed
        ("IATA code", "book_flight"),  # and parameter descriptions
        ("查询天气", "query_city_weather"),
        ("帮我翻译", "translate"),
        ("emails", "sendEmail"),  # stemmed
    ],
)
def test_bm25_finds(query: str, expected: str) -> None:
    index = BM25ToolIndex()
    index.index_tools("s", CATALOGUE)
    assert search(index, query)[0] == expected


_PLAIN_WORDS = ["weather", "city", "email", "send", "file", "move", "stock", "price"]


@settings(max_examples=100, deadline=None)
@given(
    descriptions=phrases(_PLAIN_WORDS, min_words=0, max_words=6, max_count=8),
    queries=phrases(_PLAIN_WORDS, min_words=0, max_words=4, max_count=3),
)
def test_bm25_scores_are_the_textbook_formula_for_several_queries_at_once(
    descriptions: list[str], queries: list[str]
) -> None:
    index = BM25ToolIndex(stemmed=False)
    tools = [ToolReference(f"tool{i}", None, text) for i, text in enumerate(descriptions)]
    index.index_tools("s", tools)
    index.build("s")
    snapshot = index._snapshot("s")
    assert snapshot is not None
    scores = index.scores(snapshot[0], *queries)
    # BM25F by hand: name "tool<i>" boosted 3, description 1; k1 1.2, b 0.75, Lucene's idf.
    fields = [(["tool", str(i)], text.split()) for i, text in enumerate(descriptions)]
    lengths = [3.0 * len(name) + len(words) for name, words in fields]
    average = sum(lengths) / len(lengths)
    expected = np.zeros((len(queries), len(tools)))
    for row, query in enumerate(queries):
        for term in set(query.split()):
            frequencies = [3.0 * name.count(term) + words.count(term) for name, words in fields]
            df = sum(f > 0 for f in frequencies)
            idf = np.log1p((len(tools) - df + 0.5) / (df + 0.5))
            for column, (tf, length) in enumerate(zip(frequencies, lengths, strict=True)):
                norm = 1.2 * (1 - 0.75 + 0.75 * length / average)
                expected[row, column] += idf * tf * 2.2 / (tf + norm)
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-6)


def test_bm25_jieba_segmentation_also_works() -> None:
    index = BM25ToolIndex(cjk="jieba")
    index.index_tools("s", CATALOGUE)
    assert search(index, "查询天气")[0] == "query_city_weather"


def test_bm25_name_outweighs_description() -> None:
    index = BM25ToolIndex()
    index.index_tools(
        "s",
        [ToolReference("convert", None, "currency rates"), ToolReference("currency", None, "x")],
    )
    assert search(index, "currency") == ["currency", "convert"]


def test_bm25_drops_tools_without_a_match_and_below_min_score() -> None:
    index = BM25ToolIndex()
    index.index_tools("s", CATALOGUE)
    assert search(index, "zebra") == []
    strict = BM25ToolIndex(min_score=1000.0)
    strict.index_tools("s", CATALOGUE)
    assert search(strict, "weather") == []


@pytest.mark.parametrize(
    ("options", "message"),
    [({"k1": -1}, "k1"), ({"b": 2}, "b must be"), ({"min_score": -1}, "min_score")],
)
def test_bm25_rejects_bad_parameters(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BM25ToolIndex(**options)  # type: ignore[arg-type]


# -- sessions, shared by every index ---------------------------------------------------------


def all_indexes() -> list[SessionToolIndex[object]]:
    return [
        RegexToolIndex(),
        BM25ToolIndex(),
        VectorToolIndex(BagOfWordsModel()),
        HybridToolIndex(BagOfWordsModel()),
    ]


@pytest.mark.parametrize("index", all_indexes(), ids=lambda i: type(i).__name__)
def test_sessions_are_isolated_and_cleared(index: SessionToolIndex[object]) -> None:
    index.index_tools("a", [ToolReference("weather_a", None, "weather")])
    index.index_tool("b", ToolReference("weather_b", None, "weather"))
    assert search(index, "weather", "a") == ["weather_a"]
    assert search(index, "weather", "b") == ["weather_b"]
    assert search(index, "weather", "unknown") == []
    index.clear_index("a")
    assert search(index, "weather", "a") == []
    assert search(index, "weather", "b") == ["weather_b"]


@pytest.mark.parametrize("index", all_indexes(), ids=lambda i: type(i).__name__)
def test_reindexing_a_name_replaces_it(index: SessionToolIndex[object]) -> None:
    index.index_tools("s", [ToolReference("t", None, "weather")])
    index.index_tools("s", [ToolReference("t", None, "email")])
    assert index.size("s") == 1
    assert search(index, "email", max_results=1) == ["t"]


@pytest.mark.parametrize("index", all_indexes(), ids=lambda i: type(i).__name__)
def test_category_filter(index: SessionToolIndex[object]) -> None:
    index.index_tools(
        "s",
        [
            ToolReference("fs.ls", None, "list files", category="files"),
            ToolReference("web.ls", None, "list files online", category="web"),
        ],
    )
    assert search(index, "list files", category_filter="WEB") == ["web.ls"]


@pytest.mark.parametrize("index", all_indexes(), ids=lambda i: type(i).__name__)
def test_concurrent_sessions_never_see_each_other(index: SessionToolIndex[object]) -> None:
    errors: list[str] = []

    def worker(number: int) -> None:
        session = f"session-{number}"
        for round_ in range(5):
            index.index_tools(session, [ToolReference(f"tool_{number}_{round_}", None, "weather")])
            found = search(index, "weather", session, max_results=50)
            if any(not name.startswith(f"tool_{number}_") for name in found):
                errors.append(f"{session} saw {found}")
            if len(found) != round_ + 1:
                errors.append(f"{session} found {len(found)} tools after {round_ + 1}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_bad_requests_have_specific_errors() -> None:
    with pytest.raises(ValueError, match="session_id"):
        ToolSearchRequest(" ", "q")
    with pytest.raises(ValueError, match="max_results"):
        ToolSearchRequest("s", "q", max_results=0)
    with pytest.raises(ValueError, match="tool_name"):
        ToolReference("", None, "x")
    with pytest.raises(TypeError, match="ToolReference"):
        RegexToolIndex().index_tools("s", ["not a reference"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="session_id"):
        RegexToolIndex().index_tools("", [])


@settings(max_examples=200, deadline=None)
@given(query=st.text())
def test_any_query_is_safe_for_the_lexical_indexes(query: str) -> None:
    pattern = query_to_pattern(query)
    re.compile(pattern)
    assert len(pattern) <= 200 or pattern.count("|") == 0
    for index in (_REGEX, _BM25):
        assert len(search(index, query)) <= 10


_REGEX = RegexToolIndex(cjk="bigram")
_REGEX.index_tools("s", CATALOGUE)
_BM25 = BM25ToolIndex()
_BM25.index_tools("s", CATALOGUE)


# -- vector and hybrid -----------------------------------------------------------------------


def test_vector_index_embeds_an_unchanged_catalogue_once_across_sessions() -> None:
    model = BagOfWordsModel()
    index = VectorToolIndex(model)
    index.index_tools("a", CATALOGUE)
    assert search(index, "weather for a city", "a")[0] == "get_weather"
    assert len(model.embedded) == len(CATALOGUE)
    index.index_tools("b", CATALOGUE)
    index.clear_index("a")
    index.index_tools("a", CATALOGUE)
    search(index, "weather", "a")
    search(index, "weather", "b")
    assert len(model.embedded) == len(CATALOGUE)
    index.index_tools("a", [ToolReference("new_tool", None, "brand new")])
    search(index, "weather", "a")
    assert len(model.embedded) == len(CATALOGUE) + 1


def test_vector_similarity_threshold() -> None:
    index = VectorToolIndex(BagOfWordsModel(), similarity_threshold=0.99)
    index.index_tools("s", CATALOGUE)
    assert search(index, "zebra") == []
    with pytest.raises(ValueError, match="similarity_threshold"):
        VectorToolIndex(BagOfWordsModel(), similarity_threshold=2)


def test_vector_nearest_is_the_top_of_every_cosine_ties_in_catalogue_order() -> None:
    model = BagOfWordsModel()
    # Duplicated descriptions tie: the earlier tool ranks first, also at the cut.
    descriptions = ["weather city", "weather city", "send invoice", "weather", "city map"] * 3
    tools = [ToolReference(f"tool{i}", None, text) for i, text in enumerate(descriptions)]
    index = VectorToolIndex(model, document_text=lambda reference: reference.summary)
    index.index_tools("s", tools)
    index.build("s")
    snapshot = index._snapshot("s")
    assert snapshot is not None
    cosines = np.vecdot(model.embed_documents(descriptions), model.embed_query("weather city"))
    for count, allowed in ((4, None), (7, None), (3, {2, 3, 4, 8, 13})):
        found = index.nearest(snapshot[0], "weather city", count, allowed)
        candidates = sorted(allowed) if allowed is not None else range(len(tools))
        expected = sorted(candidates, key=lambda p: (-cosines[p], p))[:count]
        assert found.positions.tolist() == expected
        assert np.allclose(found.scores, cosines[expected])
    blank = index.nearest(snapshot[0], "  ", 3, {9, 4, 6, 1})
    assert blank.ranked() == [(1, 0.0), (4, 0.0), (6, 0.0)]


_VECTOR_WORDS = ["weather", "city", "forecast", "send", "email", "order", "status", "map"]


class DenseModel:
    """A text's vector: 384 Gaussian numbers seeded by the text, normalised. Dense, as real
    embeddings are: a dot product then rounds differently when summed in another order (a
    matrix product), which sparse bag-of-words vectors rarely show."""

    model_id = "test/dense"
    dimensions = 384

    def _vector(self, text: str) -> Vectors:
        seed = int(hashlib.md5(text.encode()).hexdigest(), 16) % 2**32
        vector = np.random.default_rng(seed).standard_normal(self.dimensions)
        return (vector / np.linalg.norm(vector)).astype(np.float32)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return np.stack([self._vector(text) for text in texts]).reshape(-1, self.dimensions)

    def embed_query(self, text: str) -> Vectors:
        return self._vector(text)


@settings(max_examples=100, deadline=None)
@given(
    descriptions=phrases(_VECTOR_WORDS, max_words=4, max_count=12),
    queries=st.lists(
        st.sampled_from(["", "  "])
        | phrases(_VECTOR_WORDS, max_words=3, max_count=1).map(" ".join),
        min_size=1,
        max_size=5,
    ),
    count=st.integers(1, 14),
    allowed=st.none() | st.sets(st.integers(0, 11), min_size=1),
)
def test_vector_nearest_each_is_nearest_of_each_query_bit_for_bit(
    descriptions: list[str], queries: list[str], count: int, allowed: set[int] | None
) -> None:
    # One pass over the matrix for all the queries, blank ones among them, gives each query's
    # positions and cosines exactly as one query at a time does.
    tools = [ToolReference(f"tool{i}", None, text) for i, text in enumerate(descriptions)]
    index = VectorToolIndex(DenseModel(), document_text=lambda reference: reference.summary)
    index.index_tools("s", tools)
    index.build("s")
    snapshot = index._snapshot("s")
    assert snapshot is not None
    if allowed is not None:
        allowed = {position for position in allowed if position < len(tools)} or {0}
    together = index.nearest_each(snapshot[0], queries, count, allowed)
    alone = [index.nearest(snapshot[0], query, count, allowed) for query in queries]
    assert [n.positions.tolist() for n in together] == [n.positions.tolist() for n in alone]
    assert [n.scores.tobytes() for n in together] == [n.scores.tobytes() for n in alone]


def test_hybrid_finds_what_either_side_finds() -> None:
    # "forecast" is a synonym of "weather" for the fake model only: the vector side finds it.
    model = BagOfWordsModel(aliases={"forecast": "weather"})
    index = HybridToolIndex(model)
    index.index_tools("s", CATALOGUE)
    index.build("s")  # waits for the embeddings
    assert search(index, "forecast")[0] in {"get_weather", "query_city_weather"}
    assert search(index, "math.factorial")[0] == "math.factorial"
    assert index.search(ToolSearchRequest("s", "forecast")).search_type == "HybridToolIndex"


class TailCuttingModel(RecordingModel):
    """Cuts a query to its last tokens itself, as the bundled model does (here a token is a
    space-separated chunk)."""

    def query_tail(self, text: str, max_tokens: int) -> str:
        return " ".join(text.split()[-max_tokens:])


def test_hybrid_embeds_the_end_of_a_long_query_and_matches_all_of_it_lexically() -> None:
    model = TailCuttingModel()
    index = HybridToolIndex(model, query_tokens=4, background_embedding=False)
    index.index_tools("s", CATALOGUE)
    query = "math.factorial please, and then tell me the weather in Paris today"
    found = search(index, query, max_results=10)
    assert model.queries == ["weather in Paris today"]  # cut by the model
    assert "math.factorial" in found  # BM25 read the whole query
    assert "get_weather" in found
    whole = TailCuttingModel()
    untruncated = HybridToolIndex(whole, query_tokens=None, background_embedding=False)
    untruncated.index_tools("s", CATALOGUE)
    search(untruncated, query)
    assert whole.queries == [query]


def test_vector_index_embeds_at_most_the_end_of_a_long_query() -> None:
    # A pasted document as the query would take seconds to embed, or be refused by an
    # embedding endpoint; the index alone keeps a whole window of the model.
    model = TailCuttingModel()
    index = VectorToolIndex(model, query_tokens=4)
    index.index_tools("s", CATALOGUE)
    assert search(index, "a long text about nothing, then: weather in Paris today")[0] in {
        "get_weather",
        "query_city_weather",
    }
    assert model.queries == ["weather in Paris today"]
    counting = RecordingModel()  # no tokenizer: the last words, a CJK character one each
    index = VectorToolIndex(counting, query_tokens=3)
    index.index_tools("s", CATALOGUE)
    search(index, "please find the 城市天气")
    assert counting.queries == ["市天气"]
    whole = RecordingModel()
    index = VectorToolIndex(whole)  # default 512 tokens: a 600-word query loses its start
    index.index_tools("s", CATALOGUE)
    search(index, " ".join(f"w{i}" for i in range(600)))
    assert whole.queries[0].split() == [f"w{i}" for i in range(88, 600)]
    untruncated = RecordingModel()
    index = VectorToolIndex(untruncated, query_tokens=None)
    index.index_tools("s", CATALOGUE)
    search(index, "one two three four five")
    assert untruncated.queries == ["one two three four five"]
    with pytest.raises(ValueError, match="query_tokens must be at least 1 or None, got 0"):
        VectorToolIndex(BagOfWordsModel(), query_tokens=0)


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("one two three four", 2, "three four"),
        ("one two", 2, "one two"),
        ("please find 城市天气!", 3, "市天气!"),
        ("get_weather(city) now", 2, "city) now"),
        ("   ", 1, "   "),
    ],
)
def test_last_words(text: str, limit: int, expected: str) -> None:
    assert last_words(text, limit) == expected


def test_last_words_rejects_a_limit_under_one() -> None:
    with pytest.raises(ValueError, match="limit must be at least 1, got 0"):
        last_words("text", 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("write 'Hello there' into notes.txt", "write   into notes.txt"),
        ("Kelly's report and the team's plan", "Kelly's report and the team's plan"),
        ('post "we shipped!" and “a note”', "post   and  "),
        ("查看「年度报告」的内容", "查看 的内容"),
        ("run `ls -la` then ‘stop’", "run   then  "),
        ('"get_weather"', '"get_weather"'),  # nothing else: kept
        ("an 'unclosed quote", "an 'unclosed quote"),
    ],
)
def test_without_quoted(text: str, expected: str) -> None:
    assert without_quoted(text) == expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab 天气'\"“”「」`\n.s"), max_size=40))
def test_without_quoted_only_takes_quoted_text_away(text: str) -> None:
    rest = without_quoted(text)
    if not set(text) & set("'\"“”「」`"):
        assert rest == text
    # Spans become one space each: nothing else changes, nothing is added.
    assert set(rest) <= set(text) | {" "}
    assert len(rest.replace(" ", "")) <= len(text.replace(" ", ""))
    assert cjk_language(text) in {None, "zh", "ja", "ko"}


def test_hybrid_embeds_the_query_without_its_quoted_values_and_matches_them_lexically() -> None:
    model = RecordingModel()
    index = HybridToolIndex(model, background_embedding=False)
    index.index_tools("s", CATALOGUE)
    found = search(index, "please run 'math.factorial' and then check the weather in Paris")
    assert model.queries == ["please run   and then check the weather in Paris"]
    assert found[0] == "math.factorial"  # BM25 read the quoted name
    assert "get_weather" in found[:3]
    quoting = RecordingModel()
    kept = HybridToolIndex(quoting, embed_quoted=True, background_embedding=False)
    kept.index_tools("s", CATALOGUE)
    search(kept, "say 'hi'")
    assert quoting.queries == ["say 'hi'"]


@pytest.mark.parametrize(
    ("text", "min_words", "expected"),
    [
        (
            "book a flight\nand a hotel in Paris for two nights",
            4,
            "and a hotel in Paris for two nights",
        ),
        ("book a flight\nthanks", 4, "book a flight\nthanks"),  # too short to be the request
        ("one line with many words in it", 2, "one line with many words in it"),
        ("查询天气\n\n  \n帮我预订明天的酒店\n", 6, "帮我预订明天的酒店"),  # blank lines skipped
    ],
)
def test_last_line(text: str, min_words: int, expected: str) -> None:
    assert last_line(text, min_words) == expected


def test_hybrid_embeds_the_last_line_when_it_says_enough() -> None:
    model = RecordingModel()
    index = HybridToolIndex(model, last_line_words=4, background_embedding=False)
    index.index_tools("s", CATALOGUE)
    found = search(index, "what is the factorial of 5\nnow tell me the weather in Paris")
    assert model.queries == ["now tell me the weather in Paris"]
    assert "math.factorial" in found  # BM25 read every line
    index = HybridToolIndex(model, last_line_words=None, background_embedding=False)
    index.index_tools("s", CATALOGUE)
    search(index, "factorial\nnow tell me the weather in Paris")
    assert model.queries[-1] == "factorial\nnow tell me the weather in Paris"
    with pytest.raises(ValueError, match="last_line_words must be at least 1 or None, got 0"):
        HybridToolIndex(model, last_line_words=0)
    with pytest.raises(ValueError, match="min_words must be at least 1, got 0"):
        last_line("text", 0)


def test_hybrid_counts_words_for_a_model_without_a_tokenizer() -> None:
    model = RecordingModel()
    index = HybridToolIndex(model, query_tokens=3, background_embedding=False)
    index.index_tools("s", CATALOGUE)
    search(index, "please find the 城市天气")
    assert model.queries == ["市天气"]  # CJK characters count one word each


def test_hybrid_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="query_tokens must be at least 1 or None, got 0"):
        HybridToolIndex(BagOfWordsModel(), query_tokens=0)
    with pytest.raises(ValueError, match="weights"):
        HybridToolIndex(BagOfWordsModel(), bm25_weight=0, vector_weight=0)
    with pytest.raises(ValueError, match="either embedding_model or vector"):
        HybridToolIndex(BagOfWordsModel(), vector=VectorToolIndex(BagOfWordsModel()))


def test_hybrid_with_the_bundled_model_on_chinese_and_english_tools() -> None:
    index = HybridToolIndex(E5EmbeddingModel())
    index.index_tools(
        "s",
        [
            ToolReference("get_weather", None, "Get the current weather for a city"),
            ToolReference("send_email", None, "Send an email to a contact"),
            ToolReference("query_weather_zh", None, "查询城市当前天气"),
            ToolReference("book_hotel", None, "预订酒店房间"),
        ],
    )
    index.build("s")
    assert search(index, "查询天气", max_results=2)[0] == "query_weather_zh"
    assert search(index, "我想订一间酒店", max_results=1) == ["book_hotel"]
    assert search(index, "will it rain in Paris tomorrow?", max_results=2)[0] in {
        "get_weather",
        "query_weather_zh",
    }
    assert search(index, "write to my colleague", max_results=1) == ["send_email"]
    scores = index.search(ToolSearchRequest("s", "email")).tool_references
    assert all(np.isfinite(r.relevance_score or 0.0) for r in scores)


def _reference_regex_scores(tools: list[ToolReference], query: str) -> dict[str, float]:
    """Spring's scoring, tool by tool with the regular expression: the definition."""
    pattern = re.compile(query_to_pattern(query, cjk="bigram"))
    scores: dict[str, float] = {}
    for tool in tools:
        score = 0.0
        for text, per_match, bonus in ((tool.tool_name, 2.0, 1.0), (tool.summary, 1.0, 0.5)):
            found = [m.start() for m in pattern.finditer(text)]
            if found:
                score += per_match * len(found) + bonus / (1.0 + 0.1 * found[0])
        if score > 0:
            scores[tool.tool_name] = score
    return scores


_WORDS = st.sampled_from(
    [
        *("get", "weather", "getweather", "aa", "aaa", "a", "Ab", "天气", "İx", "ß"),
        *("get_weather", "x-ray", "(aa),", "e.g.", "tab\tstop", "line\nbreak", "a/b"),
        # longer than the 16 characters the suffix array sorts on, sharing those 16
        *("abcdefghijklmnopqrstuv", "abcdefghijklmnopXYZ", "ABCDEFGHIJKLMNOPQRSTUV"),
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    descriptions=st.lists(st.lists(_WORDS, max_size=6).map(" ".join), min_size=1, max_size=6),
    query=st.lists(_WORDS, min_size=1, max_size=4).map(" ".join),
)
def test_regex_fast_matching_equals_the_regular_expression(
    descriptions: list[str], query: str
) -> None:
    tools = [
        ToolReference(f"{d.split(' ')[0] or 'x'}Tool{i}", None, d)
        for i, d in enumerate(descriptions)
    ]
    index = RegexToolIndex(cjk="bigram")
    index.index_tools("s", tools)
    found = index.search(ToolSearchRequest("s", query, max_results=50)).tool_references
    assert {r.tool_name: r.relevance_score for r in found} == pytest.approx(
        _reference_regex_scores(tools, query)
    )


def test_build_ahead_of_the_first_search_embeds_once() -> None:
    model = BagOfWordsModel()
    index = HybridToolIndex(model)
    index.index_tools("s", CATALOGUE)
    index.build("s")
    assert len(model.embedded) == len(CATALOGUE)
    assert search(index, "weather")[0] in {"get_weather", "query_city_weather"}
    assert len(model.embedded) == len(CATALOGUE)


class GatedModel(BagOfWordsModel):
    """Embeds documents only once ``gate`` is set (or fails when ``error`` is set)."""

    def __init__(self, error: Exception | None = None) -> None:
        super().__init__(aliases={"forecast": "weather"})
        self.gate = threading.Event()
        self.error = error

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        assert self.gate.wait(10), "the test never opened the gate"
        if self.error is not None:
            raise self.error
        return super().embed_documents(texts)


def test_hybrid_searches_with_bm25_while_the_catalogue_is_embedded() -> None:
    model = GatedModel()
    index = HybridToolIndex(model)
    index.index_tools("s", CATALOGUE)
    assert search(index, "forecast") == []  # the synonym needs the vectors, not there yet
    assert search(index, "weather")[0] == "get_weather"  # BM25 answers meanwhile
    model.gate.set()
    index.build("s")
    assert search(index, "forecast")[0] in {"get_weather", "query_city_weather"}


def test_hybrid_falls_back_to_bm25_when_embedding_fails(caplog: pytest.LogCaptureFixture) -> None:
    model = GatedModel(error=RuntimeError("endpoint down"))
    index = HybridToolIndex(model)
    index.index_tools("s", CATALOGUE)
    model.gate.set()
    with pytest.raises(RuntimeError, match="endpoint down"):
        index.build("s")
    assert search(index, "weather")[0] == "get_weather"
    assert any("BM25 only" in record.getMessage() for record in caplog.records)


_ENDS_WHILE_EMBEDDING = """
import atexit, time
import numpy as np
from tooluse._fork import ThreadPool
from tooluse.search import HybridToolIndex, ToolReference, ToolSearchRequest

POOL = ThreadPool(1, "documents")  # as the bundled model hands texts to its workers
embedded = []

def vector(text):
    time.sleep(0.002)
    embedded.append(text)
    return np.ones(4, dtype=np.float32) / 2

class Model:
    model_id, dimensions = "test/pooled", 4
    def embed_documents(self, texts):
        return np.stack(list(POOL.map(vector, texts)))
    def embed_query(self, text):
        return np.ones(4, dtype=np.float32) / 2

atexit.register(lambda: print("embedded", len(embedded)))
index = HybridToolIndex(Model())
index.index_tools("s", [ToolReference(f"tool_{n}", None, f"does thing {n}") for n in range(800)])
print(index.search(ToolSearchRequest("s", "thing 7", 1)).tool_names)
"""


def test_a_program_that_ends_while_its_catalogue_embeds_exits_quietly() -> None:
    # At exit the pools refuse new work: the embedding stops after the batch under way,
    # which is the program ending, not a failure to report with a traceback.
    done = subprocess.run(
        [sys.executable, "-c", _ENDS_WHILE_EMBEDDING],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == "['tool_7']"
    assert 0 < int(lines[1].removeprefix("embedded ")) < 800  # stopped part way


class QueryFailingModel(BagOfWordsModel):
    def embed_query(self, text: str) -> Vectors:
        raise RuntimeError("rate limited")


def test_hybrid_ranks_with_bm25_when_the_query_fails_to_embed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    index = HybridToolIndex(QueryFailingModel(), background_embedding=False)
    index.index_tools("s", CATALOGUE)
    index.build("s")
    assert search(index, "weather")[0] == "get_weather"
    failures = [r for r in caplog.records if "query failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None
    assert "rate limited" in str(failures[0].exc_info[1])


def test_hybrid_can_embed_in_the_foreground() -> None:
    index = HybridToolIndex(
        BagOfWordsModel(aliases={"forecast": "weather"}), background_embedding=False
    )
    index.index_tools("s", CATALOGUE)
    assert search(index, "forecast")[0] in {"get_weather", "query_city_weather"}


def test_embedded_texts_carry_parameters_with_or_without_their_descriptions() -> None:
    schema = {
        "type": "object",
        "properties": {
            "cityName": {"type": "string", "description": "The city, e.g. Paris"},
            "unit": {"type": "string"},
        },
    }
    tool = ToolReference("get_weather", None, "Current weather.", schema)
    assert embedding_text(tool) == (
        "get weather: Current weather. Parameters: city name: The city, e.g. Paris; unit"
    )
    assert (
        compact_embedding_text(tool) == "get weather: Current weather. Parameters: city name; unit"
    )
    assert embedding_text(ToolReference("ping", None, "")) == "ping:"


@pytest.mark.parametrize(
    ("description", "expected", "compact"),
    [
        (
            "根据城市查询当前天气。",
            "根据城市查询当前天气。 参数：城市名称；unit",
            "根据城市查询当前天气。 参数：city name；unit",
        ),
        (
            "都市の現在の天気を調べる",
            "都市の現在の天気を調べる パラメータ：城市名称；unit",
            "都市の現在の天気を調べる パラメータ：city name；unit",
        ),
        (
            "도시의 현재 날씨를 조회합니다",
            "도시의 현재 날씨를 조회합니다 매개변수: 城市名称; unit",
            "도시의 현재 날씨를 조회합니다 매개변수: city name; unit",
        ),
        (  # mostly English: the English form
            "Current weather (当前天气) for a city",
            "get weather: Current weather (当前天气) for a city"
            " Parameters: city name: 城市名称; unit",
            "get weather: Current weather (当前天气) for a city Parameters: city name; unit",
        ),
    ],
)
def test_a_tool_described_in_a_cjk_language_is_embedded_without_english_identifiers(
    description: str, expected: str, compact: str
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "cityName": {"type": "string", "description": "城市名称"},
            "unit": {"type": "string"},
        },
    }
    tool = ToolReference("get_weather", None, description, schema)
    assert embedding_text(tool) == expected
    assert compact_embedding_text(tool) == compact


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("根据用户的地理位置发送定制化信息。", "zh"),
        ("查询FTP服务器上的目录", "zh"),
        ("東京の天気を調べる", "ja"),
        ("서울 날씨 조회", "ko"),
        ("Get the weather (天气)", None),
        ("plain English", None),
        ("", None),
    ],
)
def test_cjk_language(text: str, language: str | None) -> None:
    assert cjk_language(text) == language


def test_enum_values_are_searched_as_choices_but_not_embedded() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "array", "items": {"type": "string", "enum": ["monday", 7]}},
            "filter": {"type": "object", "properties": {"sort": {"enum": ["price", None]}}},
        },
    }
    tool = ToolReference("get_weather", None, "Current weather.", schema)
    assert list(parameter_choices(schema)) == ["celsius", "fahrenheit", "monday", "7", "price"]
    assert tool_document(tool).choices == "celsius fahrenheit monday 7 price"
    assert "fahrenheit" not in embedding_text(tool)
    assert list(parameter_choices({"properties": {"x": "not a schema"}})) == []
    index = BM25ToolIndex()
    other = ToolReference("convert_units", None, "Convert a temperature.")
    index.index_tools("s", [other, tool])
    assert search(index, "in fahrenheit please") == ["get_weather"]
    without = BM25ToolIndex(boosts=FieldBoosts(choices=0))
    without.index_tools("s", [other, tool])
    assert search(without, "in fahrenheit please") == []


# -- toolsets --------------------------------------------------------------------------------


def _toolsets(categories: list[str | None], max_size: int = 30, min_size: int = 2) -> Toolsets:
    references = [ToolReference(f"t{i}", None, "", category=c) for i, c in enumerate(categories)]
    return Toolsets.of(references, min_size, max_size)


def test_a_toolset_member_gets_the_best_score_of_its_siblings_not_its_own() -> None:
    toolsets = _toolsets(["fs", "fs", "fs", None, "web", "Web"])
    scores = np.array([0.9, 0.2, 0.0, 0.8, 0.0, 0.4], dtype=np.float32)
    toolsets.boost(scores, 0.5)
    # fs: the best (0.9) gets its runner-up's 0.2; the others get 0.9. No category: nothing.
    # "web" and "Web" are one toolset.
    np.testing.assert_allclose(scores, [1.0, 0.65, 0.45, 0.8, 0.2, 0.4])


def test_tied_best_members_lift_each_other_and_weight_zero_changes_nothing() -> None:
    toolsets = _toolsets(["a", "a", "a"])
    scores = np.array([0.5, 0.5, 0.1], dtype=np.float32)
    toolsets.boost(scores, 0.0)
    np.testing.assert_allclose(scores, [0.5, 0.5, 0.1])
    toolsets.boost(scores, 1.0)
    np.testing.assert_allclose(scores, [1.0, 1.0, 0.6])


def test_categories_smaller_or_larger_than_a_toolset_get_nothing() -> None:
    toolsets = _toolsets(["solo", "big", "big", "big"], max_size=2)
    scores = np.array([0.5, 0.9, 0.1, 0.1], dtype=np.float32)
    toolsets.boost(scores, 1.0)
    np.testing.assert_allclose(scores, [0.5, 0.9, 0.1, 0.1])
    # Alternatives for one need, not a suite: a pair under a minimum of 3.
    toolsets = _toolsets(["pair", "pair", "suite", "suite", "suite"], min_size=3)
    scores = np.array([0.9, 0.1, 0.8, 0.1, 0.0], dtype=np.float32)
    toolsets.boost(scores, 1.0)
    np.testing.assert_allclose(scores, [0.9, 0.1, 0.9, 0.9, 0.8])
    empty = _toolsets([])
    nothing = np.zeros(0, dtype=np.float32)
    empty.boost(nothing, 1.0)


FILE_TOOLSET = [
    ToolReference("mv", None, "Move a file to another directory", category="files"),
    ToolReference("cd", None, "Change the current working folder", category="files"),
]


def test_hybrid_lifts_the_sibling_a_turn_does_not_name() -> None:
    catalogue = [
        *FILE_TOOLSET,
        ToolReference("rename_photo", None, "Rename a photo in the album"),
        ToolReference("move_meeting", None, "Move a meeting to another day"),
    ]
    query = "move report.txt into the archive directory"
    for weight, expected_second in ((0.0, "move_meeting"), (0.5, "cd")):
        index = HybridToolIndex(BagOfWordsModel(), toolset_weight=weight, toolset_min_size=2)
        index.index_tools("s", catalogue)
        index.build("s")
        assert search(index, query)[:2] == ["mv", expected_second]


def test_hybrid_rejects_bad_toolset_parameters() -> None:
    with pytest.raises(ValueError, match="toolset_weight must be >= 0, got -1"):
        HybridToolIndex(BagOfWordsModel(), toolset_weight=-1)
    with pytest.raises(ValueError, match="toolset_min_size must be at least 2, got 1"):
        HybridToolIndex(BagOfWordsModel(), toolset_min_size=1)
    with pytest.raises(ValueError, match=r"toolset_size must be at least toolset_min_size \(8\)"):
        HybridToolIndex(BagOfWordsModel(), toolset_size=5)


@settings(max_examples=300, deadline=None)
@given(
    categories=st.lists(st.sampled_from([None, "a", "B", "b", "c", "d"]), max_size=14),
    data=st.data(),
    weight=st.sampled_from([0.0, 0.5, 1.0]),
    max_size=st.integers(2, 4),
    min_size=st.integers(2, 3),
)
def test_toolset_boost_equals_the_plain_definition(
    categories: list[str | None], data: st.DataObject, weight: float, max_size: int, min_size: int
) -> None:
    values = data.draw(
        st.lists(
            st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9]),
            min_size=len(categories),
            max_size=len(categories),
        )
    )
    scores = np.array(values, dtype=np.float32)
    _toolsets(categories, max_size, min_size).boost(scores, weight)
    expected = np.array(values, dtype=np.float32)
    for position, category in enumerate(categories):
        if category is None:
            continue
        siblings = [
            values[other]
            for other, c in enumerate(categories)
            if c is not None and c.casefold() == category.casefold() and other != position
        ]
        if siblings and min_size <= len(siblings) + 1 <= max_size:
            expected[position] += weight * max(siblings)
    np.testing.assert_allclose(scores, expected, rtol=1e-6)


# -- HybridToolIndex: the two fusions ------------------------------------------------------

_WORDS = ["weather", "city", "email", "send", "file", "move", "rain", "mail"]


@settings(max_examples=150, deadline=None)
@given(
    texts=phrases(_WORDS, max_words=4, max_count=9),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join),
    candidates=st.integers(1, 5),
    limit=st.integers(1, 10),
    vector_weight=st.sampled_from([None, 0.0, 0.3, 1.0]),
)
def test_score_fusion_sums_the_scaled_scores_of_both_sides(
    texts: list[str], query: str, candidates: int, limit: int, vector_weight: float | None
) -> None:
    model = BagOfWordsModel(aliases={"rain": "weather", "mail": "email"})
    tools = [ToolReference(f"tool{i}", None, text) for i, text in enumerate(texts)]
    index = HybridToolIndex(
        model,
        candidates=candidates,
        vector_weight=vector_weight,
        query_tokens=None,
        background_embedding=False,
    )
    index.index_tools("s", tools)
    found = index.search(ToolSearchRequest("s", query, max_results=limit)).tool_references
    # The reference, from each side on its own.
    lexical_index = BM25ToolIndex()
    lexical_index.index_tools("s", tools)
    lexical = dict.fromkeys(range(len(tools)), 0.0)
    for reference in lexical_index.search(
        ToolSearchRequest("s", query, max_results=20)
    ).tool_references:
        lexical[int(reference.tool_name[4:])] = reference.relevance_score or 0.0
    vectors = model.embed_documents([embedding_text(t) for t in tools]).astype(np.float64)
    cosines = vectors @ model.embed_query(query).astype(np.float64)
    ordered = sorted(cosines, reverse=True)
    top, zero = ordered[0], ordered[min(candidates, len(tools)) - 1]
    weight = 0.43 if vector_weight is None else vector_weight
    best = max(lexical.values())

    def expected(i: int) -> float:
        score = lexical[i] / best if best > 0 else 0.0
        if top > zero + 1e-6:
            score += weight * max(cosines[i] - zero, 0.0) / (top - zero)
        return score

    depth = max(candidates, limit)
    cut = ordered[depth - 1] if depth <= len(tools) else -2.0
    assert len(found) <= limit
    scores = [r.relevance_score or 0.0 for r in found]
    assert scores == sorted(scores, reverse=True)
    for reference in found:
        i = int(reference.tool_name[4:])
        # Found: a BM25 match, or among the vector side's best `depth` (ties at the cut
        # may fall either way).
        assert lexical[i] > 0 or (weight > 0 and cosines[i] >= cut - 1e-6)
        assert reference.relevance_score == pytest.approx(expected(i), abs=1e-4)
    certain = [i for i in lexical if lexical[i] > 0 or (weight > 0 and cosines[i] > cut + 1e-6)]
    assert len(found) >= min(limit, len(certain))


def test_score_fusion_keeps_a_decisive_margin_that_rank_fusion_loses() -> None:
    # BM25 puts the calendar a little ahead (0.50 against 0.41: the mailer's text is
    # longer); the embeddings put the mailer far ahead (cosine 0.82 against 0.41: "letter",
    # "post" and "inbox" mean "email" to the fake model). Ranks only see first and second.
    model = BagOfWordsModel(aliases={"letter": "email", "post": "email", "inbox": "email"})
    tools = [
        ToolReference("calendar", None, "meeting invite"),
        ToolReference("mailer", None, "meeting notes letter post inbox"),
        ToolReference("other", None, "stock price"),
    ]
    by_fusion = {}
    for fusion in ("scores", "ranks"):
        index = HybridToolIndex(model, fusion=fusion, background_embedding=False)
        index.index_tools("s", tools)
        by_fusion[fusion] = search(index, "meeting email", max_results=2)
    assert by_fusion == {"scores": ["mailer", "calendar"], "ranks": ["calendar", "mailer"]}


def test_score_fusion_returns_what_either_side_found_and_the_siblings_it_lifted() -> None:
    tools = [
        *FILE_TOOLSET,
        ToolReference("stocks", None, "Stock price quotes"),
        ToolReference("poem", None, "Write a poem"),
    ]
    for vector_weight, expected in ((0.0, ["mv", "cd"]), (0.43, ["mv", "cd", "stocks", "poem"])):
        index = HybridToolIndex(
            BagOfWordsModel(), vector_weight=vector_weight, background_embedding=False
        )
        index.index_tools("s", tools)
        # BM25 matches mv, which lifts cd; the vector side ranks every tool (up to
        # max_results), as a vector index does.
        assert search(index, "move the file") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Convert 50 m to km. Then plan a drone flight.",
            ["Convert 50 m to km", "Then plan a drone flight"],
        ),
        # Not a sentence end: a decimal point, a dotted name.
        (
            "Set version 3.5 of math.pi as the default now",
            ["Set version 3.5 of math.pi as the default now"],
        ),
        (
            "book a flight to Paris\nthanks\nand a hotel near the station",
            ["book a flight to Paris", "and a hotel near the station"],
        ),
        (
            "我需要转换一下单位？另外，我还想看看无人机的飞行路径。谢谢！",
            ["我需要转换一下单位", "另外，我还想看看无人机的飞行路径"],
        ),
        (
            "Is it raining in Paris; and in Rome, too?",
            ["Is it raining in Paris", "and in Rome, too"],
        ),
    ],
)
def test_clauses(text: str, expected: list[str]) -> None:
    assert clauses(text, 4) == expected


def test_clauses_rejects_a_minimum_under_one() -> None:
    with pytest.raises(ValueError, match="min_words must be at least 1, got 0"):
        clauses("text", 0)


DRONE_TOOLS = [
    ToolReference("converter", None, "Convert a measurement to another unit"),
    ToolReference(
        "planner",
        None,
        "Plan a drone flight path from a start point to a destination at an altitude",
    ),
    ToolReference(
        "replay", None, "Replay the path a drone flew from its start point to its destination"
    ),
    ToolReference("weather", None, "Wind at an altitude for a drone flight"),
    ToolReference("currency", None, "Convert money into another currency"),
]


def bm25_side_of_hybrid(tools: list[ToolReference], clause_weight: float) -> HybridToolIndex:
    """A hybrid index over ``tools`` whose vector side weighs nothing, the requests' shares
    off (the sentence scores alone)."""
    index = HybridToolIndex(
        BagOfWordsModel(),
        vector_weight=0.0,
        clause_weight=clause_weight,
        request_share=0.0,
        background_embedding=False,
    )
    index.index_tools("s", tools)
    return index


CIRCLE_AND_HOTEL = [
    ToolReference(
        "circle_area",
        None,
        "Calculate the area, circumference and diameter of a circle from its radius",
    ),
    ToolReference(
        "circle_properties",
        None,
        "Area, circumference and diameter of a circle, calculated from the radius",
    ),
    ToolReference(
        "geometry_circle",
        None,
        "Circle geometry: calculate area, circumference, diameter from a radius",
    ),
    ToolReference("book_hotel", None, "Book a hotel"),
    ToolReference("send_email", None, "Send an email"),
]


@pytest.mark.parametrize("clause_weight", [0.0, 0.25])
def test_each_request_of_a_task_gets_its_share_of_the_ranking(clause_weight: float) -> None:
    # The first request has near-duplicate tools that match many of its words; once one of
    # them is taken, the request is covered and the second request's tool comes next.
    query = (
        "Calculate the area, circumference and diameter of a circle from its radius of 5 cm. "
        "Then book a hotel."
    )
    found = {}
    for share in (0.5, 0.0):
        index = HybridToolIndex(
            BagOfWordsModel(),
            vector_weight=0.0,
            clause_weight=clause_weight,
            request_share=share,
            background_embedding=False,
        )
        index.index_tools("s", CIRCLE_AND_HOTEL)
        found[share] = search(index, query, max_results=2)
    assert found[0.5][1] == "book_hotel"
    assert found[0.0][0] == found[0.5][0]  # the whole task's best stays first
    assert "book_hotel" not in found[0.0]
    # Within a category, and in a catalogue smaller than a request's candidates.
    category = [ToolReference(t.tool_name, None, t.summary, None, "kit") for t in CIRCLE_AND_HOTEL]
    index = HybridToolIndex(BagOfWordsModel(), vector_weight=0.0, background_embedding=False)
    index.index_tools("s", [*category, ToolReference("hotel_deals", None, "Book a hotel")])
    assert search(index, query, max_results=2, category_filter="kit")[1] == "book_hotel"
    with pytest.raises(ValueError, match=r"request_share must be between 0 and 1, got 1\.5"):
        HybridToolIndex(BagOfWordsModel(), request_share=1.5)


def test_hybrid_scores_each_sentence_so_a_two_part_request_finds_both_tools() -> None:
    # The second sentence has most of the words, so on the whole query BM25 ranks every drone
    # tool above the converter; scaled within its own sentence, the converter is first.
    query = (
        "Convert a unit: 50 meters to kilometers. Then plan a drone flight path from the start "
        "point to the destination at an altitude of 120 meters."
    )
    found = {
        weight: search(bm25_side_of_hybrid(DRONE_TOOLS, weight), query, max_results=3)
        for weight in (0.25, 0.0)
    }
    assert found == {
        0.25: ["planner", "replay", "converter"],
        0.0: ["planner", "replay", "weather"],
    }
    with pytest.raises(ValueError, match=r"clause_weight must be >= 0, got -0\.1"):
        HybridToolIndex(BagOfWordsModel(), clause_weight=-0.1)


def test_only_a_long_querys_last_32_sentences_are_scored_on_their_own() -> None:
    # A pasted document of 600 sentences took 0.4 s of BM25 at 4,000 tools when each was
    # scored; the request of a long message or conversation is at its end.
    index = bm25_side_of_hybrid(DRONE_TOOLS, 0.25)
    scored: list[int] = []
    scores = index._bm25.scores

    def counting(snapshot: object, *queries: str) -> np.ndarray:
        scored.append(len(queries))
        return scores(snapshot, *queries)

    index._bm25.scores = counting  # type: ignore[method-assign]
    # Each sentence its own (the same sentence twice is scored once).
    filler = "".join(f"The sky over the old harbour was grey on day {day}. " for day in range(200))
    query = filler + "Convert a unit: 50 meters to kilometers, please."
    assert search(index, query, max_results=1) == ["converter"]
    assert scored == [1 + 32]  # the whole query and its last 32 sentences, in one call


@settings(max_examples=100, deadline=None)
@given(
    sentences=phrases(_WORDS, max_words=6, max_count=4),
    clause_weight=st.sampled_from([0.0, 0.25, 1.0]),
)
def test_clause_scores_add_each_tools_best_scaled_sentence_score(
    sentences: list[str], clause_weight: float
) -> None:
    tools = [
        ToolReference(f"tool{i}", None, text)
        for i, text in enumerate(
            ["weather city", "send email mail", "move file", "rain weather city", "file mail"]
        )
    ]
    query = ". ".join(sentences) + "."
    index = bm25_side_of_hybrid(tools, clause_weight)
    found = index.search(ToolSearchRequest("s", query, max_results=10)).tool_references
    lexical_index = BM25ToolIndex()
    lexical_index.index_tools("s", tools)

    def scaled(text: str) -> np.ndarray:
        scores = np.zeros(len(tools))
        for reference in lexical_index.search(
            ToolSearchRequest("s", text, max_results=10)
        ).tool_references:
            scores[int(reference.tool_name[4:])] = reference.relevance_score or 0.0
        return scores / scores.max() if scores.max() > 0 else scores

    parts = [s for s in sentences if len(s.split()) >= 4]
    expected = scaled(query)
    if len(parts) >= 2 and expected.max() > 0:
        expected = expected + clause_weight * np.max([scaled(p) for p in parts], axis=0)
        expected /= expected.max()
    assert {r.tool_name: pytest.approx(r.relevance_score, abs=1e-5) for r in found} == {
        f"tool{i}": score for i, score in enumerate(expected) if score > 0
    }


def test_hybrid_rejects_an_unknown_fusion() -> None:
    with pytest.raises(ValueError, match="fusion must be 'scores' or 'ranks', got 'max'"):
        HybridToolIndex(BagOfWordsModel(), fusion="max")  # type: ignore[arg-type]


def test_a_tool_callback_becomes_the_reference_the_advisor_indexes() -> None:
    from tooluse import FunctionToolCallback

    def lookup_flight(flight_number: str, *, day: str = "today") -> str:
        """Tells where a plane is.

        Args:
            flight_number: the airline code and number, e.g. AF123
            day: the departure date
        """
        return "over Lyon"

    callback = FunctionToolCallback(lookup_flight)
    reference = ToolReference.from_callback(callback, category="travel")
    assert reference.tool_name == "lookup_flight"
    assert reference.summary == callback.definition.description
    assert reference.parameters == callback.definition.input_schema
    assert reference.category == "travel"
    index = BM25ToolIndex()
    index.index_tools("s", [reference, *WEATHER_TOOLS])
    # Found by a parameter's description alone, as when the advisor indexed it.
    found = index.search(ToolSearchRequest("s", "airline code", category_filter="travel"))
    assert found.tool_names == ["lookup_flight"]


@pytest.mark.parametrize("index", all_indexes(), ids=lambda i: type(i).__name__)
def test_category_filter_ignores_spaces_around_a_tools_category(
    index: SessionToolIndex[object],
) -> None:
    # The filter was stripped, the tools' categories were not: a tool whose category came with
    # spaces (" mail ", from a user's tool_category) could never be selected, and the error
    # listed the category the model had just asked for. A blank category is no category.
    index.index_tools(
        "s",
        [
            ToolReference("send_mail", None, "send a message", category=" Mail "),
            ToolReference("send_sms", None, "send a message", category=""),
        ],
    )
    assert search(index, "send message", category_filter="mail") == ["send_mail"]
    assert search(index, "send message", category_filter=" MAIL") == ["send_mail"]
    with pytest.raises(ValueError, match=r"the categories are \['Mail'\]"):
        search(index, "send message", category_filter="sms")


_PROPERTY_TEXT = st.lists(
    st.sampled_from(
        [
            *"abcweathrmilsend _-.()|*?\n",
            "天",
            "气",
            "查询",
            "İ",
            "ß",
            "σ",
            "get",
            "Weather",
            "mail",
        ]
    ),
    max_size=12,
).map("".join)
_PROPERTY_REFERENCE = st.builds(
    ToolReference,
    _PROPERTY_TEXT.filter(str.strip),
    st.none(),
    _PROPERTY_TEXT,
    st.sampled_from(
        [
            None,
            {},
            {"type": "object"},
            {"properties": {"city": {"description": "the weather city"}}},
            {"$ref": "#/$defs/X", "$defs": {"X": {"properties": {"q": {"type": "string"}}}}},
            {"properties": []},
            {"properties": {"x": "not a dict", "y": {"enum": ["mail", 3, None]}}},
            {"items": {"properties": {"z": {}}}},
        ]
    ),
    st.sampled_from([None, "a", "B", "b", " a ", ""]),
)
_PROPERTY_INDEXES = [
    RegexToolIndex(cjk="bigram"),
    BM25ToolIndex(),
    VectorToolIndex(BagOfWordsModel()),
    HybridToolIndex(BagOfWordsModel(), background_embedding=False),
]


@settings(max_examples=100, deadline=None)
@given(
    catalogue=st.lists(_PROPERTY_REFERENCE, max_size=8),
    other=st.lists(_PROPERTY_REFERENCE, max_size=4),
    query=_PROPERTY_TEXT,
    max_results=st.none() | st.integers(1, 12),
    category=st.none() | st.sampled_from(["a", "B", "", " ", "zz"]),
)
def test_every_index_returns_only_its_sessions_tools_best_first_within_the_limits(
    catalogue: list[ToolReference],
    other: list[ToolReference],
    query: str,
    max_results: int | None,
    category: str | None,
) -> None:
    indexed = {reference.tool_name: reference for reference in catalogue}  # a name re-indexed
    wanted = category.strip().casefold() if category and category.strip() else None
    for index in _PROPERTY_INDEXES:
        index.clear_index("mine")
        index.clear_index("other")
        index.index_tools("mine", catalogue)
        index.index_tools("other", other)
        request = ToolSearchRequest("mine", query, max_results, category)
        try:
            response = index.search(request)
        except ValueError:  # a category no tool has: explained to the model
            assert wanted is not None
            assert all((r.category or "").strip().casefold() != wanted for r in indexed.values())
            continue
        found = response.tool_references
        names = [reference.tool_name for reference in found]
        assert len(names) == len(set(names)) <= (max_results or 10)
        scores = [reference.relevance_score for reference in found]
        assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
        for reference in found:
            assert reference == indexed[reference.tool_name].scored(reference.relevance_score)
            if wanted is not None:
                assert (reference.category or "").strip().casefold() == wanted
        index.clear_index("mine")
        assert index.search(ToolSearchRequest("mine", query, max_results)).tool_names == []
        index.index_tools("mine", other)  # another catalogue: nothing of the first comes back
        found_now = index.search(ToolSearchRequest("mine", query, max_results)).tool_names
        assert set(found_now) <= {reference.tool_name for reference in other}


@pytest.mark.parametrize(
    ("name", "query"),
    [("ΟΔΟΣ", "σ"), ("ϑερμοκρασία", "θερμοκρασία"), ("ſtation", "station"), ("Station", "ſt")],
)
def test_regex_matches_case_insensitively_as_the_regular_expression_does(
    name: str, query: str
) -> None:
    # The fast matching lower-cased both sides, but (?i) also equates σ and ς (a final sigma:
    # "ΟΔΟΣ".lower() is "οδος"), θ and ϑ, s and ſ...: those tools were not found.
    tools = [ToolReference(name, None, "x")]
    assert _reference_regex_scores(tools, query)  # the definition finds it
    index = RegexToolIndex()
    index.index_tools("s", tools)
    assert search(index, query) == [name]


def test_hybrid_category_filter_ranks_within_the_category() -> None:
    # The vector side's candidates came from the whole catalogue, then the filter applied: a
    # category whose tools were not among the catalogue's top ``candidates`` matched nothing.
    model = BagOfWordsModel(aliases={"climate": "weather"})  # no tool says "climate"
    index = HybridToolIndex(model, candidates=2, background_embedding=False)
    index.index_tools(
        "s",
        [
            ToolReference("w1", None, "weather", category="other"),
            ToolReference("w2", None, "weather", category="other"),
            ToolReference("w3", None, "weather", category="other"),
            ToolReference("sea", None, "weather for sailors at sea", category="mine"),
            ToolReference("ski", None, "weather on the ski slopes", category="mine"),
            ToolReference("tax", None, "file a tax return", category="mine"),
        ],
    )
    assert search(index, "climate", max_results=3) == ["w1", "w2", "w3"]
    found = search(index, "climate", max_results=3, category_filter="mine")
    assert found[:2] in (["sea", "ski"], ["ski", "sea"])


@pytest.mark.parametrize("index", all_indexes(), ids=lambda i: type(i).__name__)
def test_replace_tools_swaps_a_sessions_tools(index: SessionToolIndex[object]) -> None:
    index.index_tools("s", [ToolReference("old_weather", None, "weather")])
    index.index_tools("other", [ToolReference("kept", None, "weather")])
    index.replace_tools("s", [ToolReference("new_weather", None, "weather")])
    assert search(index, "weather") == ["new_weather"]
    assert search(index, "weather", "other") == ["kept"]
    index.replace_tools("s", [])
    assert index.size("s") == 0 and search(index, "weather") == []
    with pytest.raises(TypeError, match="expected ToolReference, got str"):
        index.replace_tools("s", ["weather"])  # type: ignore[list-item]


def test_a_search_during_replacements_never_finds_the_session_empty() -> None:
    # clear_index then index_tools leaves a moment with no tools; a search of the session in
    # that moment (another request of the conversation) found nothing.
    index = BM25ToolIndex()
    catalogues = [
        [ToolReference("weather", None, "weather"), ToolReference(f"t{n}", None, "mail")]
        for n in range(2)
    ]
    index.replace_tools("s", catalogues[0])
    stop = threading.Event()

    def replace() -> None:
        for round_number in range(20_000):
            index.replace_tools("s", catalogues[round_number % 2])
        stop.set()

    replacing = threading.Thread(target=replace)
    replacing.start()
    empty = 0
    while not stop.is_set():
        empty += search(index, "weather") != ["weather"]
    replacing.join()
    assert empty == 0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: ToolReference("get_weather", None, None),  # type: ignore[arg-type]
            "tool 'get_weather': summary must be a string, got NoneType",
        ),
        (
            lambda: ToolReference("get_weather", parameters=["city"]),  # type: ignore[arg-type]
            "tool 'get_weather': parameters must be a JSON Schema mapping or None, got list",
        ),
        (
            lambda: ToolReference("get_weather", category=5),  # type: ignore[arg-type]
            "tool 'get_weather': category must be a string or None, got int",
        ),
        (
            lambda: ToolSearchRequest("s", "weather", None, 5),  # type: ignore[arg-type]
            "category_filter must be a string or None, got int",
        ),
        (lambda: BM25ToolIndex(cjk="x"), "cjk must be 'jieba' or 'bigram', got 'x'"),  # type: ignore[arg-type]
        (lambda: RegexToolIndex(cjk="x"), "cjk must be 'jieba' or 'bigram', got 'x'"),  # type: ignore[arg-type]
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_bad_values_are_refused_where_they_are_given_naming_the_tool(
    make: object, message: str
) -> None:
    # Before, a tool with no description failed the whole request with "summary must be a
    # string, got NoneType" (which of 2,000 tools?), and a bad category or cjk mode failed
    # later, on a search, with an AttributeError or not at all.
    with pytest.raises((TypeError, ValueError), match=re.escape(message)):
        make()  # type: ignore[operator]
