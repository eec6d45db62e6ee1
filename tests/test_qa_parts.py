"""The parts of the QA pipeline: ledger, recording callbacks, retrieval gate, augmenter."""

from __future__ import annotations

import json
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _loop_tools import RecordingTool
from _qa_helpers import CountingRetriever
from tooluse import ToolContext, tool, tool_callbacks
from tooluse.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.qa import (
    LEDGER_KEY,
    FetchGateRetriever,
    FetchLedger,
    FetchRecord,
    LedgerToolCallback,
    LedgerToolCallbackProvider,
    QaPause,
    QaPipeline,
    ToolResultEvent,
    TwoSourceAugmenter,
    format_records,
    ledger_tool_callbacks,
)
from tooluse.qa._trace import ToolTrace
from tooluse.rag import Document, Query
from tooluse.testing import ScriptedModel, chat_response, tool_call
from tooluse.tools import has_fixed_definition


@tool
def weather(city: str) -> dict[str, str]:
    """Current weather."""
    return {"city": city, "sky": "sunny"}


@tool(requires_approval=True, timeout=5)
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


@tool
def broken(city: str) -> str:
    """Fails."""
    raise RuntimeError("down")


# -- ledger ----------------------------------------------------------------------------------


def test_ledger_orders_records_by_reservation_not_completion() -> None:
    ledger = FetchLedger()
    first, second = ledger.reserve(), ledger.reserve()
    ledger.add("b", "{}", "second", position=second)
    ledger.add("a", "{}", "first", position=first)
    ledger.add("c", "{}", "unreserved")
    assert [r.result for r in ledger.records] == ["first", "second", "unreserved"]
    assert len(ledger) == 3 and ledger


def test_ledger_is_safe_under_concurrent_writers() -> None:
    ledger = FetchLedger()

    def write(n: int) -> None:
        for i in range(100):
            ledger.add("t", "{}", f"{n}-{i}", position=ledger.reserve())

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ledger.records) == 800
    assert len({r.result for r in ledger.records}) == 800


def test_ledger_of_a_context() -> None:
    ledger = FetchLedger()
    assert FetchLedger.of({LEDGER_KEY: ledger}) is ledger
    assert FetchLedger.of(None) is None
    assert FetchLedger.of({}) is None
    with pytest.raises(TypeError, match="must be a FetchLedger, got dict"):
        FetchLedger.of({LEDGER_KEY: {}})
    with pytest.raises(TypeError, match="FetchRecord"):
        FetchLedger(["not a record"])  # type: ignore[list-item]


@given(st.lists(st.tuples(st.text(), st.text(), st.text()), max_size=5))
def test_pause_records_round_trip(records: list[tuple[str, str, str]]) -> None:
    for tool_name, arguments, result in records:
        record = FetchRecord(tool_name, arguments, result)
        assert FetchRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tool": "t", "arguments": "{}"}, "exactly the keys"),
        ({"tool": "t", "arguments": "{}", "result": 1}, "must be strings"),
        ([], "exactly the keys"),
    ],
)
def test_bad_records_are_refused(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FetchRecord.from_dict(data)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "must be an object"),
        ('{"version": 3}', "version 3; this tooluse reads version 1 or 2"),
        ('{"version": true}', "version True"),
        ('{"version": 1}', "lacks keys"),
        ('{"version": 2}', "lacks keys"),
    ],
)
def test_bad_pause_json_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        QaPause.from_json(text)


# -- recording callbacks ---------------------------------------------------------------------


async def test_ledger_callback_records_successes_only() -> None:
    (wrapped_weather, wrapped_broken) = ledger_tool_callbacks(weather, broken)
    assert isinstance(wrapped_weather, LedgerToolCallback)
    assert isinstance(wrapped_broken, LedgerToolCallback)
    ledger = FetchLedger()
    context = ToolContext({LEDGER_KEY: ledger})
    result = await wrapped_weather.acall('{"city": "Oslo"}', context)
    assert (
        await wrapped_weather.acall('{"city": "Rome"}', context) == '{"city":"Rome","sky":"sunny"}'
    )
    with pytest.raises(RuntimeError, match="down"):
        await wrapped_broken.acall('{"city": "Oslo"}', context)
    assert ledger.records == (
        FetchRecord("weather", '{"city": "Oslo"}', result),
        FetchRecord("weather", '{"city": "Rome"}', '{"city":"Rome","sky":"sunny"}'),
    )
    # Without a ledger it only runs the tool.
    assert await wrapped_weather.acall('{"city": "Oslo"}') == result
    # Its definition is as fixed as its delegate's (the search advisor reads it again if not).
    assert has_fixed_definition(wrapped_weather)
    assert not has_fixed_definition(LedgerToolCallback(RecordingTool("ping")))  # type: ignore[arg-type]


