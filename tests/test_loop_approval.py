"""Human approval: held calls, the run state through JSON, resume with approve / edit / deny,
for call and stream (SPEC section 5)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _loop_tools import RecordingTool
from tooluse import (
    Approve,
    AssistantMessage,
    ChatClient,
    Deny,
    PendingToolCall,
    RunState,
    ToolCall,
    ToolContext,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from tooluse.advisors import (
    AdvisorChain,
    BaseAdvisor,
    ChatClientRequest,
    ChatClientResponse,
    ToolAdvisor,
)
from tooluse.client import ApprovalRequired
from tooluse.testing import ScriptedModel, assert_tool_called, chat_response, tool_call


def usage(total: int) -> Usage:
    return Usage(prompt_tokens=total, completion_tokens=0, total_tokens=total)


def tools() -> tuple[RecordingTool, RecordingTool]:
    delete = RecordingTool("delete", lambda a, c: f"deleted {a['path']}", requires_approval=True)
    search = RecordingTool("search", lambda a, c: "3 files")
    return delete, search


def paused_model(*after: Any) -> ScriptedModel:
    return ScriptedModel(
        [
            chat_response(
                "I will clean up.",
                [
                    tool_call("delete", {"path": "/tmp/x"}, id="del-1"),
                    tool_call("search", {"q": "tmp"}, id="search-1"),
                ],
                usage=usage(10),
            ),
            *after,
        ]
    )


async def test_held_calls_pause_the_run_and_approve_resumes_it_from_json() -> None:
    delete, search = tools()
    model = paused_model(chat_response("Cleaned.", usage=usage(1)))
    client = ChatClient(model, tools=[delete, search])
    paused = await client.prompt("clean /tmp").acall()

    assert [(p.id, p.name, p.arguments) for p in paused.pending_tool_calls] == [
        ("del-1", "delete", '{"path": "/tmp/x"}')
    ]
    assert "requires approval" in paused.pending_tool_calls[0].reason
    assert delete.calls == [] and len(search.calls) == 1  # the free call ran
    generation = paused.chat_response().generations[0]
    assert generation.finish_reason == "toolApprovalRequired"
    assert generation.metadata["pending_tool_calls"][0]["id"] == "del-1"
    with pytest.raises(ApprovalRequired, match=r"delete \(del-1\)") as raised:
        paused.content()
    assert raised.value.pending_tool_calls == paused.pending_tool_calls

    assert paused.state is not None
    state = RunState.from_json(paused.state.to_json())
    assert state == paused.state
    done = await client.aresume(state, {"del-1": Approve()})

    assert done.content() == "Cleaned."
    assert [args for args, _ in delete.calls] == [{"path": "/tmp/x"}]
    assert len(search.calls) == 1  # already executed: never run again
    results = model.requests[-1].messages[-1]
    assert isinstance(results, ToolResponseMessage)
    assert [(r.id, r.data) for r in results.responses] == [
        ("del-1", "deleted /tmp/x"),
        ("search-1", "3 files"),
    ]
    assert done.chat_response().usage == usage(11)  # usage of the paused part included
    assert_tool_called(done, "delete", {"path": "/tmp/x"}, times=1)


def test_sync_resume_with_edited_arguments() -> None:
    delete, search = tools()
    model = paused_model("Cleaned the safe path.")
    client = ChatClient(model, tools=[delete, search])
    paused = client.prompt("clean").call()
    assert paused.state is not None
    done = client.resume(paused.state, {"del-1": Approve(arguments={"path": "/tmp/safe"})})
    assert done.content() == "Cleaned the safe path."
    assert [args for args, _ in delete.calls] == [{"path": "/tmp/safe"}]


async def test_deny_gives_the_model_the_reason_as_an_error_result() -> None:
    delete, search = tools()
    model = paused_model("I did not delete it.")
    client = ChatClient(model, tools=[delete, search])
    paused = await client.prompt("clean").acall()
    assert paused.state is not None
    done = await client.aresume(paused.state, {"del-1": Deny("Not on a Friday.")})
    assert done.content() == "I did not delete it."
    assert delete.calls == []
    denied = model.requests[-1].messages[-1].responses[0]  # type: ignore[union-attr]
    assert (denied.id, denied.data, denied.is_error) == ("del-1", "Not on a Friday.", True)


async def test_decisions_are_matched_by_id_not_position() -> None:
    first = RecordingTool("first", requires_approval=True)
    second = RecordingTool("second", requires_approval=True)
    model = ScriptedModel([[tool_call("first", id="A"), tool_call("second", id="B")], "ok"])
    client = ChatClient(model, tools=[first, second])
    paused = await client.prompt("go").acall()
    assert [p.id for p in paused.pending_tool_calls] == ["A", "B"]
    assert paused.state is not None
    await client.aresume(paused.state, {"B": Approve(), "A": Deny("no")})
    assert first.calls == [] and len(second.calls) == 1


async def test_an_approval_predicate_holds_only_matching_calls() -> None:
    deploy = RecordingTool(
        "deploy", requires_approval=lambda call, context: "prod" in call.arguments
    )
    model = ScriptedModel(
        [
            [
                tool_call("deploy", {"env": "dev"}, id="d"),
                tool_call("deploy", {"env": "prod"}, id="p"),
            ]
        ]
    )
    paused = await ChatClient(model, tools=[deploy]).prompt("go").acall()
    assert [p.id for p in paused.pending_tool_calls] == ["p"]
    assert [args for args, _ in deploy.calls] == [{"env": "dev"}]


async def test_the_tool_context_and_request_context_survive_the_pause() -> None:
    seen: list[ToolContext | None] = []
    guarded = RecordingTool("guarded", lambda a, c: seen.append(c) or "ok", requires_approval=True)
    model = ScriptedModel([tool_call("guarded", id="g"), "done"])
    client = ChatClient(model, tools=[guarded], tool_context={"tenant": "acme"})
    paused = await (
        client.prompt("go").tool_context({"user": "ann"}).context({"conversation": "c1"}).acall()
    )
    assert paused.state is not None
    state = RunState.from_json(paused.state.to_json())
    assert state.context == {"conversation": "c1"}
    done = await client.aresume(state, {"g": Approve()}, tool_context={"approver": "bob"})
    assert done.content() == "done"
    assert seen[0] is not None
    assert dict(seen[0]) == {"tenant": "acme", "user": "ann", "approver": "bob"}


async def test_streamed_runs_pause_and_resume_streaming() -> None:
    delete, search = tools()
    model = paused_model("All clean now.")
    client = ChatClient(model, tools=[delete, search])
    stream = client.prompt("clean").stream()
    texts = []
    with pytest.raises(ApprovalRequired):
        async for text in stream.content():
            texts.append(text)
    assert "".join(texts) == "I will clean up."
    assert [p.id for p in stream.pending_tool_calls] == ["del-1"]
    assert stream.chat_response().generations[0].finish_reason == "toolApprovalRequired"
    assert stream.state is not None
    resumed = client.resume_stream(RunState.from_json(stream.state.to_json()), {"del-1": Approve()})
    assert "".join([t async for t in resumed.content()]) == "All clean now."
    assert len(delete.calls) == 1 and len(search.calls) == 1


async def test_resume_needs_the_tools_of_approved_calls() -> None:
    delete, search = tools()
    client = ChatClient(paused_model("x"), tools=[delete, search])
    paused = await client.prompt("go").acall()
    assert paused.state is not None
    bare = ChatClient(ScriptedModel(["x"]))
    with pytest.raises(ValueError, match=r"approved calls \['delete \(del-1\)'\] need tools"):
        await bare.aresume(paused.state, {"del-1": Approve()})
    # Denying needs no tool; tools can also be passed to resume.
    await bare.aresume(paused.state, {"del-1": Deny("no")})
    again = ChatClient(ScriptedModel(["x"]))
    await again.aresume(paused.state, {"del-1": Approve()}, tools=[delete])
    assert len(delete.calls) == 1


async def test_bad_decisions_are_errors() -> None:
    delete, search = tools()
    client = ChatClient(paused_model("x", "y", "z"), tools=[delete, search])
    paused = await client.prompt("go").acall()
    state = paused.state
    assert state is not None
    with pytest.raises(ValueError, match=r"No decision was given for the pending tool calls"):
        await client.aresume(state, {})
    with pytest.raises(ValueError, match=r"not pending: \['search-1'\]"):
        await client.aresume(state, {"del-1": Approve(), "search-1": Approve()})
    with pytest.raises(TypeError, match="must be Approve or Deny"):
        await client.aresume(state, {"del-1": "yes"})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="RunState of a paused run"):
        await client.aresume("state", {})  # type: ignore[arg-type]


class OwnLoop(ToolAdvisor):
    """A tool advisor that knows nothing about resuming."""

    name = "own loop"
    order = 0

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        return await chain.next_call(request)


async def test_resume_through_a_tool_advisor_that_cannot_resume_is_an_error() -> None:
    delete, search = tools()
    paused = await ChatClient(paused_model(), tools=[delete, search]).prompt("go").acall()
    assert paused.state is not None
    client = ChatClient(ScriptedModel(["x"]), tools=[delete], advisors=[OwnLoop()])
    with pytest.raises(RuntimeError, match="was not resumed"):
        await client.aresume(paused.state, {"del-1": Approve()})


async def test_outer_advisors_can_tell_a_resumed_request() -> None:
    seen: list[bool] = []

    class Outer:
        name, order = "outer", -(2**31) + 100

        async def advise_call(
            self, request: ChatClientRequest, chain: AdvisorChain
        ) -> ChatClientResponse:
            seen.append(request.resume is not None)
            return await chain.next_call(request)

    delete, search = tools()
    client = ChatClient(paused_model("done"), tools=[delete, search], advisors=[Outer()])
    paused = await client.prompt("go").acall()
    assert paused.state is not None
    await client.aresume(paused.state, {"del-1": Approve()})
    assert seen == [False, True]


async def test_a_run_state_stored_by_an_older_release_still_resumes() -> None:
    """Releases before the typed message fields kept the paused round's return-direct flag
    in its results' metadata."""
    delete, search = tools()
    client = ChatClient(paused_model(chat_response("Cleaned.")), tools=[delete, search])
    paused = await client.prompt("clean /tmp").acall()
    assert paused.state is not None
    stored = json.loads(paused.state.to_json())
    results = stored["history"][-1]
    results["metadata"] = {"tooluse.executed_return_direct": results.pop("executed_return_direct")}
    state = RunState.from_json(json.dumps(stored))
    assert state == paused.state
    resumed = await client.aresume(state, {"del-1": Approve()})
    assert resumed.content() == "Cleaned." and len(delete.calls) == 1


