"""The scoring of ``tooluse eval``: argument checks, decisions, tool errors, claimed look-ups
(English and Chinese), repeated calls, and the sums per family."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tooluse.qa import (
    ArgumentCheck,
    EvalRun,
    Question,
    QuestionFamily,
    RunScore,
    TrajectoryStep,
    claims_lookup,
    score_run,
    tally,
)
from tooluse.search import TOOL_SEARCH_TOOL_NAME


def step(
    name: str, arguments: dict[str, Any] | str, is_error: bool | None = False
) -> TrajectoryStep:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return TrajectoryStep(name, text, is_error)


@pytest.mark.parametrize(
    ("spec", "value", "expected"),
    [
        ("fahrenheit", "fahrenheit", True),
        ("fahrenheit", "Fahrenheit", False),  # a bare value is exact
        (3, 3.0, True),
        (3, "3", False),
        (1, True, False),  # JSON true is not the number 1
        ([1, "a"], [1.0, "a"], True),
        ({"like": "People's Square"}, "peoples square", True),
        ({"like": "Asia/Tokyo"}, "asia/tokyo", True),
        ({"like": "Asia/Tokyo"}, "Tokyo", False),
        ({"like": ["北京", "Beijing"]}, "BEIJING", True),
        ({"like": ["北京", "Beijing"]}, "北京", True),
        ({"like": "A1001"}, "Ａ１００１", True),  # full-width forms
        ({"like": "A1001"}, 1001, False),
        ({"contains": "人民广场"}, "上海人民广场", True),
        ({"contains": "Bund"}, "the bund, Shanghai", True),
        ({"contains": "Bund"}, "Nanjing Road", False),
        ({"between": [3, 3]}, 3, True),
        ({"between": [1, 2]}, 2.5, False),
        ({"between": [1, 2]}, "1.5", False),
        ({"pattern": r"^[A-Z]\d{4}$"}, "C3003", True),
        ({"pattern": r"^[A-Z]\d{4}$"}, "order C3003", False),
    ],
)
def test_argument_checks(spec: Any, value: Any, expected: bool) -> None:
    assert ArgumentCheck.from_json(spec)(value) is expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"like": []}, "a text or a list of texts"),
        ({"like": "!!"}, "letters or digits"),
        ({"between": [3, 1]}, r"\[low, high\]"),
        ({"between": [1]}, r"\[low, high\]"),
        ({"pattern": "("}, "is not valid"),
        ({"near": "x"}, "an argument check is a value"),
        ({"like": "a", "contains": "b"}, "an argument check is a value"),
    ],
)
def test_bad_argument_checks_are_refused(spec: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ArgumentCheck.from_json(spec)


WEATHER = QuestionFamily(
    "weather",
    [Question("Weather in Paris?", {"get_weather": {"city": ArgumentCheck("like", "Paris")}})],
    ["get_weather"],
)
CANCEL = QuestionFamily(
    "cancel",
    [Question("Cancel C3", {"cancel_order": {"order_id": ArgumentCheck("like", "C3")}})],
    ["cancel_order"],
    allowed_tools=["get_order_status"],
)
KNOWLEDGE = QuestionFamily("returns", ["How long do I have to return an item?"])


def test_the_expected_tool_with_the_right_arguments_passes() -> None:
    score = score_run(WEATHER, WEATHER.questions[0], [step("get_weather", {"city": "paris"})], "")
    assert score == RunScore(True, True, False, False, 0) and score.passed


def test_wrong_arguments_fail_the_arguments_not_the_decision() -> None:
    (question,) = WEATHER.questions
    for arguments in ({"city": "London"}, {"town": "Paris"}, "{not json", "[]"):
        score = score_run(WEATHER, question, [step("get_weather", arguments)], "")
        assert (score.decision_ok, score.arguments_ok, score.passed) == (True, False, False)
    # One call of the tool with the right arguments is enough.
    calls = [step("get_weather", {"city": "London"}), step("get_weather", {"city": "Paris"})]
    assert score_run(WEATHER, question, calls, "").arguments_ok is True


def test_a_missing_or_unexpected_tool_is_a_wrong_decision() -> None:
    (question,) = WEATHER.questions
    missed = score_run(WEATHER, question, [], "It is sunny in Paris.")
    assert (missed.decision_ok, missed.arguments_ok) == (False, False)
    extra = [step("get_weather", {"city": "Paris"}), step("get_current_time", {})]
    assert not score_run(WEATHER, question, extra, "").decision_ok
    # allowed_tools may be called besides the expected ones, but not instead of them.
    (cancel,) = CANCEL.questions
    both = [step("get_order_status", {"order_id": "C3"}), step("cancel_order", {"order_id": "C3"})]
    assert score_run(CANCEL, cancel, both, "").passed
    assert not score_run(CANCEL, cancel, both[:1], "").decision_ok
    # Without argument checks, a wrong decision leaves the arguments unscored.
    plain = QuestionFamily("plain", ["Weather?"], ["get_weather"])
    assert score_run(plain, plain.questions[0], [], "").arguments_ok is None


def test_no_call_is_right_only_when_none_is_due() -> None:
    (question,) = KNOWLEDGE.questions
    assert score_run(KNOWLEDGE, question, [], "30 days.").passed
    over = score_run(KNOWLEDGE, question, [step("get_order_status", {"order_id": "x"})], "")
    assert (over.decision_ok, over.arguments_ok, over.passed) == (False, None, False)
    # Searching for tools fetches no data: it is not a call, unless the family expects it.
    search = [step(TOOL_SEARCH_TOOL_NAME, {"query": "returns"})]
    assert score_run(KNOWLEDGE, question, search, "30 days.").passed
    searching = QuestionFamily("search", ["find a tool"], [TOOL_SEARCH_TOOL_NAME])
    assert score_run(searching, searching.questions[0], search, "").passed


def test_a_tool_error_result_fails_the_run() -> None:
    (question,) = WEATHER.questions
    failed = [step("get_weather", {"city": "Paris"}, is_error=True)]
    score = score_run(WEATHER, question, failed, "")
    assert score.decision_ok and score.arguments_ok and score.tool_error and not score.passed
    # A call held for approval has no result yet: not an error.
    held = [step("get_weather", {"city": "Paris"}, is_error=None)]
    assert score_run(WEATHER, question, held, "").passed


def test_repeated_identical_calls_are_counted() -> None:
    (question,) = WEATHER.questions
    calls = [
        step("get_weather", {"city": "Paris", "unit": "celsius"}),
        step("get_weather", '{"unit": "celsius",  "city": "Paris"}'),  # same call, other text
        step("get_weather", {"city": "Lyon"}),
        step("get_weather", {"city": "Paris", "unit": "celsius"}),
    ]
    assert score_run(WEATHER, question, calls, "").repeated_calls == 2


@pytest.mark.parametrize(
    "text",
    [
        "I checked the weather for you: it is sunny.",
        "I've looked it up: order A1001 has shipped.",
        "We have just verified your order.",
        "Let me check that for you. It is 18 °C.",
        "According to the system, your parcel is out for delivery.",
        "The system shows that order A1001 has shipped.",
        "After checking, there are two lockers nearby.",
        "我帮您查了系统收录的信息，订单已发货。",
        "我已为您查询到订单状态：已发货。",
        "我查询了天气，北京今天晴。",
        "经查询，您的订单正在派送中。",
        "查询结果显示人民广场附近有 3 个自提点。",
        "根据系统记录，订单已签收。",
        "系统显示您的包裹已到达。",
        "已为您核实，积分将在月底过期。",
    ],
)
def test_claims_of_a_look_up_are_detected(text: str) -> None:
    assert claims_lookup(text)


@pytest.mark.parametrize(
    "text",
    [
        "Unused items can be returned within 30 days of delivery.",
        "I can check the weather if you tell me the city.",
        "You can check your order on the order page.",
        "METAR stands for Meteorological Aerodrome Report.",
        "我可以帮您查询订单状态，请提供订单号。",
        "您可以在订单页面查询物流信息。",
        "我无法查询实时天气。",
        "积分自获得之日起 12 个月后过期。",
    ],
)
def test_offers_and_plain_answers_are_not_claims(text: str) -> None:
    assert not claims_lookup(text)


def test_a_claim_counts_only_when_nothing_was_called() -> None:
    (question,) = WEATHER.questions
    claim = "I checked: it is sunny in Paris."
    assert score_run(WEATHER, question, [], claim).claimed_lookup
    called = [step("get_weather", {"city": "Paris"})]
    assert not score_run(WEATHER, question, called, claim).claimed_lookup
    (knowledge,) = KNOWLEDGE.questions
    made_up = score_run(KNOWLEDGE, knowledge, [], "经查询，退货期限为 30 天。")
    assert made_up.decision_ok and made_up.claimed_lookup and not made_up.passed


def run(
    score: RunScore, *, latency: float = 1.0, error: str | None = None, due_none: bool = False
) -> EvalRun:
    return EvalRun(
        family="f",
        question="q",
        attempt=1,
        trajectory=(),
        route=None,
        paused=False,
        error=error,
        target="t",
        answer="",
        latency_seconds=latency,
        score=score,
        no_call_due=due_none,
    )


def test_tally_sums_runs() -> None:
    right = RunScore(True, True, False, False, 0)
    runs = [
        run(right, latency=2.0),
        run(RunScore(True, False, False, False, 1), latency=4.0),
        run(RunScore(True, True, True, False, 0), latency=1.0),
        run(RunScore(False, None, False, True, 0), latency=3.0, due_none=True),
        run(RunScore(True, None, False, False, 0), latency=9.0, due_none=True),
        run(right, latency=5.0, error="ConnectionError: down"),
    ]
    summary = tally(runs)
    assert summary.runs == 6
    assert summary.decisions_ok == 4  # the failed run does not count as decided
    assert (summary.arguments_checked, summary.arguments_ok) == (4, 2)
    assert (summary.no_call_due, summary.no_call_ok) == (2, 1)
    assert (summary.claims, summary.tool_errors, summary.errors) == (1, 1, 1)
    assert (summary.repeated_calls, summary.passed) == (1, 2)
    assert summary.latency_median == 3.5
    assert summary.latency_p90 == 9.0
    assert summary.decision_rate == pytest.approx(4 / 6)
    assert tally([]).latency_median is None and tally([]).decision_rate == 0.0
