"""Augmenter templates, retrievers and RetrievalAugmentationAdvisor on the advisor chain."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from _loop_tools import RecordingTool
from _memory_helpers import tool_pairing_problems
from _rag_helpers import FixedRetriever, HashingEmbeddingModel
from tooluse.advisors import (
    HIGHEST_PRECEDENCE,
    AdvisorChain,
    ChatClientRequest,
    ToolCallingAdvisor,
)
from tooluse.client import ChatClient
from tooluse.memory import (
    CONVERSATION_ID,
    MessageChatMemoryAdvisor,
    MessageWindowChatMemory,
    SqliteChatMemoryRepository,
)
from tooluse.messages import AssistantMessage, Prompt, SystemMessage, UserMessage
from tooluse.rag import (
    DEFAULT_PROMPT_TEMPLATE,
    DOCUMENT_CONTEXT,
    FILTER_EXPRESSION,
    ContextualQueryAugmenter,
    Document,
    DocumentRetriever,
    InMemoryVectorStore,
    PromptTemplate,
    Query,
    RerankingRetriever,
    RetrievalAugmentationAdvisor,
    SqliteVectorStore,
    VectorStoreRetriever,
)
from tooluse.testing import ScriptedModel, tool_call

DOCS = [
    Document(id="pts", text="Points expire after two years.", metadata={"lang": "en"}),
    Document(id="ret", text="Returns are free within 30 days.", metadata={"lang": "en"}),
    Document(id="zh", text="积分 两年 有效 points", metadata={"lang": "zh"}),
]


# Templates


def test_template_placeholders_and_literal_braces() -> None:
    template = PromptTemplate('Answer {query} as JSON like {"ok": true} using {context}.')
    assert template.variables == {"query", "context"}
    assert template.render({"query": "Q {context}", "context": "C"}) == (
        'Answer Q {context} as JSON like {"ok": true} using C.'
    )
    with pytest.raises(KeyError, match="without a value: context"):
        template.render({"query": "Q"})


def test_the_augmented_query_holds_the_context_and_the_original_question() -> None:
    query = Query("How long do points last?")
    augmented = ContextualQueryAugmenter().augment(query, DOCS[:2])
    assert augmented.text == DEFAULT_PROMPT_TEMPLATE.replace(
        "{context}", "Points expire after two years.\n\nReturns are free within 30 days."
    ).replace("{query}", "How long do points last?")
    assert augmented.history == query.history and augmented.context == query.context


def test_the_empty_context_template_gets_the_question_too() -> None:
    augmented = ContextualQueryAugmenter().augment(Query("What is the refund time?"), [])
    assert "no information" in augmented.text
    assert "Query: What is the refund time?" in augmented.text


def test_custom_templates_get_every_variable_in_both_branches() -> None:
    augmenter = ContextualQueryAugmenter(
        prompt_template="[{shop}] Docs:\n{context}\nQuestion: {query}",
        empty_context_template="[{shop}] Nothing on file for: {query}{context}",
        variables={"shop": "Lumen"},
    )
    assert augmenter.augment(Query("Q?"), DOCS[:1]).text == (
        "[Lumen] Docs:\nPoints expire after two years.\nQuestion: Q?"
    )
    assert augmenter.augment(Query("Q?"), []).text == "[Lumen] Nothing on file for: Q?"


def test_allow_empty_context_passes_the_question_through() -> None:
    query = Query("Q?")
    assert ContextualQueryAugmenter(allow_empty_context=True).augment(query, []) is query


def test_a_custom_document_formatter() -> None:
    augmenter = ContextualQueryAugmenter(
        document_formatter=lambda docs: "\n".join(f"- [{d.id}] {d.text}" for d in docs)
    )
    assert "- [pts] Points expire" in augmenter.augment(Query("Q"), DOCS[:1]).text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prompt_template": "Docs: {context}"}, r"must contain the placeholders.*\{query\}"),
        ({"prompt_template": "Q: {query}"}, r"missing: \{context\}"),
        ({"empty_context_template": "Sorry {name}"}, r"placeholders without a value: \['name'\]"),
        ({"variables": {"query": "x"}}, "may not redefine"),
    ],
)
def test_template_mistakes_are_caught_when_configured(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ContextualQueryAugmenter(**kwargs)  # type: ignore[arg-type]


# Retrievers


def test_vector_store_retriever_uses_its_settings_and_the_request_filter() -> None:
    store = InMemoryVectorStore(HashingEmbeddingModel())
    store.add(DOCS)
    retriever = VectorStoreRetriever(store, top_k=1, filter={"lang": "en"})
    assert isinstance(retriever, DocumentRetriever)
    assert [d.id for d in retriever.retrieve("points two years")] == ["pts"]
    per_request = Query("points two years", context={FILTER_EXPRESSION: {"lang": "zh"}})
    assert [d.id for d in retriever.retrieve(per_request)] == ["zh"]
    with pytest.raises(TypeError, match="retrieve takes a str or a Query"):
        retriever.retrieve(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown operator"):
        VectorStoreRetriever(store, filter={"lang": {"$regex": "e."}})


async def test_reranking_hook_reorders_and_cuts() -> None:
    class ByLength:
        def rerank(self, query: Query, documents: Sequence[Document]) -> list[Document]:
            return sorted(documents, key=lambda d: len(d.text))

    reranked = RerankingRetriever(FixedRetriever(DOCS), ByLength(), top_n=2)
    assert [d.id for d in reranked.retrieve("q")] == ["zh", "pts"]
    assert [d.id for d in await reranked.aretrieve("q")] == ["zh", "pts"]
    with pytest.raises(ValueError, match="top_n must be a positive int"):
        RerankingRetriever(FixedRetriever(DOCS), ByLength(), top_n=0)


# The advisor


async def test_the_last_user_message_is_augmented_and_the_documents_published() -> None:
    retriever = FixedRetriever(DOCS[:1])
    advisor = RetrievalAugmentationAdvisor(retriever)
    assert advisor.order == HIGHEST_PRECEDENCE + 250
    model = ScriptedModel(["Two years."])
    history = [SystemMessage(text="S"), UserMessage(text="hi"), AssistantMessage(text="hello")]
    request = ChatClientRequest(
        Prompt([*history, UserMessage(text="How long do points last?", metadata={"k": 1})]),
        {"tenant": "t1"},
    )
    response = await AdvisorChain([advisor], model).next_call(request)
    sent = model.requests[0].messages
    assert list(sent[:3]) == history
    last = sent[3]
    assert isinstance(last, UserMessage)
    assert "Points expire after two years." in last.text
    assert "Query: How long do points last?" in last.text
    assert (last.metadata, last.original_text) == ({"k": 1}, "How long do points last?")
    [query] = retriever.queries
    assert query.text == "How long do points last?"
    assert list(query.history) == history
    assert query.context["tenant"] == "t1"
    assert response.context[DOCUMENT_CONTEXT] == DOCS[:1]
    assert DOCUMENT_CONTEXT not in request.context  # the caller's context is not mutated


async def test_streaming_is_augmented_the_same_way() -> None:
    model = ScriptedModel(["streamed answer"], chunk_size=4)
    chain = AdvisorChain([RetrievalAugmentationAdvisor(FixedRetriever([]))], model)
    request = ChatClientRequest(Prompt([UserMessage(text="Unknown thing?")]))
    items = [item async for item in chain.next_stream(request)]
    assert items and items[-1].context[DOCUMENT_CONTEXT] == []
    sent = model.requests[0].messages[0]
    assert isinstance(sent, UserMessage)
    assert "no information" in sent.text and "Unknown thing?" in sent.text


async def test_a_prompt_without_a_user_message_is_an_error() -> None:
    chain = AdvisorChain([RetrievalAugmentationAdvisor(FixedRetriever([]))], ScriptedModel([]))
    with pytest.raises(ValueError, match="needs a user message"):
        await chain.next_call(ChatClientRequest(Prompt([SystemMessage(text="S")])))


async def test_memory_outside_stores_the_question_as_asked_and_rag_runs_once() -> None:
    memory = MessageWindowChatMemory()
    retriever = FixedRetriever(DOCS[:1])
    advisors = [RetrievalAugmentationAdvisor(retriever), MessageChatMemoryAdvisor(memory)]
    model = ScriptedModel(["Two years.", "Yes."])
    chain = AdvisorChain(advisors, model)
    for question in ("How long do points last?", "Really?"):
        await chain.next_call(
            ChatClientRequest(Prompt([UserMessage(text=question)]), {CONVERSATION_ID: "c"})
        )
    assert memory.get("c") == [
        UserMessage(text="How long do points last?"),
        AssistantMessage(text="Two years."),
        UserMessage(text="Really?"),
        AssistantMessage(text="Yes."),
    ]
    assert [list(q.history) for q in retriever.queries][1] == memory.get("c")[:2]
    assert len(retriever.queries) == 2


async def test_client_stream_with_memory_and_rag_in_one_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "tooluse.db"
    with (
        SqliteVectorStore(path, HashingEmbeddingModel()) as store,
        SqliteChatMemoryRepository(path) as repository,
    ):
        store.add(DOCS)
        memory = MessageWindowChatMemory(repository=repository)
        model = ScriptedModel(["Two years."], chunk_size=3)
        retriever = VectorStoreRetriever(store, top_k=1, filter={"lang": "en"})
        client = ChatClient(
            model,
            advisors=[MessageChatMemoryAdvisor(memory), RetrievalAugmentationAdvisor(retriever)],
        )
        stream = client.prompt("points two years").context({CONVERSATION_ID: "c"}).stream()
        assert "".join([piece async for piece in stream.content()]) == "Two years."
        sent = model.requests[0].messages[-1]
        assert isinstance(sent, UserMessage)
        assert "Points expire after two years." in sent.text
        assert memory.get("c") == [
            UserMessage(text="points two years"),
            AssistantMessage(text="Two years."),
        ]


@pytest.mark.parametrize("conversation_history", [True, False])
def test_memory_inside_the_loop_stores_the_question_as_asked(conversation_history: bool) -> None:
    """Memory inside the tool loop sees the question after RAG rewrote it. It stores the
    question as asked, or every later turn would carry the old documents and template again
    (seed 001); within the turn each round still sees the documents, with either loop
    history mode, and no message twice."""
    memory = MessageWindowChatMemory()
    model = ScriptedModel([tool_call("weather", {"city": "Paris"}), "Sunny.", "Bye."])
    client = ChatClient(
        model,
        tools=[RecordingTool("weather", lambda arguments, context: "sunny")],
        advisors=[
            MessageChatMemoryAdvisor(memory, inside_tool_loop=True),
            RetrievalAugmentationAdvisor(FixedRetriever(DOCS[:1])),
        ],
        tool_calling_advisor=ToolCallingAdvisor(conversation_history=conversation_history),
    )
    for question in ("Weather in Paris?", "Thanks"):
        client.prompt(question).context({CONVERSATION_ID: "c"}).call()
    questions = [m for m in memory.get("c") if isinstance(m, UserMessage)]
    assert questions == [UserMessage(text="Weather in Paris?"), UserMessage(text="Thanks")]
    second_round = [m for m in model.requests[1].messages if isinstance(m, UserMessage)]
    assert len(second_round) == 1 and "Points expire" in second_round[0].text
    next_turn = [m for m in model.requests[2].messages if isinstance(m, UserMessage)]
    assert next_turn[0] == UserMessage(text="Weather in Paris?")
    assert "Points expire" in next_turn[1].text and "Weather in Paris?" not in next_turn[1].text
    for request in model.requests:
        assert not tool_pairing_problems(request.messages)


async def test_memory_inside_rag_stores_the_question_as_asked() -> None:
    """RAG placed outside memory (e.g. Spring's order 0 carried over): memory still stores
    what the user asked, not the augmented prompt."""
    memory = MessageWindowChatMemory()
    advisors = [
        RetrievalAugmentationAdvisor(FixedRetriever(DOCS[:1]), order=HIGHEST_PRECEDENCE + 100),
        MessageChatMemoryAdvisor(memory),
    ]
    chain = AdvisorChain(advisors, ScriptedModel(["Two years."]))
    request = ChatClientRequest(
        Prompt([UserMessage(text="How long?", metadata={"k": 1})]), {CONVERSATION_ID: "c"}
    )
    await chain.next_call(request)
    assert memory.get("c") == [
        UserMessage(text="How long?", metadata={"k": 1}),
        AssistantMessage(text="Two years."),
    ]