def test_run_state_json_errors_are_specific() -> None:
    state = RunState(
        messages=(),
        history=(),
        pending_tool_calls=(),
        tool_context={"ledger": object(), "user": "ann"},
    )
    with pytest.raises(TypeError, match=r"tool_context\['ledger'\].*without_tool_context"):
        state.to_json()
    assert json.loads(state.without_tool_context("ledger").to_json())["tool_context"] == {
        "user": "ann"
    }
    with pytest.raises(KeyError, match="no keys"):
        state.without_tool_context("missing")
    with pytest.raises(ValueError, match="not valid JSON"):
        RunState.from_json("{")
    with pytest.raises(ValueError, match="version"):
        RunState.from_json('{"version": 99}')
    good = json.loads(state.without_tool_context("ledger").to_json())
    with pytest.raises(ValueError, match="pending_tool_calls' must be a non-empty list"):
        RunState.from_json(json.dumps(good))
    good["pending_tool_calls"] = [{"id": "a", "name": "t", "arguments": "{}", "reason": "r"}]
    good["messages"] = [{"role": "robot"}]
    with pytest.raises(ValueError, match="invalid messages"):
        RunState.from_json(json.dumps(good))
    good["messages"] = []
    good["options"] = {"temperature": 0.1, "colour": "red"}
    with pytest.raises(ValueError, match=r"unknown model parameters \['colour'\]"):
        RunState.from_json(json.dumps(good))
    del good["options"]
    with pytest.raises(ValueError, match=r"lacks keys \['options'\]"):
        RunState.from_json(json.dumps(good))