async def test_ledger_callback_records_what_the_model_is_sent() -> None:
    # The executor sends a callback's None as "" and refuses a result that is not a str; the
    # ledger recorded both as they were, and the answer stage then failed in format_records
    # ("sequence item 0: expected str instance, NoneType found").
    silent = LedgerToolCallback(RecordingTool("ping", lambda arguments, context: None))  # type: ignore[arg-type, return-value]
    odd = LedgerToolCallback(RecordingTool("count", lambda arguments, context: 3))  # type: ignore[arg-type, return-value]
    ledger = FetchLedger()
    context = ToolContext({LEDGER_KEY: ledger})
    assert await silent.acall("{}", context) is None
    assert await silent.acall("{}", context) is None
    await odd.acall("{}", context)
    assert ledger.records == (FetchRecord("ping", "{}", ""), FetchRecord("ping", "{}", ""))
    assert format_records(ledger.records) == "\n\n"


async def test_a_tool_returning_none_is_answered_from_its_empty_result() -> None:
    model = ScriptedModel([tool_call("ping", {}, id="p"), "", "Pinged."])
    tools = [RecordingTool("ping", lambda arguments, context: None)]  # type: ignore[arg-type, return-value]
    result = await QaPipeline(model, retriever=CountingRetriever(), tools=tools).acall("Ping?")
    assert (result.answer, result.route) == ("Pinged.", "tools")
    assert result.tool_results == (ToolResultEvent("p", "ping", "", False),)


def test_ledger_callback_keeps_definition_and_metadata() -> None:
    (original,) = tool_callbacks(refund)
    (wrapped,) = ledger_tool_callbacks(refund)
    assert isinstance(wrapped, LedgerToolCallback)
    assert wrapped.definition is original.definition
    assert wrapped.metadata.requires_approval is True
    assert wrapped.metadata.timeout == 5
    with pytest.raises(TypeError, match="wraps a ToolCallback"):
        LedgerToolCallback(object())  # type: ignore[arg-type]


def test_ledger_tool_callbacks_keeps_order_and_refuses_duplicates() -> None:
    class Provider:
        def __init__(self) -> None:
            self.tools = tool_callbacks(refund)

        def tool_callbacks(self) -> list[object]:
            return list(self.tools)

    provider = Provider()
    wrapped = ledger_tool_callbacks([weather, provider], broken)
    assert isinstance(wrapped[1], LedgerToolCallbackProvider)
    assert [type(w).__name__ for w in wrapped] == [
        "LedgerToolCallback",
        "LedgerToolCallbackProvider",
        "LedgerToolCallback",
    ]
    first = wrapped[1].tool_callbacks()
    assert first == wrapped[1].tool_callbacks()  # wrapped once per callback
    provider.tools = tool_callbacks(weather)
    (changed,) = wrapped[1].tool_callbacks()
    assert changed.definition.name == "weather"
    with pytest.raises(ValueError, match="weather"):
        ledger_tool_callbacks(weather, [broken, weather])


# -- the gate --------------------------------------------------------------------------------


async def test_gate_skips_the_retriever_when_the_ledger_has_data() -> None:
    documents = [Document(text="doc", id="d")]
    inner = CountingRetriever(documents)
    gate = FetchGateRetriever(inner)
    full = FetchLedger([FetchRecord("weather", "{}", "sunny")])
    assert await gate.aretrieve(Query("q", context={LEDGER_KEY: full})) == []
    assert gate.retrieve(Query("q", context={LEDGER_KEY: full})) == []
    assert inner.queries == []
    assert await gate.aretrieve(Query("q", context={LEDGER_KEY: FetchLedger()})) == documents
    assert gate.retrieve("q") == documents
    assert len(inner.queries) == 2
    with pytest.raises(TypeError, match="DocumentRetriever"):
        FetchGateRetriever(object())  # type: ignore[arg-type]


# -- the augmenter ---------------------------------------------------------------------------


