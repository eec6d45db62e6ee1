"""QueryTranslator: a question in another language than the tools', translated by a chat model
for HybridToolIndex to search with."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from search_fakes import BagOfWordsModel
from tooluse import ToolContext
from tooluse.messages import Prompt, SystemMessage, UserMessage
from tooluse.search import (
    HybridToolIndex,
    QueryTranslator,
    ToolReference,
    ToolSearchRequest,
    ToolSearchTool,
)
from tooluse.testing import FunctionModel, ScriptedModel

TOOLS = [
    ToolReference("get_weather", None, "Current weather and forecast for a city"),
    ToolReference("order_status", None, "Status of the order with the given id"),
    ToolReference("send_email", None, "Send an email to a recipient"),
    ToolReference("book_flight", None, "Book a flight between two airports"),
]
QUESTION = "我的订单现在是什么状态"  # "what is the status of my order"
TRANSLATION = "What is the status of my order"


def translations(answers: dict[str, str]) -> FunctionModel:
    def answer(prompt: Prompt) -> str:
        question = prompt.messages[-1]
        assert isinstance(question, UserMessage)
        return answers[question.text]

    return FunctionModel(answer)


def hybrid(translator: QueryTranslator | None) -> HybridToolIndex:
    # No dictionary glosses: the translation is the only way a Chinese word meets an English one.
    index = HybridToolIndex(
        BagOfWordsModel(),
        background_embedding=False,
        gloss_weight=0,
        query_translator=translator,
    )
    index.index_tools("s", TOOLS)
    return index


def top(index: HybridToolIndex, query: str) -> list[str]:
    return index.search(ToolSearchRequest("s", query, max_results=2)).tool_names


def test_a_question_in_another_language_is_searched_with_its_translation() -> None:
    model = translations({QUESTION: TRANSLATION})
    assert top(hybrid(None), QUESTION)[0] != "order_status"
    assert top(hybrid(QueryTranslator(model)), QUESTION)[0] == "order_status"
    (prompt,) = model.requests
    system, user = prompt.messages
    assert isinstance(system, SystemMessage) and "into English" in system.text
    assert isinstance(user, UserMessage) and user.text == QUESTION
    assert prompt.options.temperature == 0.0


def test_a_question_in_the_tools_language_is_never_translated() -> None:
    model = ScriptedModel([])  # any call would raise ScriptExhaustedError
    index = hybrid(QueryTranslator(model))
    assert top(index, "status of the order 42")[0] == "order_status"
    assert model.requests == []


def test_a_translation_is_asked_once_per_question_while_cached() -> None:
    other = "给Bob发一封邮件"
    model = translations({QUESTION: TRANSLATION, other: "Send an email to Bob"})
    index = hybrid(QueryTranslator(model, cache_size=1))
    for query in (QUESTION, QUESTION, other, QUESTION):
        top(index, query)
    asked = [prompt.messages[-1] for prompt in model.requests]
    assert [message.text for message in asked if isinstance(message, UserMessage)] == [
        QUESTION,
        other,
        QUESTION,  # the one-entry cache kept only the other question
    ]


def test_a_failing_model_leaves_the_question_as_asked_logged_and_asked_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls = 0

    def failing(prompt: Prompt) -> str:
        nonlocal calls
        calls += 1
        raise ConnectionError("engine down")

    index = hybrid(QueryTranslator(FunctionModel(failing)))
    with caplog.at_level(logging.WARNING, logger="tooluse.search._translate"):
        first = top(index, QUESTION)
        assert top(index, QUESTION) == first == top(hybrid(None), QUESTION)
    assert calls == 2  # a failure is not cached
    failures = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 2 and failures[0].exc_info is not None
    assert "engine down" in str(failures[0].exc_info[1])


@pytest.mark.parametrize(("answer", "said"), [("   ", "no text"), (QUESTION, "unchanged")])
def test_an_empty_or_unchanged_translation_leaves_the_question_as_asked(
    answer: str, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    model = translations({QUESTION: answer})
    index = hybrid(QueryTranslator(model))
    with caplog.at_level(logging.WARNING, logger="tooluse.search._translate"):
        assert top(index, QUESTION) == top(hybrid(None), QUESTION)
        top(index, QUESTION)
    assert len(model.requests) == 1  # the model's answer is kept: it would give it again
    assert [said in r.getMessage() for r in caplog.records] == [True]


def test_the_search_tool_translates_from_an_async_caller() -> None:
    model = translations({QUESTION: TRANSLATION})
    tool = ToolSearchTool(hybrid(QueryTranslator(model)))
    context = ToolContext({"toolSearchToolSessionId": "s"})
    arguments = json.dumps({"query": QUESTION, "max_results": 1})
    result = asyncio.run(tool.callback.acall(arguments, context))
    assert "order_status" in str(result)
    assert len(model.requests) == 1


def test_settings_are_checked() -> None:
    model = ScriptedModel([])
    with pytest.raises(TypeError, match="model must be a ChatModel"):
        QueryTranslator("local:qwen2.5-coder-1.5b")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="language must not be blank"):
        QueryTranslator(model, " ")
    with pytest.raises(ValueError, match="must name the target language"):
        QueryTranslator(model, instruction="Translate this.")
    with pytest.raises(ValueError, match="cache_size must be an integer of at least 1"):
        QueryTranslator(model, cache_size=0)
    with pytest.raises(TypeError, match="query_translator must be a QueryTranslator"):
        HybridToolIndex(BagOfWordsModel(), query_translator=model)  # type: ignore[arg-type]
    custom = QueryTranslator(model, "German", instruction="Übersetze ins {language}.")
    assert custom.instruction == "Übersetze ins German."


def test_a_search_on_an_event_loop_thread_cannot_wait_for_the_model_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = translations({QUESTION: TRANSLATION})
    index = hybrid(QueryTranslator(model))

    async def search_on_the_loop() -> list[str]:
        return top(index, QUESTION)

    with caplog.at_level(logging.WARNING, logger="tooluse.search._translate"):
        assert asyncio.run(search_on_the_loop()) == top(hybrid(None), QUESTION)
    assert model.requests == []
    (record,) = caplog.records
    assert record.exc_info is not None
    assert "cannot run inside a running event loop" in str(record.exc_info[1])