async def test_model_parameters_of_the_request_survive_the_pause() -> None:
    delete, search = tools()
    model = paused_model("x")
    client = ChatClient(model, tools=[delete, search])
    paused = await client.prompt("go").options(temperature=0.3, stop=("END",)).acall()
    assert paused.state is not None
    state = RunState.from_json(paused.state.to_json())
    assert state.options == {"temperature": 0.3, "stop": ["END"]}
    await client.aresume(state, {"del-1": Approve()})
    options = model.requests[-1].options
    assert (options.temperature, options.stop) == (0.3, ("END",))
    assert model.requests[-1].messages[1].tool_calls[0] == ToolCall(  # type: ignore[union-attr]
        id="del-1", name="delete", arguments='{"path": "/tmp/x"}'
    )


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
_STATE_KEYS = list(json.loads(RunState((), (), ()).to_json()))  # every key to_json writes


@settings(max_examples=60, deadline=None)
@given(
    st.text(max_size=50)
    | _JSON.map(json.dumps)
    | st.fixed_dictionaries({key: _JSON for key in _STATE_KEYS}).map(
        lambda d: json.dumps({**d, "version": 1})
    )
)
def test_run_state_from_bad_json_is_always_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match=r"RunState JSON|PendingToolCall"):
        RunState.from_json(text)


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_resumed_run_can_pause_again_and_each_call_runs_once(streamed: bool) -> None:
    delete, search = tools()
    model = paused_model(
        chat_response(
            "One more.", [tool_call("delete", {"path": "/tmp/y"}, id="del-2")], usage=usage(2)
        ),
        chat_response("Both gone.", usage=usage(3)),
    )
    client = ChatClient(model, tools=[delete, search])

    async def resume(state: RunState, decisions: dict[str, Any]) -> tuple[Any, str | None]:
        """Resume (through JSON), returning the new state or the final text."""
        state = RunState.from_json(state.to_json())
        if not streamed:
            response = await client.aresume(state, decisions)
            return response.state, None if response.state else response.content()
        stream = client.resume_stream(state, decisions)
        texts = [chunk.text async for chunk in stream]
        return stream.state, None if stream.state else "".join(texts)

    first = await client.prompt("clean").acall()
    assert first.state is not None
    second_state, text = await resume(first.state, {"del-1": Approve()})
    assert text is None and second_state is not None
    assert [p.id for p in second_state.pending_tool_calls] == ["del-2"]
    assert second_state.messages == first.state.messages  # still the original request
    assert second_state.usage == usage(12)
    final_state, text = await resume(second_state, {"del-2": Approve()})
    assert final_state is None and text is not None and text.endswith("Both gone.")
    assert [args for args, _ in delete.calls] == [{"path": "/tmp/x"}, {"path": "/tmp/y"}]
    assert len(search.calls) == 1
    last_request = model.requests[-1].messages
    assert [m.role for m in last_request] == [
        "user", "assistant", "tool", "assistant", "tool",
    ]  # fmt: skip
    assert [r.id for r in last_request[-1].responses] == ["del-2"]  # type: ignore[union-attr]


