"""Which tools a caller may see and use (``ToolCallingManager(tool_visibility=...)``): a tool
the policy hides is never offered to the model, never found by tool search and never run,
even when the model names it anyway; the caller comes from the tool context."""

from __future__ import annotations

import json

import pytest

from _calling_tools import FakeTool, prompt_with, tool_calls_response
from tooluse.advisors import ToolCallingAdvisor
from tooluse.calling import (
    ROLES_KEY,
    Caller,
    StaticToolCallbackResolver,
    ToolAccess,
    ToolAccessPolicy,
    ToolCallingManager,
    ToolVisibility,
)
from tooluse.client import ChatClient
from tooluse.memory import CONVERSATION_ID
from tooluse.messages import ToolResponseMessage
from tooluse.search import (
    RegexToolIndex,
    ToolCoUsage,
    ToolSearchRequest,
    ToolSearchToolCallingAdvisor,
)
from tooluse.testing import ScriptedModel, tool_call
from tooluse.tools import tool, tool_callbacks

refunds: list[str] = []


@tool(read_only=True)
def order_status(order_id: str) -> str:
    """Status of an order."""
    return f"{order_id}: shipped"


@tool(requires_approval=False)
def refund_order(order_id: str) -> str:
    """Refund an order."""
    refunds.append(order_id)
    return f"refunded {order_id}"


SUPPORT_ONLY = ToolAccessPolicy(tools={"refund_order": ToolAccess(allow_roles=["support"])})
ANN = Caller("ann", "acme", frozenset({"customer"}))
SAM = Caller("sam", "acme", frozenset({"support"}))


def client(model: ScriptedModel, advisor: ToolCallingAdvisor | None = None) -> ChatClient:
    if advisor is None:
        advisor = ToolCallingAdvisor(
            tool_calling_manager=ToolCallingManager(tool_visibility=SUPPORT_ONLY)
        )
    return ChatClient(model, tools=[order_status, refund_order], tool_calling_advisor=advisor)


def offered(model: ScriptedModel) -> list[list[str]]:
    return [[c.definition.name for c in p.options.tool_callbacks] for p in model.requests]


def test_the_caller_round_trips_through_the_tool_context() -> None:
    context = SAM.tool_context()
    assert context == {"user_id": "sam", "tenant_id": "acme", ROLES_KEY: ["support"]}
    assert json.loads(json.dumps(context)) == context  # a paused run's state keeps it
    assert Caller.of(context) == SAM
    assert Caller.of({}) == Caller()
    assert Caller.of({ROLES_KEY: "admin"}).roles == {"admin"}
    with pytest.raises(TypeError, match="list of names"):
        Caller("ann", roles="admin")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rule", "allowed"),
    [
        (ToolAccess(), {"ann", "sam", "eve", "nobody"}),
        (ToolAccess(allow_tenants=["acme"]), {"ann", "sam"}),
        (ToolAccess(deny_tenants=["trial"]), {"ann", "sam", "nobody"}),
        (ToolAccess(allow_roles=["support", "admin"]), {"sam"}),
        (ToolAccess(deny_roles=["customer"]), {"sam", "eve", "nobody"}),
        (ToolAccess(allow_tenants=["acme"], deny_roles=["support"]), {"ann"}),
    ],
)
def test_access_rules_allow_and_deny_by_tenant_and_role(
    rule: ToolAccess, allowed: set[str]
) -> None:
    callers = {
        "ann": ANN,
        "sam": SAM,
        "eve": Caller("eve", "trial", frozenset({"guest"})),
        "nobody": Caller(),
    }
    assert {name for name, caller in callers.items() if rule.permits(caller)} == allowed


def test_every_rule_that_applies_must_allow() -> None:
    policy = ToolAccessPolicy(
        default=ToolAccess(deny_tenants=["trial"]),
        tools={"refund_order": ToolAccess(allow_roles=["support"])},
    )
    assert isinstance(policy, ToolVisibility)
    status, refund = tool_callbacks(order_status, refund_order)
    assert policy.allows(SAM, refund) and policy.allows(ANN, status)
    assert not policy.allows(ANN, refund)
    trial_support = Caller("tim", "trial", frozenset({"support"}))
    assert not policy.allows(trial_support, refund)  # the default forbids it
    assert not policy.allows(trial_support, status)


def test_a_hidden_tool_is_not_offered_and_a_call_of_it_is_an_unknown_tool() -> None:
    refunds.clear()
    # The model names the tool it was not offered (it read of it somewhere).
    model = ScriptedModel([tool_call("refund_order", {"order_id": "A1"}, id="r1"), "Done."])
    reply = client(model).prompt("Refund A1").tool_context(ANN.tool_context()).call()
    assert reply.content() == "Done."
    assert offered(model) == [["order_status"], ["order_status"]]
    result = model.requests[1].messages[-1]
    assert isinstance(result, ToolResponseMessage)
    response = result.responses[0]
    assert response.is_error
    # What the model reads for a tool that does not exist, naming only the tools it has.
    assert response.data == (
        "Unknown tool 'refund_order': no tool of that name is available. "
        "Available tools: order_status."
    )
    assert refunds == []


