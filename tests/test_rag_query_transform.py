"""Query transformers (Spring's pre-retrieval stage) and RetrievalAugmentationAdvisor's use of
them: retrieval searches with the transformed query, the model is asked the question as
asked."""

from __future__ import annotations

import logging

import pytest

from _rag_helpers import FixedRetriever
from tooluse.advisors import AdvisorChain, ChatClientRequest
from tooluse.messages import (
    AssistantMessage,
    ChatOptions,
    Message,
    Prompt,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from tooluse.rag import (
    DOCUMENT_CONTEXT,
    RETRIEVAL_QUERY,
    CompressionQueryTransformer,
    Document,
    Query,
    QueryTransformer,
    QueryTransformError,
    RetrievalAugmentationAdvisor,
    RewriteQueryTransformer,
    format_history,
)
from tooluse.testing import FunctionModel, ScriptedModel, chat_response

POINTS = Document(id="points", text="积分自获得之日起 12 个月后过期。")

HISTORY: list[Message] = [
    SystemMessage(text="You answer questions."),
    UserMessage(text="积分多久过期？"),
    AssistantMessage(text="积分 12 个月后过期。"),
]


class Suffix:
    """A transformer without a model: appends ``suffix`` to the query text."""

    def __init__(self, suffix: str) -> None:
        self.suffix = suffix

    def transform(self, query: str | Query) -> Query:
        query = query if isinstance(query, Query) else Query(query)
        return query.replace(text=query.text + self.suffix)

    async def atransform(self, query: str | Query) -> Query:
        return self.transform(query)


def failing(prompt: Prompt) -> str:
    raise ConnectionError("the provider is down")


FAILURE = (
    r"^CompressionQueryTransformer could not rewrite the question '那能延期吗？' for "
    r"retrieval: ConnectionError: the provider is down$"
)


# format_history


def test_the_history_shows_questions_as_asked_and_answers_without_tool_traffic() -> None:
    asked = UserMessage(
        text="documents... Question: 积分多久过期？", original_text="积分多久过期？"
    )
    call = ToolCall(id="c1", name="lookup", arguments="{}")
    messages: list[Message] = [
        SystemMessage(text="S"),
        asked,
        AssistantMessage(text="", tool_calls=(call,)),
        ToolResponseMessage(responses=(ToolResponse(id="c1", name="lookup", data="x"),)),
        AssistantMessage(text="  积分 12 个月后过期。\n"),
    ]
    assert format_history(messages) == "User: 积分多久过期？\nAssistant: 积分 12 个月后过期。"


# CompressionQueryTransformer


async def test_compression_asks_the_model_with_the_history_and_the_follow_up() -> None:
    model = ScriptedModel([" 会员积分能延期吗？\n"])
    transformer = CompressionQueryTransformer(model, options=ChatOptions(temperature=0.0))
    query = Query("那能延期吗？", HISTORY, {"tenant": "t1"})

    result = await transformer.atransform(query)

    assert result == Query("会员积分能延期吗？", HISTORY, {"tenant": "t1"})
    [request] = model.requests
    [message] = request.messages  # no system text, no tools: one user message
    assert isinstance(message, UserMessage)
    assert "User: 积分多久过期？\nAssistant: 积分 12 个月后过期。" in message.text
    assert "那能延期吗？" in message.text
    assert "You answer questions." not in message.text
    assert request.options.temperature == 0.0
    assert request.options.tool_callbacks == ()


@pytest.mark.parametrize(
    "history",
    [
        [],
        [SystemMessage(text="S")],
        [AssistantMessage(text="", tool_calls=(ToolCall(id="c", name="t", arguments=""),))],
    ],
    ids=["none", "system only", "tool call only"],
)
async def test_compression_without_a_conversation_calls_no_model(history: list[Message]) -> None:
    model = ScriptedModel([])
    transformer = CompressionQueryTransformer(model)
    query = Query("积分多久过期？", history)
    assert await transformer.atransform(query) is query
    assert transformer.transform("积分多久过期？") == Query("积分多久过期？")
    assert model.requests == []


async def test_a_blank_reply_keeps_the_query(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel([" \n"])
    query = Query("那能延期吗？", HISTORY)
    with caplog.at_level(logging.WARNING, logger="tooluse.rag"):
        assert await CompressionQueryTransformer(model).atransform(query) is query
    assert len(model.requests) == 1
    assert "reply was blank" in caplog.text and "那能延期吗？" in caplog.text


REWRITING = Usage(prompt_tokens=40, completion_tokens=8, total_tokens=48)
ANSWERING = Usage(prompt_tokens=300, completion_tokens=20, total_tokens=320)


async def test_a_rewritten_query_carries_the_tokens_of_its_rewriting() -> None:
    model = ScriptedModel(
        [chat_response("会员积分能延期吗？", usage=REWRITING), chat_response(" ", usage=REWRITING)]
    )
    transformer = CompressionQueryTransformer(model)
    earlier = Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2)

    rewritten = await transformer.atransform(Query("那能延期吗？", HISTORY, usage=earlier))
    kept = await transformer.atransform(Query("那能延期吗？", HISTORY))

    assert rewritten.text == "会员积分能延期吗？" and rewritten.usage == earlier + REWRITING
    assert kept.text == "那能延期吗？" and kept.usage == REWRITING  # a blank reply cost too
    assert Query("q").usage is None and Query("q").replace(text="r").usage is None


async def test_a_failed_model_call_is_a_query_transform_error() -> None:
    transformer = CompressionQueryTransformer(FunctionModel(failing))
    with pytest.raises(QueryTransformError, match=FAILURE) as raised:
        await transformer.atransform(Query("那能延期吗？", HISTORY))
    assert isinstance(raised.value.__cause__, ConnectionError)


def test_the_sync_form_asks_the_model_the_same_way() -> None:
    model = ScriptedModel(["会员积分能延期吗？", ""])
    transformer = CompressionQueryTransformer(model)
    query = Query("那能延期吗？", HISTORY)
    assert transformer.transform(query) == Query("会员积分能延期吗？", HISTORY)
    assert "User: 积分多久过期？" in model.requests[0].messages[0].text
    assert transformer.transform(query) is query  # blank reply
    with pytest.raises(QueryTransformError, match=FAILURE):
        CompressionQueryTransformer(FunctionModel(failing)).transform(query)


async def test_the_sync_form_refuses_a_running_event_loop() -> None:
    transformer = CompressionQueryTransformer(ScriptedModel([]))
    with pytest.raises(RuntimeError, match=r"use `await transformer\.atransform"):
        transformer.transform(Query("那能延期吗？", HISTORY))


def test_a_custom_compression_template() -> None:
    model = ScriptedModel(["standalone"])
    template = 'H={history}|Q={query}|JSON {"a": 1}'
    CompressionQueryTransformer(model, prompt_template=template).transform(
        Query("q?", [UserMessage(text="u"), AssistantMessage(text="a")])
    )
    assert model.requests[0].messages[0].text == 'H=User: u\nAssistant: a|Q=q?|JSON {"a": 1}'


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda m: CompressionQueryTransformer(m, prompt_template="Q: {query}"),
            r"must contain \{history\}, \{query\}; missing: \{history\}",
        ),
        (
            lambda m: CompressionQueryTransformer(m, prompt_template="{history} {query} {lang}"),
            r"placeholders without a value: \['lang'\]",
        ),
        (
            lambda m: RewriteQueryTransformer(m, prompt_template="rewrite for {target}"),
            r"RewriteQueryTransformer: prompt_template must contain \{query\}",
        ),
        (lambda m: RewriteQueryTransformer(m, target=" "), "target must be a non-blank string"),
    ],
)
def test_configuration_mistakes_are_caught_when_built(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make(ScriptedModel([]))  # type: ignore[operator]


def test_a_transformer_needs_a_chat_model() -> None:
    with pytest.raises(TypeError, match="CompressionQueryTransformer needs a chat model"):
        CompressionQueryTransformer("openai:gpt-4o-mini")  # type: ignore[arg-type]


# RewriteQueryTransformer


async def test_rewrite_asks_for_every_query_with_the_target() -> None:
    model = ScriptedModel(["points expiry extension policy"])
    transformer = RewriteQueryTransformer(model, target="web search engine")
    result = await transformer.atransform("hi, quick question, my points... can they be extended?")
    assert result.text == "points expiry extension policy"
    text = model.requests[0].messages[0].text
    assert "web search engine" in text and "can they be extended?" in text


# The advisor


async def test_the_advisor_retrieves_with_the_transformed_query_and_asks_the_question() -> None:
    retriever = FixedRetriever([POINTS])
    compression = ScriptedModel(["会员积分能延期吗？"])
    advisor = RetrievalAugmentationAdvisor(
        retriever, query_transformers=[CompressionQueryTransformer(compression)]
    )
    model = ScriptedModel(["可以申请延期。"])
    request = ChatClientRequest(Prompt([*HISTORY, UserMessage(text="那能延期吗？")]), {"k": 1})

    response = await AdvisorChain([advisor], model).next_call(request)

    [query] = retriever.queries
    assert query == Query("会员积分能延期吗？", HISTORY, {"k": 1})
    asked = model.requests[0].messages[-1]
    assert isinstance(asked, UserMessage)
    assert "Query: 那能延期吗？" in asked.text  # the model is asked the question as asked
    assert "会员积分能延期吗" not in asked.text
    assert POINTS.text in asked.text
    assert asked.original_text == "那能延期吗？"
    assert response.context[RETRIEVAL_QUERY] == "会员积分能延期吗？"
    assert response.context[DOCUMENT_CONTEXT] == [POINTS]


async def test_the_advisor_streams_the_same_way() -> None:
    retriever = FixedRetriever([POINTS])
    compression = ScriptedModel(["会员积分能延期吗？"])
    advisor = RetrievalAugmentationAdvisor(
        retriever, query_transformers=[CompressionQueryTransformer(compression)]
    )
    model = ScriptedModel(["可以申请延期。"], chunk_size=2)
    request = ChatClientRequest(Prompt([*HISTORY, UserMessage(text="那能延期吗？")]))

    items = [item async for item in AdvisorChain([advisor], model).next_stream(request)]

    assert [q.text for q in retriever.queries] == ["会员积分能延期吗？"]
    assert "Query: 那能延期吗？" in model.requests[0].messages[-1].text
    assert items[-1].context[RETRIEVAL_QUERY] == "会员积分能延期吗？"


def _rewriting_advisor() -> RetrievalAugmentationAdvisor:
    compression = ScriptedModel([chat_response("会员积分能延期吗？", usage=REWRITING)])
    return RetrievalAugmentationAdvisor(
        FixedRetriever([POINTS]), query_transformers=[CompressionQueryTransformer(compression)]
    )


FOLLOW_UP = ChatClientRequest(Prompt([*HISTORY, UserMessage(text="那能延期吗？")]))


async def test_the_response_counts_the_tokens_of_the_query_rewriting() -> None:
    answered = ScriptedModel([chat_response("可以申请延期。", usage=ANSWERING)])
    unreported = ScriptedModel(["可以申请延期。"])

    response = await AdvisorChain([_rewriting_advisor()], answered).next_call(FOLLOW_UP)
    alone = await AdvisorChain([_rewriting_advisor()], unreported).next_call(FOLLOW_UP)

    assert response.chat_response is not None and alone.chat_response is not None
    assert response.chat_response.usage == ANSWERING + REWRITING
    assert alone.chat_response.usage == REWRITING
    assert response.chat_response.generations[0].message.text == "可以申请延期。"


@pytest.mark.parametrize("answer_usage", [ANSWERING, None], ids=["reported", "not reported"])
async def test_a_stream_counts_the_tokens_of_the_query_rewriting(
    answer_usage: Usage | None,
) -> None:
    model = ScriptedModel([chat_response("可以申请延期。", usage=answer_usage)], chunk_size=2)

    chain = AdvisorChain([_rewriting_advisor()], model)
    items = [item async for item in chain.next_stream(FOLLOW_UP)]

    chunks = [item.chat_response for item in items if item.chat_response is not None]
    reported = [chunk.usage for chunk in chunks if chunk.usage and not chunk.usage.is_empty()]
    # The last usage reported is the total, as a provider's stream reports it.
    assert reported[-1] == (REWRITING if answer_usage is None else answer_usage + REWRITING)
    text = "".join(c.generations[0].message.text or "" for c in chunks if c.generations)
    assert text == "可以申请延期。"


async def test_transformers_apply_in_order_and_without_any_the_question_is_searched() -> None:
    retriever = FixedRetriever([POINTS])
    chained = RetrievalAugmentationAdvisor(
        retriever, query_transformers=[Suffix(" a"), Suffix(" b")]
    )
    plain = RetrievalAugmentationAdvisor(retriever)
    request = ChatClientRequest(Prompt([UserMessage(text="q")]))
    for advisor in (chained, plain):
        response = await AdvisorChain([advisor], ScriptedModel(["x"])).next_call(request)
        assert response.context[RETRIEVAL_QUERY] == retriever.queries[-1].text
    assert [q.text for q in retriever.queries] == ["q a b", "q"]


async def test_a_failing_transformer_fails_the_request_before_the_model() -> None:
    retriever = FixedRetriever([POINTS])
    advisor = RetrievalAugmentationAdvisor(
        retriever, query_transformers=[CompressionQueryTransformer(FunctionModel(failing))]
    )
    model = ScriptedModel([])
    request = ChatClientRequest(Prompt([*HISTORY, UserMessage(text="那能延期吗？")]))
    with pytest.raises(QueryTransformError, match="could not rewrite the question"):
        await AdvisorChain([advisor], model).next_call(request)
    assert retriever.queries == [] and model.requests == []


async def test_transformer_mistakes_are_type_errors() -> None:
    assert isinstance(Suffix(""), QueryTransformer)
    with pytest.raises(TypeError, match=r"query_transformers\[1\] is not a QueryTransformer"):
        RetrievalAugmentationAdvisor(FixedRetriever([POINTS]), query_transformers=[Suffix(""), "x"])  # type: ignore[list-item]

    class ReturnsText(Suffix):
        async def atransform(self, query: str | Query) -> Query:
            return "text"  # type: ignore[return-value]

    advisor = RetrievalAugmentationAdvisor(
        FixedRetriever([POINTS]), query_transformers=[ReturnsText("")]
    )
    request = ChatClientRequest(Prompt([UserMessage(text="q")]))
    with pytest.raises(TypeError, match=r"ReturnsText\.atransform returned str, not a Query"):
        await AdvisorChain([advisor], ScriptedModel([])).next_call(request)