_ANY_TEXT = st.text(st.characters(exclude_categories=[]), max_size=20)  # lone surrogates too


@given(user=_ANY_TEXT, answer=_ANY_TEXT, arguments=_ANY_TEXT, value=_ANY_TEXT)
def test_any_text_in_a_run_state_survives_json_stored_as_utf8(
    user: str, answer: str, arguments: str, value: str
) -> None:
    call = ToolCall(id="c1", name="t", arguments=arguments)
    state = RunState(
        messages=(UserMessage(text=user),),
        history=(UserMessage(text=user), AssistantMessage(text=answer, tool_calls=(call,))),
        pending_tool_calls=(PendingToolCall("c1", "t", arguments, value),),
        context={value: [value]},
        tool_context={"k": value},
    )
    stored = state.to_json().encode("utf-8")  # e.g. a database column or a file
    assert RunState.from_json(stored) == state


class ContextCopier(BaseAdvisor):
    """An advisor inside the loop that passes on a copy of the request context with an
    entry of its own (as RetrievalAugmentationAdvisor does)."""

    def __init__(self) -> None:
        super().__init__(name="copier", order=0)

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        return await chain.next_call(request.replace(context={**request.context, "seen": True}))

    async def advise_stream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        copied = request.replace(context={**request.context, "seen": True})
        async for item in chain.next_stream(copied):
            yield item


async def collect(response: Any) -> None:
    async for _ in response:
        pass


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_pause_is_not_lost_behind_an_inner_advisor_that_copies_the_context(
    streamed: bool,
) -> None:
    delete, search = tools()
    client = ChatClient(paused_model(), tools=[delete, search], advisors=[ContextCopier()])
    if streamed:
        paused: Any = client.prompt("clean /tmp").stream()
        await collect(paused)
    else:
        paused = await client.prompt("clean /tmp").acall()
    assert [p.id for p in paused.pending_tool_calls] == ["del-1"]
    assert paused.context["seen"] is True  # what the inner advisor added still comes out
    if not streamed:
        with pytest.raises(ApprovalRequired):
            paused.content()


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_history_is_not_lost_behind_an_inner_advisor_that_copies_the_context(
    streamed: bool,
) -> None:
    search = RecordingTool("search", lambda a, c: "3 files")
    model = ScriptedModel([tool_call("search", {"q": "tmp"}, id="s"), "Three."])
    client = ChatClient(model, tools=[search], advisors=[ContextCopier()])
    if streamed:
        done: Any = client.prompt("how many?").stream()
        await collect(done)
    else:
        done = await client.prompt("how many?").acall()
    roles = [message.role for message in done.conversation_history]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert done.conversation_history[-1].text == "Three."