def test_an_allowed_caller_is_offered_the_tool_and_it_runs() -> None:
    refunds.clear()
    model = ScriptedModel([tool_call("refund_order", {"order_id": "A1"}, id="r1"), "Done."])
    client(model).prompt("Refund A1").tool_context(SAM.tool_context()).call()
    assert offered(model)[0] == ["order_status", "refund_order"]
    assert refunds == ["A1"]


async def test_the_manager_refuses_a_hidden_tool_whatever_the_request_attaches() -> None:
    hidden = FakeTool("refund_order")
    resolved = FakeTool("wipe")
    manager = ToolCallingManager(
        tool_visibility=ToolAccessPolicy(
            tools={name: ToolAccess(allow_roles=["support"]) for name in ("refund_order", "wipe")}
        ),
        resolver=StaticToolCallbackResolver([resolved]),
        resolver_fallback=True,
    )
    prompt = prompt_with([FakeTool("look"), hidden], context=ANN.tool_context())
    result = await manager.aexecute_tool_calls(
        prompt, tool_calls_response(("refund_order", "{}"), ("wipe", "{}"), ("look", "{}"))
    )
    responses = result.conversation_history[-1].responses  # type: ignore[union-attr]
    assert [(r.name, r.is_error) for r in responses] == [
        ("refund_order", True),
        ("wipe", True),
        ("look", False),
    ]
    assert all(r.data.startswith("Unknown tool") for r in responses[:2])
    assert "refund_order" not in responses[1].data  # no hidden name suggested
    assert hidden.calls == [] and resolved.calls == []
    visible = manager.visible_options(prompt.options)
    assert [c.definition.name for c in visible.tool_callbacks] == ["look"]
    allowed = prompt_with([FakeTool("look"), hidden], context=SAM.tool_context()).options
    assert manager.visible_options(allowed) is allowed  # nothing cut: the same options


def test_tool_search_never_indexes_or_finds_a_hidden_tool() -> None:
    refunds.clear()
    index = RegexToolIndex()
    advisor = ToolSearchToolCallingAdvisor(
        tool_index=index, tool_calling_manager=ToolCallingManager(tool_visibility=SUPPORT_ONLY)
    )
    model = ScriptedModel(
        [
            tool_call("toolSearchTool", {"query": "refund"}, id="s1"),
            tool_call("refund_order", {"order_id": "A1"}, id="r1"),
            "No refund.",
        ]
    )
    spec = client(model, advisor).prompt("Refund A1").tool_context(ANN.tool_context())
    spec.context({CONVERSATION_ID: "c1"}).call()
    found = model.requests[1].messages[-1]
    assert isinstance(found, ToolResponseMessage)
    assert json.loads(found.responses[0].data) == []  # the search found nothing
    assert offered(model) == [["toolSearchTool"]] * 3
    refused = model.requests[2].messages[-1]
    assert isinstance(refused, ToolResponseMessage) and refused.responses[0].is_error
    assert "Unknown tool 'refund_order'" in refused.responses[0].data
    assert refunds == []
    # The session's index holds the tools the caller may use, nothing else.
    searched = index.search(ToolSearchRequest("c1", "order", 10))
    assert searched.tool_names == ["order_status"]


def test_a_hidden_tool_is_never_found_as_a_companion_of_a_visible_one() -> None:
    """Usage learned over every caller's turns links order_status to refund_order; a
    customer's search finds order_status and never the refund it was used with."""
    usage = ToolCoUsage([["order_status", "refund_order"]] * 3)
    found = {}
    for caller in (ANN, SAM):
        index = RegexToolIndex(co_usage=usage)
        advisor = ToolSearchToolCallingAdvisor(
            tool_index=index, tool_calling_manager=ToolCallingManager(tool_visibility=SUPPORT_ONLY)
        )
        model = ScriptedModel([tool_call("toolSearchTool", {"query": "status"}, id="s1"), "ok"])
        spec = client(model, advisor).prompt("Where is A1?").tool_context(caller.tool_context())
        spec.context({CONVERSATION_ID: str(caller.user_id)}).call()
        result = model.requests[1].messages[-1]
        assert isinstance(result, ToolResponseMessage)
        found[str(caller.user_id)] = json.loads(result.responses[0].data)
    assert found == {"ann": ["order_status"], "sam": ["order_status", "refund_order"]}
