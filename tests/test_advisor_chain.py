"""The advisor chain (ordering, copy, call/stream participation), LoggingAdvisor, and the
OpenTelemetry spans of model calls and tool loops."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from _loop_tools import RecordingTool
from tooluse import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    AssistantMessage,
    ChatClient,
    ChatOptions,
    LoggingAdvisor,
    Prompt,
    ToolCall,
    ToolCallingAdvisor,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from tooluse.advisors import (
    AdvisorChain,
    BaseAdvisor,
    CallAdvisor,
    ChatClientRequest,
    ChatClientResponse,
)
from tooluse.testing import ScriptedModel, chat_response, tool_call


class Tagging:
    """Appends its name to a shared log on the way in (call) or per chunk (stream)."""

    def __init__(self, name: str, order: int, log: list[str]) -> None:
        self.name, self.order, self.log = name, order, log

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        self.log.append(f"in {self.name}")
        response = await chain.next_call(request)
        self.log.append(f"out {self.name}")
        return response


class StreamOnly:
    def __init__(self, log: list[str]) -> None:
        self.name, self.order, self.log = "stream-only", 5, log

    async def advise_stream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        self.log.append("stream-only")
        async for item in chain.next_stream(request):
            yield item


def request(text: str = "hi") -> ChatClientRequest:
    return ChatClientRequest(Prompt([UserMessage(text=text)]))


async def test_lower_order_is_outer_and_equal_orders_keep_their_place() -> None:
    log: list[str] = []
    advisors = [Tagging("c", 10, log), Tagging("a", -5, log), Tagging("b", 10, log)]
    chain = AdvisorChain(advisors, ScriptedModel(["x"]))
    assert [a.name for a in chain.advisors] == ["a", "c", "b"]
    await chain.next_call(request())
    assert log == ["in a", "in c", "in b", "out b", "out c", "out a"]


async def test_copy_continues_after_an_advisor_and_rejects_strangers() -> None:
    log: list[str] = []
    first, second = Tagging("first", 1, log), Tagging("second", 2, log)
    chain = AdvisorChain([first, second], ScriptedModel(["x"]))
    await chain.copy(first).next_call(request())
    assert log == ["in second", "out second"]
    with pytest.raises(ValueError, match="'stranger' is not part of this chain"):
        chain.copy(Tagging("stranger", 3, log))


async def test_call_advisors_are_skipped_on_streams_and_stream_advisors_on_calls() -> None:
    log: list[str] = []
    chain = AdvisorChain([Tagging("call", 1, log), StreamOnly(log)], ScriptedModel(["x", "y"]))
    await chain.next_call(request())
    assert log == ["in call", "out call"]
    log.clear()
    chunks = [item.chat_response async for item in chain.next_stream(request())]
    assert log == ["stream-only"] and [c.text for c in chunks if c] == ["y"]


async def test_logging_advisor_logs_each_model_call_of_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedModel(
        [tool_call("t", {"q": 1}), chat_response("done", usage=Usage(total_tokens=3))]
    )
    client = ChatClient(model, tools=[RecordingTool("t")], advisors=[LoggingAdvisor()])
    with caplog.at_level(logging.DEBUG, logger="tooluse.advisors"):
        await client.prompt("question").acall()
    lines = [r.getMessage() for r in caplog.records if r.name == "tooluse.advisors"]
    assert lines == [
        "request: 1 messages, last user 'question', tools ['t']",
        "response: text None, tool calls ['t({\"q\": 1})'], finish tool_calls; no usage",
        "request: 3 messages, last tool results for ['t'], tools ['t']",
        "response: text 'done', tool calls [], finish stop; tokens 0+0=3",
    ]


async def test_logging_advisor_logs_a_stream_once_merged(caplog: pytest.LogCaptureFixture) -> None:
    client = ChatClient(ScriptedModel(["a long streamed answer"]), advisors=[LoggingAdvisor()])
    with caplog.at_level(logging.INFO, logger="tooluse.advisors"):
        _ = [c async for c in client.prompt("q").stream()]  # DEBUG is off: nothing logged
    assert not [r for r in caplog.records if r.name == "tooluse.advisors"]
    client = ChatClient(ScriptedModel(["a long streamed answer"]), advisors=[LoggingAdvisor()])
    with caplog.at_level(logging.DEBUG, logger="tooluse.advisors"):
        _ = [c async for c in client.prompt("q").stream()]
    lines = [r.getMessage() for r in caplog.records if r.name == "tooluse.advisors"]
    assert (
        lines[1] == "response: text 'a long streamed answer', tool calls [], finish stop; no usage"
    )


async def test_spans_per_model_call_and_per_loop(exporter: InMemorySpanExporter) -> None:
    model = ScriptedModel(
        [
            chat_response(
                tool_calls=[tool_call("t", id="a")],
                usage=Usage(prompt_tokens=10, completion_tokens=20, total_tokens=30),
            ),
            chat_response(
                "done", usage=Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3)
            ),
        ]
    )
    client = ChatClient(model, tools=[RecordingTool("t")], options=ChatOptions(model="gpt-x"))
    await client.prompt("go").acall()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    chats = [s for s in exporter.get_finished_spans() if s.name == "chat gpt-x"]
    assert len(chats) == 2
    assert dict(chats[0].attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-x",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 20,
    }
    loop = spans["tool_loop"]
    assert dict(loop.attributes or {})["gen_ai.usage.input_tokens"] == 11
    assert dict(loop.attributes or {})["tooluse.tool_loop.rounds"] == 2
    assert all(
        s.parent is not None and s.parent.span_id == loop.context.span_id
        for s in exporter.get_finished_spans()
        if s.name in ("chat gpt-x", "execute_tool t")
    )
    exporter.clear()
    streamed = ScriptedModel([chat_response("x", usage=Usage(prompt_tokens=4, total_tokens=4))])
    _ = [c async for c in ChatClient(streamed).prompt("go").stream()]
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"chat scripted", "tool_loop"}
    assert dict(spans["chat scripted"].attributes or {})["gen_ai.usage.input_tokens"] == 4
    assert dict(spans["tool_loop"].attributes or {})["tooluse.tool_loop.rounds"] == 1


async def test_a_stream_never_leaves_its_spans_current_in_the_consumer(
    exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    # The loop's and the model call's spans were current across `yield`: the consumer's own
    # spans became children of a model call, the leak outlived a stream stopped early, and
    # closing it elsewhere logged "Failed to detach context".
    model = ScriptedModel([tool_call("t", id="a"), "a long answer", "again"])
    client = ChatClient(model, tools=[RecordingTool("t")])
    chunks: Any = aiter(client.prompt("go").stream())
    async for _ in chunks:
        assert not trace.get_current_span().get_span_context().is_valid
        break
    await chunks.aclose()
    assert not trace.get_current_span().get_span_context().is_valid
    await asyncio.sleep(0.01)  # the inner generators are closed by the loop's finaliser
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"chat scripted", "execute_tool t", "tool_loop"}
    loop = spans["tool_loop"]
    assert all(s.parent is not None and s.parent.span_id == loop.context.span_id
               for s in spans.values() if s is not loop)  # fmt: skip
    assert loop.status.status_code is not StatusCode.ERROR  # stopping early is no failure
    # a stream left unclosed is finalised in another context
    abandoned = ChatClient(ScriptedModel(["x", "y"])).prompt("go").stream()
    async for _ in abandoned:
        break
    del abandoned
    gc.collect()
    await asyncio.sleep(0.01)
    assert "Failed to detach context" not in caplog.text


class Shouting(BaseAdvisor):
    """A minimal advisor built on BaseAdvisor: it upper-cases the answer."""

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        response = await chain.next_call(request)
        assert response.chat_response is not None
        return response.replace(chat_response=chat_response(response.chat_response.text.upper()))


async def test_base_advisor_gives_name_and_order_to_a_working_advisor() -> None:
    advisor = Shouting(name="shout", order=HIGHEST_PRECEDENCE + 1)
    assert (advisor.name, advisor.order) == ("shout", HIGHEST_PRECEDENCE + 1)
    assert repr(advisor) == f"Shouting(name='shout', order={HIGHEST_PRECEDENCE + 1})"
    assert isinstance(advisor, CallAdvisor)
    response = await ChatClient(ScriptedModel(["quiet"]), advisors=[advisor]).prompt("q").acall()
    assert response.content() == "QUIET"


@pytest.mark.parametrize("make", [Shouting, LoggingAdvisor, ToolCallingAdvisor])
@pytest.mark.parametrize("order", [HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE, 2**40, -(2**40)])
def test_every_advisor_checks_its_order_with_one_message(make: type, order: int) -> None:
    with pytest.raises(
        ValueError,
        match=rf"^.+: order must be strictly between HIGHEST_PRECEDENCE and "
        rf"LOWEST_PRECEDENCE, got {order}$",
    ):
        make(name="x", order=order)


@pytest.mark.parametrize("make", [Shouting, LoggingAdvisor, ToolCallingAdvisor])
def test_every_advisor_checks_the_type_of_its_order_and_its_name(make: type) -> None:
    for bad_order in ("5", 1.0, True):
        with pytest.raises(TypeError, match="order must be an int"):
            make(name="x", order=bad_order)
    for bad_name in ("", "  ", None):
        with pytest.raises(ValueError, match="name must be a non-blank string"):
            make(name=bad_name, order=0)


async def test_advisors_share_the_request_context_and_the_caller_sees_it() -> None:
    class Writer(BaseAdvisor):
        async def advise_call(
            self, request: ChatClientRequest, chain: AdvisorChain
        ) -> ChatClientResponse:
            request.context["trace"] = [self.name]
            return await chain.next_call(request)

    class Reader(BaseAdvisor):
        async def advise_call(
            self, request: ChatClientRequest, chain: AdvisorChain
        ) -> ChatClientResponse:
            request.context["trace"].append(self.name)
            return await chain.next_call(request)

    defaults = {"tenant": "acme"}
    client = ChatClient(
        ScriptedModel(["a", "b"]),
        advisors=[Reader(name="reader", order=2), Writer(name="writer", order=1)],
        context=defaults,
    )
    first = await client.prompt("q").acall()
    assert first.context["trace"] == ["writer", "reader"]
    assert first.context["tenant"] == "acme"
    second = await client.prompt("q").context({"tenant": "other"}).acall()
    assert second.context["trace"] == ["writer", "reader"]  # a fresh context per request
    assert second.context["tenant"] == "other"
    assert defaults == {"tenant": "acme"}


async def test_the_model_never_gets_an_orphan_tool_result_or_an_unanswered_call() -> None:
    model = ScriptedModel(["ok", "ok"])
    broken = (
        ToolResponseMessage(responses=(ToolResponse(id="gone", name="t", data="x"),)),
        UserMessage(text="q1"),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="t"),)),
        UserMessage(text="q2"),
    )
    chain = AdvisorChain([], model)
    await chain.next_call(ChatClientRequest(Prompt(broken)))
    async for _ in chain.next_stream(ChatClientRequest(Prompt(broken))):
        pass
    for sent in model.requests:
        assert [type(m).__name__ for m in sent.messages] == [
            "UserMessage",
            "AssistantMessage",
            "ToolResponseMessage",
            "UserMessage",
        ]
        answer = sent.messages[2]
        assert isinstance(answer, ToolResponseMessage)
        assert answer.responses[0].id == "c1" and answer.responses[0].is_error

    well_formed = Prompt((UserMessage(text="q"),))
    untouched = ScriptedModel(["ok"])
    await AdvisorChain([], untouched).next_call(ChatClientRequest(well_formed))
    assert untouched.requests[0] is well_formed  # a well-formed prompt is passed as it is