def test_augmenter_renders_exactly_one_source() -> None:
    augmenter = TwoSourceAugmenter()
    documents = [Document(text="Returns within 30 days.", id="r")]
    ledger = FetchLedger([FetchRecord("order_status", '{"id": "A1"}', '{"status": "shipped"}')])

    with_data = augmenter.augment(Query("Where is A1?", context={LEDGER_KEY: ledger}), documents)
    assert '{"status": "shipped"}' in with_data.text
    assert "30 days" not in with_data.text  # never both
    assert "order_status" not in with_data.text
    assert with_data.text.endswith("Question: Where is A1?")

    with_documents = augmenter.augment(Query("Returns?"), documents)
    assert "[1] Returns within 30 days." in with_documents.text
    assert with_documents.text.index("30 days") < with_documents.text.index("Rules")
    assert "never claim to have queried" in with_documents.text

    empty = augmenter.augment(Query("Returns?", context={LEDGER_KEY: FetchLedger()}), [])
    assert empty.text.endswith("Question: Returns?")
    assert "nothing" in empty.text


def test_fetched_json_with_unicode_escapes_reaches_the_model_as_text() -> None:
    # A tool that returns json.dumps(...) text (ensure_ascii by default) or an MCP server's
    # escaped JSON passed through as is: the answer model read "\\u5df2\\u53d1\\u8d27", several
    # tokens a character, instead of 已发货.
    result = json.dumps({"订单号": "A1", "状态": "已发货", "备注": 'say "hi" \\u4e2d 😀\n'})
    ledger = FetchLedger([FetchRecord("order_status", "{}", result)])
    rendered = TwoSourceAugmenter().augment(Query("A1 呢？", context={LEDGER_KEY: ledger}), [])
    expected = '{"订单号": "A1", "状态": "已发货", "备注": "say \\"hi\\" \\\\u4e2d 😀\\n"}'
    assert expected in rendered.text
    assert "\\u" not in rendered.text.replace("\\\\u4e2d", "")
    # Not JSON: left alone, backslashes and all.
    path = "path C:\\users\\u4e2d"
    assert format_records([FetchRecord("t", "{}", path)]) == path


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(value=_json_values)
def test_unescaped_fetched_json_means_the_same(value: object) -> None:
    text = format_records([FetchRecord("t", "{}", json.dumps(value))])
    assert json.loads(text) == value
    assert all(
        f"\\u{ord(c):04x}" not in text
        for c in json.dumps(value, ensure_ascii=False)
        if ord(c) >= 0x80 and c.isprintable() and not 0xD800 <= ord(c) < 0xE000
    )


def test_augmenter_templates_are_checked() -> None:
    with pytest.raises(ValueError, match=r"data_template must contain .*missing: \{query\}"):
        TwoSourceAugmenter(data_template="{context}")
    with pytest.raises(ValueError, match=r"empty_template .*missing: \{query\}"):
        TwoSourceAugmenter(empty_template="Nothing.")
    with pytest.raises(ValueError, match=r"placeholders without a value: \['tone'\]"):
        TwoSourceAugmenter(documents_template="{context} {tone} {query}")
    with pytest.raises(ValueError, match="may not redefine"):
        TwoSourceAugmenter(variables={"query": "x"})
    custom = TwoSourceAugmenter(
        documents_template="{context}|{tone}|{query}", variables={"tone": "brief"}
    )
    rendered = custom.augment(Query("q"), [Document(text="d", id="d")])
    assert rendered.text == "[1] d|brief|q"


# -- tool trace --------------------------------------------------------------------------------


def test_trace_matches_results_to_the_round_by_place_not_by_id() -> None:
    events: list[object] = []
    trace = ToolTrace(events.append)
    calls = (
        ToolCall(id="call_0", name="a", arguments="{}"),
        ToolCall(id="call_0", name="b", arguments="{}"),
    )
    answers = ToolResponseMessage(
        responses=(
            ToolResponse(id="call_0", name="a", data="1"),
            ToolResponse(id="call_0", name="b", data="2"),
        )
    )
    trace.report_calls(chat_response(tool_calls=calls))
    # A tool loop that sends the model only the system message and the last results.
    trace.report_results([SystemMessage(text="rules"), answers])
    # The history the run ends with: each result is reported once.
    trace.report_results(
        [
            UserMessage(text="q"),
            AssistantMessage(tool_calls=calls),
            answers,
            AssistantMessage(text="ok"),
        ]
    )
    assert [(e.kind, e.name) for e in events] == [  # type: ignore[attr-defined]
        ("tool_call", "a"),
        ("tool_call", "b"),
        ("tool_result", "a"),
        ("tool_result", "b"),
    ]
    # A new round with the same id: the earlier round's results are not its results.
    trace.report_calls(chat_response(tool_calls=(ToolCall(id="call_0", name="c", arguments="{}"),)))
    trace.report_results([UserMessage(text="q"), AssistantMessage(tool_calls=calls), answers])
    assert [(e.kind, e.name) for e in events][4:] == [("tool_call", "c")]  # type: ignore[attr-defined]
