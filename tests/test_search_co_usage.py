"""``ToolCoUsage``: tools past turns called together, lifted behind a found tool; never a tool the
session does not hold, never from one accident, nothing changed without it."""

from __future__ import annotations

import asyncio
import json
import pickle
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from search_fakes import BagOfWordsModel
from tooluse.calling import AuditRecord, Caller, SqliteAuditLog
from tooluse.messages import (
    AssistantMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.search import (
    BM25ToolIndex,
    HybridToolIndex,
    RegexToolIndex,
    SessionToolIndex,
    ToolCoUsage,
    ToolReference,
    ToolSearchRequest,
    ToolSearchResponse,
    ToolSearchToolCallingAdvisor,
)
from tooluse.search._tool import SESSION_ID_CONTEXT_KEY
from tooluse.tools import ToolContext

CAR = [
    ToolReference("startEngine", summary="Start the car's engine", category="vehicle"),
    ToolReference("pressBrakePedal", summary="Press the brake pedal", category="vehicle"),
    ToolReference("lockDoors", summary="Lock or unlock the doors", category="vehicle"),
    ToolReference("displayCarStatus", summary="Show fuel and tire pressure", category="vehicle"),
    ToolReference("get_weather", summary="Current weather of a city", category="weather"),
    ToolReference("send_message", summary="Send a message to a user", category="messages"),
]  # fmt: skip
START = ["startEngine", "pressBrakePedal", "lockDoors"]


def names(
    index: SessionToolIndex[Any], query: str, session: str = "s", **request: Any
) -> list[str]:
    return index.search(ToolSearchRequest(session, query, **request)).tool_names


def indexes(co_usage: ToolCoUsage | None) -> list[SessionToolIndex[Any]]:
    return [
        BM25ToolIndex(co_usage=co_usage),
        RegexToolIndex(co_usage=co_usage),
        HybridToolIndex(BagOfWordsModel(), background_embedding=False, co_usage=co_usage),
    ]


def test_a_companion_needs_min_support_turns_or_two_that_agree() -> None:
    both = (("lockDoors", 1.0), ("pressBrakePedal", 1.0))
    assert ToolCoUsage([START], min_support=3).companions("startEngine") == ()  # one turn
    # 2 turns of the tool's only 2 (P's 95% lower bound 0.42 >= 0.3): fewer than min_support
    # suffice when they agree; 2 of 3 (bound 0.25) do not.
    usage = ToolCoUsage([START, START], min_support=3)
    assert usage.companions("startEngine") == both
    usage.observe(["startEngine"])
    assert usage.companions("startEngine") == ()
    usage.observe(START)
    assert usage.companions("startEngine") == (("lockDoors", 0.75), ("pressBrakePedal", 0.75))
    # 3 of 10 meet min_support and min_confidence; no bound needed (it is 0.13).
    usage = ToolCoUsage([START] * 3 + [["startEngine"]] * 7, min_support=3)
    assert usage.companions("startEngine") == (("lockDoors", 0.3), ("pressBrakePedal", 0.3))
    strict = ToolCoUsage([START, START], min_support=3, min_confidence=0.5)
    assert strict.companions("startEngine") == ()  # the bound 0.42 < 0.5


def test_companions_meet_the_conditional_frequency_best_first() -> None:
    turns = [["a", "b"]] * 6 + [["a", "c"]] * 3 + [["a", "d"]] * 2 + [["a"]] * 9
    usage = ToolCoUsage(turns, min_support=2, min_confidence=0.12, per_tool=5)
    # P(b|a) = 6/20, P(c|a) = 3/20; d (2/20) is below 0.12
    assert usage.companions("a") == (("b", 0.3), ("c", 0.15))
    assert usage.companions("b") == (("a", 1.0),)  # both ways
    assert usage.count("a") == 20 and usage.turns == 20
    assert ToolCoUsage(turns, min_support=2, min_confidence=0.12, per_tool=1).companions("a") == (
        ("b", 0.3),
    )


def test_repeats_in_a_turn_count_once() -> None:
    usage = ToolCoUsage([["a", "b", "a", "b"]] * 3)
    assert usage.count("a") == 3
    assert usage.companions("a") == (("b", 1.0),)


@pytest.mark.parametrize("index", indexes(ToolCoUsage([START] * 3)), ids=type)
def test_a_found_tools_companions_are_lifted_behind_it(index: SessionToolIndex[Any]) -> None:
    index.index_tools("s", CAR)
    found = names(index, "start engine", max_results=3)
    assert found == ["startEngine", "lockDoors", "pressBrakePedal"]
    scores = [
        r.relevance_score
        for r in index.search(ToolSearchRequest("s", "start engine")).tool_references
    ]
    assert scores[1] == scores[0]  # the first's score x P = 1


def test_a_companion_ranked_above_is_left_where_it_is() -> None:
    index = BM25ToolIndex(co_usage=ToolCoUsage([["send_message", "get_weather"]] * 3))
    index.index_tools("s", CAR)
    plain = BM25ToolIndex()
    plain.index_tools("s", CAR)
    query = "weather in a city, then send a message"
    assert names(plain, query)[:2] == names(index, query)[:2]
    assert sorted(names(plain, query)[:2]) == ["get_weather", "send_message"]


def test_only_the_first_anchors_lift() -> None:
    turns = [["lockDoors", "get_weather"]] * 3
    query = "show fuel and tire pressure, lock the doors"
    found = {}
    for anchors in (1, 2):
        index = BM25ToolIndex(co_usage=ToolCoUsage(turns, anchors=anchors))
        index.index_tools("s", CAR)
        found[anchors] = names(index, query)
    assert found[1][:2] == ["displayCarStatus", "lockDoors"]
    assert "get_weather" not in found[1]  # lockDoors is second: no anchor
    assert found[2][:3] == ["displayCarStatus", "lockDoors", "get_weather"]


def _lifted(usage: ToolCoUsage, ranked: Sequence[str], limit: int = 10) -> list[str]:
    by_name = {t.tool_name: p for p, t in enumerate(CAR)}
    lifted = usage.lift([(by_name[n], 1.0) for n in ranked], CAR, lambda: by_name, None, limit)
    return [CAR[p].tool_name for p, _ in lifted]


def test_a_tool_ranked_below_the_top_3_lifts_its_companion_behind_it() -> None:
    # cd -> ls: the task's own text found ls 5th; its companion follows it there.
    ranked = ["get_weather", "send_message", "displayCarStatus", "lockDoors", "startEngine"]
    turns = [["startEngine", "pressBrakePedal"]] * 3
    found = _lifted(ToolCoUsage(turns), ranked)
    assert found == [*ranked, "pressBrakePedal"]
    assert _lifted(ToolCoUsage(turns, anchors=3), ranked) == ranked  # the top 3 only


def test_a_companion_never_moves_above_the_tool_that_brought_it() -> None:
    ranked = ["get_weather", "send_message", "displayCarStatus", "startEngine", "lockDoors"]
    found = _lifted(ToolCoUsage([["startEngine", "pressBrakePedal"]] * 3), ranked, limit=5)
    # 4th lifts its companion to 5th: the tools ranked above it keep their places.
    assert found == [*ranked[:4], "pressBrakePedal"]


def test_a_companion_s_companion_is_not_lifted() -> None:
    # Chains (startEngine -> pressBrakePedal -> lockDoors) lifted more tools the tasks did not
    # need than ones they did (docs/benchmarks.md, session h29c): only ranked tools anchor.
    turns = [["startEngine", "pressBrakePedal"]] * 3 + [["pressBrakePedal", "lockDoors"]] * 3
    usage = ToolCoUsage(turns)
    assert ("lockDoors", 0.5) in usage.companions("pressBrakePedal")
    assert _lifted(usage, ["startEngine", "get_weather"]) == [
        "startEngine", "pressBrakePedal", "get_weather"
    ]  # fmt: skip
    # Ranked too, pressBrakePedal anchors where the search ranked it (3rd), not where it
    # was lifted to: its companion comes behind the tools ranked above it.
    found = _lifted(usage, ["startEngine", "get_weather", "pressBrakePedal"])
    assert found == ["startEngine", "pressBrakePedal", "get_weather", "lockDoors"]


def test_tools_the_usage_never_saw_are_not_remembered_by_searches() -> None:
    """Every ranked tool is looked up: a search over tools without pairs (most of a big
    catalogue) must not grow the usage's memory by their names."""
    usage = ToolCoUsage([["startEngine", "pressBrakePedal"]] * 3)
    assert all(usage.companions(f"never_called_{n}") == () for n in range(1000))
    assert usage.companions("startEngine") == (("pressBrakePedal", 1.0),)
    assert set(usage._cache) <= {"startEngine", "pressBrakePedal"}  # the tools with pairs


@pytest.mark.parametrize("kind", ["bm25", "regex", "hybrid"])
def test_nothing_changes_without_co_usage_or_without_a_companion(kind: str) -> None:
    queries = ["start engine", "weather", "lock the doors", "send a message", "brake"]
    unrelated = ToolCoUsage([["x", "y"]] * 5)
    built = []
    for co_usage in (None, ToolCoUsage(), unrelated):
        index = {i: indexes(co_usage)[n] for n, i in enumerate(["bm25", "regex", "hybrid"])}[kind]
        index.index_tools("s", CAR)
        built.append([index.search(ToolSearchRequest("s", q)).tool_references for q in queries])
    assert built[0] == built[1] == built[2]


def test_a_companion_outside_the_sessions_tools_is_never_returned() -> None:
    """Per-tenant visibility: a session holds the tools its caller may see, and a companion
    learned elsewhere is looked up among them only."""
    index = BM25ToolIndex(co_usage=ToolCoUsage([START] * 3))
    index.index_tools("everything", CAR)
    index.index_tools("restricted", [t for t in CAR if t.tool_name != "pressBrakePedal"])
    assert "pressBrakePedal" in names(index, "start engine", "everything", max_results=3)
    found = names(index, "start engine", "restricted")
    assert "pressBrakePedal" not in found
    assert found[:2] == ["startEngine", "lockDoors"]


def test_a_companion_outside_the_requested_category_is_not_returned() -> None:
    index = BM25ToolIndex(co_usage=ToolCoUsage([["startEngine", "get_weather"]] * 3))
    index.index_tools("s", CAR)
    assert names(index, "start engine")[:2] == ["startEngine", "get_weather"]
    assert "get_weather" not in names(index, "start engine", category_filter="vehicle")


def test_co_usage_can_be_replaced_on_a_running_index() -> None:
    index = BM25ToolIndex()
    index.index_tools("s", CAR)
    assert "pressBrakePedal" not in names(index, "start engine", max_results=2)
    index.co_usage = ToolCoUsage([["startEngine", "pressBrakePedal"]] * 3)
    assert names(index, "start engine", max_results=2) == ["startEngine", "pressBrakePedal"]
    index.co_usage = None
    assert "pressBrakePedal" not in names(index, "start engine", max_results=2)


def test_learning_while_searching_takes_effect_at_the_next_search() -> None:
    usage = ToolCoUsage(min_support=2)
    index = BM25ToolIndex(co_usage=usage)
    index.index_tools("s", CAR)
    usage.observe(["startEngine", "pressBrakePedal"])
    assert "pressBrakePedal" not in names(index, "start engine", max_results=2)
    usage.observe(["startEngine", "pressBrakePedal"])
    assert names(index, "start engine", max_results=2) == ["startEngine", "pressBrakePedal"]


def test_pickle_and_json_keep_the_counts_and_settings() -> None:
    usage = ToolCoUsage([START] * 3 + [["startEngine"]], min_support=2, per_tool=1)
    for restored in (
        pickle.loads(pickle.dumps(usage)),
        ToolCoUsage.from_dict(json.loads(json.dumps(usage.to_dict()))),
    ):
        assert restored.companions("startEngine") == usage.companions("startEngine")
        assert restored.companions("startEngine") == (("lockDoors", 0.75),)
        assert restored.turns == 4 and restored.settings() == usage.settings()
        assert restored.settings()["anchors"] is None  # every ranked tool, as by default
        restored.observe(["startEngine"])  # a working object, lock included
        assert restored.count("startEngine") == 5


def test_memory_is_bounded() -> None:
    usage = ToolCoUsage(max_tools=10, max_companions=4, min_support=1, min_confidence=0.01)
    for number in range(100):
        usage.observe(["hub", f"tool_{number}"])
    counts = usage.to_dict()
    assert len(counts["tools"]) <= 10
    assert all(len(companions) <= 4 for companions in counts["pairs"].values())
    assert usage.count("hub") == 100  # the most called tool is kept
    wide = ToolCoUsage([[f"t{n}" for n in range(200)]])
    assert len(wide.to_dict()["tools"]) == 32  # a turn counts its first 32 tools


def test_audit_records_make_turns_by_conversation_and_gap(tmp_path: Path) -> None:
    now = time.time()  # the log deletes records past its retention

    def record(tool: str, at: float, **changes: Any) -> AuditRecord:
        fields: dict[str, Any] = {
            "at": now + at, "tool": tool, "call_id": "c", "arguments": "{}", "outcome": "ran",
            "result": "ok", "is_error": False, "latency_ms": 1.0, "approval": "not needed",
            "approved_by": None, "user": "u", "tenant": "acme", "conversation": "c1",
        }  # fmt: skip
        return AuditRecord(**(fields | changes))

    records = [
        record("toolSearchTool", 0.0),
        record("startEngine", 1.0, outcome="failed"),
        record("pressBrakePedal", 2.0),
        record("startEngine", 3.0),
        record("lockDoors", 4.0, outcome="refused"),  # never called
        record("get_fuel", 4.5, is_error=True),  # its result an error: no use found
        record("get_weather", 1000.0),  # a later turn
        record("send_message", 1001.0, conversation="c2", tenant="other"),
        record("startEngine", 5.0, conversation=None),  # alone
    ]
    usage = ToolCoUsage.from_audit_records(reversed(records), tenant="acme", min_support=1)
    assert usage.turns == 3
    assert usage.companions("startEngine") == (("pressBrakePedal", 0.5),)
    assert usage.count("toolSearchTool") == usage.count("lockDoors") == 0
    assert usage.count("get_fuel") == 0
    assert usage.count("send_message") == 0  # another tenant's
    everyone = ToolCoUsage.from_audit_records(records, gap=10_000.0, min_support=1)
    assert ("get_weather", 0.5) in everyone.companions("startEngine")
    log = SqliteAuditLog(tmp_path / "audit.db")
    try:
        asyncio.run(log.record(records))
        stored = ToolCoUsage.from_audit_records(log.query(tenant="acme"), min_support=1)
    finally:
        log.close()
    assert stored.to_dict() == usage.to_dict()


def test_conversations_make_a_turn_per_user_message() -> None:
    def calls(*names: str) -> AssistantMessage:
        return AssistantMessage("", [ToolCall(id=n, name=n, arguments="{}") for n in names])

    conversation = [
        UserMessage("start the car"),
        calls("toolSearchTool"),
        calls("startEngine"),
        ToolResponseMessage([ToolResponse(id="startEngine", name="startEngine", data="brake!")]),
        calls("pressBrakePedal", "startEngine"),
        AssistantMessage("Started."),
        UserMessage("thanks"),
        AssistantMessage("You're welcome."),
        UserMessage("and the weather?"),
        calls("get_weather"),
    ]
    usage = ToolCoUsage.from_conversations([conversation, conversation[:3]], min_support=1)
    assert usage.turns == 3  # the turns that called tools
    assert usage.companions("startEngine") == (("pressBrakePedal", 0.5),)
    assert usage.count("toolSearchTool") == 0 and usage.count("get_weather") == 1
    with pytest.raises(TypeError, match="iterable of message lists, got UserMessage"):
        ToolCoUsage.from_conversations(conversation)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: ToolCoUsage().observe("startEngine"), TypeError, "not one string"),
        (lambda: ToolCoUsage().observe(["ok", " "]), ValueError, "non-blank string"),
        (lambda: ToolCoUsage().observe([3]), ValueError, "got 3"),
        (lambda: ToolCoUsage("ab"), TypeError, "iterable of turns"),
        (lambda: ToolCoUsage(min_confidence=0), ValueError, r"min_confidence must be in \(0, 1\]"),
        (lambda: ToolCoUsage(min_confidence=1.5), ValueError, "min_confidence"),
        (lambda: ToolCoUsage(min_support=0), ValueError, "min_support must be an integer"),
        (lambda: ToolCoUsage(anchors=2.0), ValueError, "anchors must be an integer .* or None"),
        (
            lambda: ToolCoUsage(max_tools=1),
            ValueError,
            "max_tools must be an integer of at least 2",
        ),
        (lambda: BM25ToolIndex(co_usage={"a": "b"}), TypeError, "co_usage must be a ToolCoUsage"),
        (lambda: ToolCoUsage.from_audit_records([("a", 1)]), TypeError, "expected audit records"),
        (lambda: ToolCoUsage.from_audit_records([], gap=0), ValueError, "gap must be > 0"),
        (lambda: ToolCoUsage.from_dict({"format": 9}), ValueError, "not a ToolCoUsage of format"),
    ],
)
def test_bad_input_is_refused_by_name(call: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_bad_data_is_refused_by_name() -> None:
    good = ToolCoUsage([START] * 3).to_dict()
    with pytest.raises(ValueError, match="'turns' must be an integer"):
        ToolCoUsage.from_dict(good | {"turns": -1})
    with pytest.raises(ValueError, match="the count of 'startEngine' must be an integer >= 1"):
        ToolCoUsage.from_dict(good | {"tools": {"startEngine": 0}})
    with pytest.raises(ValueError, match="pairs of 'ghost'"):
        ToolCoUsage.from_dict(good | {"pairs": {"ghost": {"startEngine": 1}}})


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(
    data=st.dictionaries(
        st.sampled_from(["format", "settings", "turns", "tools", "pairs"]), JSONISH
    )
)
def test_any_malformed_data_is_a_value_error(data: dict[str, Any]) -> None:
    good = ToolCoUsage([START] * 3).to_dict()
    try:
        restored = ToolCoUsage.from_dict(good | data)
    except ValueError as error:
        assert str(error)
    else:
        assert isinstance(restored.turns, int)


@given(
    turns=st.lists(st.lists(st.sampled_from([t.tool_name for t in CAR] + ["gone"]), max_size=4)),
    ranked=st.lists(st.integers(0, len(CAR) - 1), unique=True, min_size=1),
    limit=st.integers(1, 8),
    allowed=st.none() | st.sets(st.integers(0, len(CAR) - 1)),
)
def test_lift_keeps_the_first_and_returns_each_allowed_tool_once(
    turns: list[list[str]], ranked: list[int], limit: int, allowed: set[int] | None
) -> None:
    if allowed is not None:
        ranked = [p for p in ranked if p in allowed] or ranked[:0]
    usage = ToolCoUsage(turns, min_support=1, min_confidence=0.01)
    positions = {t.tool_name: p for p, t in enumerate(CAR)}
    lifted = usage.lift([(p, 1.0) for p in ranked], CAR, lambda: positions, allowed, limit)
    found = [p for p, _ in lifted]
    assert len(found) == len(set(found)) <= limit
    assert found[:1] == ranked[:1]
    assert allowed is None or set(found) <= allowed
    assert set(ranked[:limit]) - set(found) == set() or len(found) == limit


TENANTS = {
    "acme": ToolCoUsage([["startEngine", "pressBrakePedal"]] * 3),
    "globex": ToolCoUsage([["startEngine", "get_weather"]] * 3),
}


def _by_tenant(caller: Caller) -> ToolCoUsage | None:
    return None if caller.tenant_id is None else TENANTS.get(caller.tenant_id)


def test_a_request_s_co_usage_replaces_the_index_s_own() -> None:
    index = BM25ToolIndex(co_usage=TENANTS["globex"])
    index.index_tools("s", CAR)
    assert names(index, "start engine", max_results=2) == ["startEngine", "get_weather"]
    found = names(index, "start engine", max_results=2, co_usage=TENANTS["acme"])
    assert found == ["startEngine", "pressBrakePedal"]
    # An empty one lifts nothing; None leaves the index's own.
    assert "get_weather" not in names(index, "start engine", max_results=2, co_usage=ToolCoUsage())
    assert names(index, "start engine", max_results=2, co_usage=None)[1] == "get_weather"


def _advisor_search(advisor: ToolSearchToolCallingAdvisor, **caller: str) -> list[str]:
    context = ToolContext({SESSION_ID_CONTEXT_KEY: "s", **caller})
    return advisor.search_tool.search("start engine", context, max_results=2)


def test_the_advisor_lifts_the_caller_s_companions_only() -> None:
    advisor = ToolSearchToolCallingAdvisor(tool_index=BM25ToolIndex(), co_usage=_by_tenant)
    advisor.tool_index.index_tools("s", CAR)
    assert _advisor_search(advisor, tenant_id="acme") == ["startEngine", "pressBrakePedal"]
    assert _advisor_search(advisor, tenant_id="globex") == ["startEngine", "get_weather"]
    # No tenant, or one without usage: the index's own (none).
    assert _advisor_search(advisor) == ["startEngine"]
    assert _advisor_search(advisor, tenant_id="initech") == ["startEngine"]
    fixed = ToolSearchToolCallingAdvisor(tool_index=BM25ToolIndex(), co_usage=TENANTS["acme"])
    fixed.tool_index.index_tools("s", CAR)
    assert _advisor_search(fixed, tenant_id="globex") == ["startEngine", "pressBrakePedal"]


class _PlainIndex:
    """A ToolIndex of another implementation: it knows nothing of co-usage."""

    def __init__(self) -> None:
        self.requests: list[ToolSearchRequest] = []

    def index_tool(self, session_id: str, reference: ToolReference) -> None: ...

    def index_tools(self, session_id: str, references: Sequence[ToolReference]) -> None: ...

    def search(self, request: ToolSearchRequest) -> ToolSearchResponse:
        self.requests.append(request)
        return ToolSearchResponse((ToolReference("startEngine"),))

    def clear_index(self, session_id: str) -> None: ...


def test_an_index_that_ignores_co_usage_still_works() -> None:
    index = _PlainIndex()
    advisor = ToolSearchToolCallingAdvisor(tool_index=index, co_usage=_by_tenant)
    assert _advisor_search(advisor, tenant_id="acme") == ["startEngine"]
    assert index.requests[0].co_usage is TENANTS["acme"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: ToolSearchRequest("s", "q", co_usage={}),  # type: ignore[arg-type]
            "co_usage must be a ToolCoUsage or None",
        ),
        (
            lambda: ToolSearchToolCallingAdvisor(co_usage="acme"),  # type: ignore[arg-type]
            "ToolSearchToolCallingAdvisor: co_usage must be a ToolCoUsage or a function",
        ),
        (
            lambda: ToolSearchToolCallingAdvisor(co_usage=ToolCoUsage),  # type: ignore[arg-type]
            "co_usage must be a ToolCoUsage or a function",
        ),
        (
            lambda: _advisor_search(
                ToolSearchToolCallingAdvisor(
                    tool_index=BM25ToolIndex(),
                    co_usage=lambda caller: {"a": 1},  # type: ignore[arg-type]
                )
            ),
            "returned dict, not a ToolCoUsage or None",
        ),
    ],
)
def test_bad_co_usage_settings_are_refused_by_name(call: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        call()


def test_calls_make_turns_by_conversation_and_gap() -> None:
    calls = [(0.0, "a", "c1"), (400.0, "a", "c1"), (10.0, "b", "c1"), (5.0, "b", None)]
    usage = ToolCoUsage.from_calls(calls, min_support=1)  # in any order
    assert usage.turns == 3  # c1: a, b (10 s apart), then a (390 s later); b alone
    assert usage.companions("a") == (("b", 0.5),)
    with pytest.raises(ValueError, match="gap must be > 0"):
        ToolCoUsage.from_calls(calls, gap=-1)


def test_the_catalogues_map_is_made_only_once_a_companion_is_found() -> None:
    # A new session's search over a big catalogue must not map every tool by name when no
    # tool it ranks has a companion (the service keeps a usage per tenant, often empty).
    usage = ToolCoUsage([["startEngine", "pressBrakePedal"]] * 3)
    asked: list[int] = []

    def positions() -> dict[str, int]:
        asked.append(1)
        return {t.tool_name: p for p, t in enumerate(CAR)}

    by_name = {t.tool_name: p for p, t in enumerate(CAR)}
    paired = {"startEngine", "pressBrakePedal"}
    alone = [(by_name[t.tool_name], 1.0) for t in CAR if t.tool_name not in paired]
    assert usage.lift(alone, CAR, positions, None, 5) == alone[:5]
    assert asked == []
    engine = [(by_name["startEngine"], 1.0)]
    lifted = usage.lift(engine, CAR, positions, None, 5)
    assert [CAR[p].tool_name for p, _ in lifted] == ["startEngine", "pressBrakePedal"]
    assert asked == [1]
