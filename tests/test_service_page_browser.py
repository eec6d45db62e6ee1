"""The chat page (``GET /``) driven in headless Chromium: what a user sees, and nothing in the
browser's console. Skipped where Chromium is not installed, and failed for that under CI=true
(.ci/run installs it; test_service_api.py checks parts of the page statically)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _browser import CHROMIUM, Browser, browser, serving
from _service_helpers import (
    BIG_ACCOUNT,
    SCREEN_URL,
    config,
    fake_llm,
    screenshot,
    screenshotting,
    store_screenshot_turn,
    transfer,
    transferring,
)
from tooluse.mcp import InProcessServer, mcp_server
from tooluse.messages import Prompt, ToolResponseMessage, UserMessage
from tooluse.search import TOOL_SEARCH_TOOL_NAME
from tooluse.service import create_app
from tooluse.service._samples import get_weather
from tooluse.testing import FunctionModel, ResponseLike, tool_call

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium to drive the page (apt-get install chromium; .ci/run installs it)",
)


@pytest.fixture(scope="module")
def page() -> Iterator[Browser]:
    with browser() as opened:
        yield opened


def _this_turn(prompt: Prompt) -> list[ToolResponseMessage]:
    """The tool results since the question."""
    results: list[ToolResponseMessage] = []
    for message in reversed(prompt.messages):
        if isinstance(message, UserMessage):
            break
        if isinstance(message, ToolResponseMessage):
            results.append(message)
    return results


def _searching_model(prompt: Prompt) -> ResponseLike:
    """Searches for tools, its query sent with \\u escapes as models often write them, then
    calls get_weather when found; the answer stage answers."""
    offered = [callback.definition.name for callback in prompt.options.tool_callbacks]
    if not offered:
        return "Sunny in Paris."
    results = _this_turn(prompt)
    if not results:
        return tool_call(TOOL_SEARCH_TOOL_NAME, '{"query": "\\u5df4\\u9ece weather"}', id="s1")
    if len(results) == 1 and "get_weather" in offered:
        return tool_call("get_weather", {"city": "Paris"}, id="w1")
    return ""


def _ask(page: Browser, question: str) -> None:
    """Sends the question from the page's box; returns once the answer is in."""
    turns = page.run("document.querySelectorAll('.bot').length")
    page.run(
        f"document.getElementById('message').value = {json.dumps(question)};"
        "document.getElementById('chat').requestSubmit()"
    )
    page.wait_for(
        f"document.querySelectorAll('.bot').length > {turns}"
        " && !document.getElementById('send').disabled"
    )


def _texts(page: Browser, selector: str) -> Any:
    return page.run(
        f"[...document.querySelectorAll({json.dumps(selector)})].map(n => n.textContent)"
    )


def test_a_tool_search_reads_as_its_query_and_the_tools_found(
    tmp_path: Path, page: Browser
) -> None:
    app = create_app(
        config(tmp_path / "s.db", model=FunctionModel(_searching_model), tool_search=True)
    )
    with serving(app) as url:
        page.goto(url)
        _ask(page, "巴黎天气 weather in Paris?")
        summaries = _texts(page, ".trace summary")
        details = _texts(page, ".trace pre")
        errors = page.console_errors()
    search, weather = summaries
    assert search.startswith("→ tool search: “巴黎 weather”  ✓ ")
    assert search.endswith(" tools found")
    (found,) = [d for d in details if d.startswith("found: ")]
    assert "get_weather" in found.removeprefix("found: ").split(", ")
    assert weather == '→ get_weather {"city":"Paris"}  ✓'
    assert errors == []


def test_mcp_tools_are_listed_with_their_server_and_called(tmp_path: Path, page: Browser) -> None:
    server = InProcessServer(mcp_server(get_weather, name="live"))
    settings = config(tmp_path / "s.db", model=fake_llm(), mcp_servers=[server])
    with serving(create_app(settings)) as url:
        page.goto(url)
        page.wait_for("!!document.querySelector('#tools .tool')")
        listed = _texts(page, "#tools .tool code"), _texts(page, "#tools .tool .badge")
        _ask(page, "What's the weather in Paris?")
        (call,) = _texts(page, ".trace summary")
        errors = page.console_errors()
    assert listed == (["get_weather"], ["MCP: live"])
    assert call == '→ get_weather {"city":"Paris"}  ✓'
    assert errors == []


def _thumbnails(page: Browser) -> Any:
    """Each tool-result image of the trace, once decoded: whether its source is the
    screenshot's data URL, its size, the height it is shown at, and its alt text."""
    page.wait_for(
        "[...document.querySelectorAll('.trace .images img')]"
        ".every(img => img.complete && img.naturalWidth > 0)"
    )
    return page.run(
        "[...document.querySelectorAll('.trace .images img')].map(img =>"
        f" [img.src === {json.dumps(SCREEN_URL)}, img.naturalWidth, img.naturalHeight,"
        " Math.round(img.getBoundingClientRect().height), img.alt])"
    )


def test_a_tool_result_s_images_show_as_thumbnails_that_open_full_size(
    tmp_path: Path, page: Browser
) -> None:
    db = tmp_path / "s.db"
    store_screenshot_turn(db, "screen")  # an earlier conversation, tool traffic kept
    settings = config(db, model=FunctionModel(screenshotting), tools=[screenshot])
    with serving(create_app(settings)) as url:
        page.goto(url)
        _ask(page, "What is on screen?")
        live = _thumbnails(page)
        trace = _texts(page, ".trace summary")
        page.run("document.querySelector('.trace .images img').click()")
        page.wait_for("document.querySelector('#viewer img').naturalWidth > 0")
        opened = page.run(
            "(() => { const viewer = document.getElementById('viewer');"
            " const full = viewer.querySelector('img');"
            f" return [viewer.open, full.src === {json.dumps(SCREEN_URL)},"
            " Math.round(full.getBoundingClientRect().width)]; })()"
        )
        page.run("document.getElementById('viewer').click()")
        closed = page.run("document.getElementById('viewer').open")
        page.reload()  # the service kept the turn's trace, its image with it
        page.wait_for("!!document.querySelector('.trace .images img')")
        reloaded = _thumbnails(page), _texts(page, ".trace summary")
        page.run(
            "localStorage.setItem('tooluse.conversation', 'screen');"
            "localStorage.setItem('tooluse.conversation.asked', 'screen')"
        )
        page.reload()
        page.wait_for("!!document.querySelector('.trace .images img')")
        stored = _thumbnails(page)
        errors = page.console_errors()
    thumbnail = [True, 3, 2, 72, "screenshot image 1 (image/png)"]
    assert trace == ["→ screenshot {}  ✓"]
    assert live == [thumbnail]  # shown 72 px high, whatever the image's size
    assert opened == [True, True, 3]  # at its own size
    assert closed is False
    assert reloaded == ([thumbnail], trace)
    assert stored == [thumbnail]
    assert errors == []


def _panel(page: Browser) -> tuple[str, list[str]]:
    """The last approval panel: what its heading says, and the buttons one can still press."""
    heading, buttons = page.run(
        "(() => { const panel = [...document.querySelectorAll('.approval')].at(-1);"
        " return [panel.firstChild.textContent, [...panel.querySelectorAll('button')]"
        ".filter(b => !b.disabled).map(b => b.textContent)]; })()"
    )
    return heading, buttons


def _decide(page: Browser, *buttons: str) -> None:
    for label in buttons:
        page.run(
            "[...[...document.querySelectorAll('.approval')].at(-1).querySelectorAll('button')]"
            f".find(b => b.textContent === {json.dumps(label)}).click()"
        )


WAITING = ["Approve", "Deny", "Edit arguments"]


def _errors_shown(page: Browser) -> list[str]:
    """The errors the page shows (an approval panel has an empty one, for a failed send)."""
    return [text for text in _texts(page, ".error") if text]


def test_an_approval_waits_then_says_what_was_decided(tmp_path: Path, page: Browser) -> None:
    with serving(create_app(config(tmp_path / "s.db", model=fake_llm()))) as url:
        page.goto(url)
        _ask(page, "Cancel order A1001")
        heading, buttons = _panel(page)
        assert heading.startswith("Waiting for your approval until ") and buttons == WAITING
        _decide(page, "Approve")
        page.wait_for("document.querySelector('.bot .text').textContent === 'From live data.'")
        assert _panel(page) == ("Your decision:", [])
        assert _texts(page, ".approval .decided") == ["approved"]
        assert page.console_errors() == []


def test_the_arguments_editor_opens_only_on_edit_arguments(tmp_path: Path, page: Browser) -> None:
    shown = "getComputedStyle(document.querySelector('.approval textarea')).display"
    with serving(create_app(config(tmp_path / "s.db", model=fake_llm()))) as url:
        page.goto(url)
        _ask(page, "Cancel order A1001")
        before = page.run(shown)
        _decide(page, "Edit arguments")
        after = page.run(shown)
        errors = page.console_errors()
    assert (before, after) == ("none", "block") and errors == []


def test_a_new_message_withdraws_the_approval(tmp_path: Path, page: Browser) -> None:
    with serving(create_app(config(tmp_path / "s.db", model=fake_llm()))) as url:
        page.goto(url)
        _ask(page, "Cancel order A1001")
        _ask(page, "What's the weather in Paris?")
        heading, buttons = _panel(page)
        errors = page.console_errors()
    assert heading.startswith("Withdrawn: a new message was sent, so this did not run.")
    assert buttons == [] and errors == []


def test_an_approval_withdrawn_elsewhere_says_so_when_decided(
    tmp_path: Path, page: Browser
) -> None:
    with serving(create_app(config(tmp_path / "s.db", model=fake_llm()))) as url:
        page.goto(url)
        _ask(page, "Cancel order A1001")
        # Another tab goes on with the conversation.
        page.run(
            "fetch('/api/chat', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            " body: JSON.stringify({message: 'hello',"
            " conversation_id: localStorage.getItem('tooluse.conversation')})})"
            ".then(r => r.text())"
        )
        _decide(page, "Approve")
        page.wait_for(
            "document.querySelector('.approval').firstChild.textContent !== 'Your decision:'"
        )
        heading, buttons = _panel(page)
        errors = page.console_errors()
    assert heading.startswith("Withdrawn: a new message was sent, so this did not run.")
    assert buttons == [] and _errors_shown(page) == []
    # The browser logs the refused request itself; nothing else went wrong.
    assert [e for e in errors if "status of 410 (Gone)" not in e] == []


def test_an_approval_decided_in_another_tab_says_so_when_decided_again(
    tmp_path: Path, page: Browser
) -> None:
    with serving(create_app(config(tmp_path / "s.db", model=fake_llm()))) as url:
        page.goto(url)
        _ask(page, "Cancel order A1001")
        # Another tab approves it, and its run ends there.
        answered_there = page.run(
            "(async () => {"
            " const conversation = localStorage.getItem('tooluse.conversation');"
            " const [run] = await (await fetch('/api/approvals?conversation_id='"
            " + encodeURIComponent(conversation))).json();"
            " const response = await fetch('/api/approvals/' + run.approval_id, {method: 'POST',"
            " headers: {'Content-Type': 'application/json'},"
            " body: JSON.stringify({decisions: {'cancel-1': {approve: true}}})});"
            " return (await response.text()).includes('event: done'); })()"
        )
        _decide(page, "Deny")
        page.wait_for(
            "document.querySelector('.approval').firstChild.textContent !== 'Your decision:'"
            " || [...document.querySelectorAll('.error')].some(e => e.textContent)"
        )
        heading, buttons = _panel(page)
        errors = page.console_errors()
    assert answered_there
    assert heading == "Already decided in another tab or window; the run has ended there."
    assert buttons == [] and _errors_shown(page) == []
    assert [e for e in errors if "status of 409 (Conflict)" not in e] == []


def test_big_integers_in_arguments_are_shown_edited_and_sent_as_written(
    tmp_path: Path, page: Browser
) -> None:
    settings = config(tmp_path / "s.db", model=FunctionModel(transferring), tools=[transfer])
    big = str(BIG_ACCOUNT)
    with serving(create_app(settings)) as url:
        page.goto(url)
        _ask(page, "Pay")
        shown = _texts(page, ".approval code"), _texts(page, ".trace summary")
        arguments = _texts(page, ".trace pre")
        _decide(page, "Edit arguments")
        editor = "document.querySelector('.approval textarea')"
        in_editor = page.run(f"{editor}.value")
        page.run(
            f"{editor}.value = {editor}.value.replace('\"amount\": 5', '\"amount\": 6');"
            f"{editor}.dispatchEvent(new Event('input'))"
        )
        _decide(page, "Approve")  # one click: no Continue
        page.wait_for("document.querySelector('.bot .text').textContent === 'Transferred.'")
        decided = _texts(page, ".approval .decided")
        edited_call, result = _texts(page, ".trace pre")
        edited_summary = _texts(page, ".trace summary")
        errors = page.console_errors()
    assert shown == (
        [f'transfer {{"account":{big},"amount":5}} '],
        [f'→ transfer {{"account":{big},"amount":5}}'],
    )
    assert arguments == [f'arguments: {{\n  "account": {big},\n  "amount": 5\n}}']
    assert in_editor == f'{{\n  "account": {big},\n  "amount": 5\n}}'
    assert decided == ["approved with edited arguments"]
    assert result == f'result: {{\n  "account": {big},\n  "amount": 6\n}}'
    # The trace shows what ran: the edited arguments (and what the model had asked for).
    assert edited_summary == [f'→ transfer {{"account":{big},"amount":6}} (arguments edited)  ✓']
    assert edited_call == (
        f'arguments: {{\n  "account": {big},\n  "amount": 6\n}}\n'
        f'the model\'s arguments: {{"account":{big},"amount":5}}'
    )
    assert errors == []


def test_the_page_fits_a_phone_screen_with_its_tools_in_view(tmp_path: Path, page: Browser) -> None:
    settings = config(tmp_path / "s.db", model=FunctionModel(transferring), tools=[transfer])
    overflowing = (
        "[...document.querySelectorAll('body *')].filter(e => e.getClientRects().length"
        " && e.getBoundingClientRect().right > innerWidth + 0.5).map(e => e.tagName + '.'"
        " + e.className + ' ' + e.textContent.slice(0, 30))"
    )
    tools_in_view = (
        "(() => { const box = document.querySelector('aside').getBoundingClientRect();"
        " return [box.width > 300, box.height > 40, box.bottom <= innerHeight,"
        " document.getElementById('tools').textContent.includes('transfer')]; })()"
    )
    with page.viewport(390, 844), serving(create_app(settings)) as url:
        page.goto(url)
        page.wait_for("document.getElementById('tools').textContent.includes('transfer')")
        _ask(page, "Pay account " + "9" * 120 + " please")  # one long word
        width = page.run("[innerWidth, document.documentElement.scrollWidth]")
        wide = page.run(overflowing)
        shown = page.run(tools_in_view)
        errors = page.console_errors()
    assert width == [390, 390] and wide == []
    assert shown == [True, True, True, True]
    assert errors == []


def test_the_api_key_is_asked_in_the_page_and_kept_for_the_session(
    tmp_path: Path, page: Browser
) -> None:
    settings = config(tmp_path / "s.db", model=fake_llm(), api_key="k1")
    asking = "!document.getElementById('key').hidden"
    label = "document.querySelector('#key label').textContent"

    def enter(key: str) -> None:
        page.run(
            f"document.getElementById('api-key').value = {json.dumps(key)};"
            "document.getElementById('key').requestSubmit()"
        )

    with serving(create_app(settings)) as url:
        page.goto(url)
        page.run("sessionStorage.clear(); localStorage.removeItem('tooluse-api-key')")
        page.reload()
        page.wait_for(asking)
        first = page.run(label), page.run("document.activeElement.id")
        enter("wrong")
        page.wait_for(f"{label}.includes('refused')")
        refused = page.run(asking)
        enter("k1")
        page.wait_for("document.getElementById('tools').textContent.includes('get_weather')")
        _ask(page, "What's the weather in Paris?")
        kept = page.run(
            "[sessionStorage.getItem('tooluse-api-key'),"
            " localStorage.getItem('tooluse-api-key'), " + asking + "]"
        )
        page.reload()
        # The tools and the conversation's turns load separately: wait for the turn.
        page.wait_for("document.querySelectorAll('.bot .text').length > 0")
        asked_again = page.run(asking)
        answers = _texts(page, ".bot .text")
        errors = page.console_errors()
    assert first == ("This service needs its API key:", "api-key")
    assert refused is True
    assert kept == ["k1", None, False] and asked_again is False
    assert answers == ["From live data."]
    assert [e for e in errors if "status of 401 (Unauthorized)" not in e] == []


def test_an_approval_restored_by_a_reload_expires_on_the_page(
    tmp_path: Path, page: Browser
) -> None:
    settings = config(tmp_path / "s.db", model=fake_llm(), approval_expiry_seconds=2)
    with serving(create_app(settings)) as url:
        page.goto(url)
        _ask(page, "Cancel order A1001")
        page.reload()
        page.wait_for("!!document.querySelector('.approval')")
        assert _panel(page)[1] == WAITING
        page.wait_for(
            "document.querySelector('.approval').firstChild.textContent.startsWith('Expired')"
        )
        heading, buttons = _panel(page)
        errors = page.console_errors()
    assert heading.startswith("Expired: no decision came by ") and buttons == []
    assert errors == []


def _turns_shown(page: Browser) -> Any:
    """Each answer bubble's tool trace (its entries' summaries and texts), route and sources."""
    return page.run(
        "[...document.querySelectorAll('.bot')].map(bot => ["
        " [...bot.querySelectorAll('.trace details')].map(d => d.textContent),"
        " bot.querySelector('.route').textContent, bot.querySelector('.sources').textContent])"
    )


def test_a_reload_shows_the_earlier_turns_and_the_approval_still_waiting(
    tmp_path: Path, page: Browser
) -> None:
    with serving(create_app(config(tmp_path / "s.db", model=fake_llm()))) as url:
        page.goto(url)
        assert _texts(page, ".msg") == []  # a conversation without turns yet
        _ask(page, "What's the weather in Paris?")
        _ask(page, "Any refund rules?")
        _ask(page, "Cancel order A1001")
        asked = _texts(page, ".user .text")
        live = _turns_shown(page)
        page.reload()
        page.wait_for("!!document.querySelector('.approval')")
        shown = _texts(page, ".user .text"), _texts(page, ".bot .text"), _texts(page, ".note")
        restored = _turns_shown(page)
        assert _panel(page)[1] == WAITING
        _decide(page, "Approve")
        page.wait_for("[...document.querySelectorAll('.bot .text')].at(-1).textContent !== ''")
        decided = _turns_shown(page)
        page.reload()
        page.wait_for("document.querySelectorAll('.bot').length === 3")
        after_decision = _texts(page, ".bot .text"), _texts(page, ".approval")
        restored_decided = _turns_shown(page)
        page.run("document.getElementById('new').click()")
        page.reload()
        page.wait_for("document.getElementById('tools').textContent.includes('get_weather')")
        after_new = _texts(page, ".msg")
        errors = page.console_errors()
    assert asked == ["What's the weather in Paris?", "Any refund rules?", "Cancel order A1001"]
    assert shown == (asked, ["From live data.", "From the knowledge base.", ""], [])
    # Each turn's trace, route and sources as it was shown live (memory has none of them).
    weather, refunds, cancel = restored
    assert restored == live
    assert weather[0][0].startswith('→ get_weather {"city":"Paris"}  ✓')
    assert weather[1:] == ["answered from live data (1 fetched)", ""]
    assert refunds[0] == [] and refunds[1] == "answered from the knowledge base"
    assert refunds[2].startswith("sources: ")
    # The held call, without a result: it pairs with its result once run.
    assert [entry.split("arguments:")[0] for entry in cancel[0]] == [
        '→ cancel_order {"order_id":"A1001"}'
    ]
    assert cancel[1:] == ["", ""]
    assert decided[2][0][0].startswith('→ cancel_order {"order_id":"A1001"}  ✓')
    assert restored_decided == decided
    assert after_decision == (
        ["From live data.", "From the knowledge base.", "From live data."],
        [],
    )
    assert after_new == [] and errors == []


def test_a_reload_says_that_only_the_last_messages_are_kept(tmp_path: Path, page: Browser) -> None:
    settings = config(tmp_path / "s.db", model=fake_llm(), memory_window=4)
    with serving(create_app(settings)) as url:
        page.goto(url)
        for question in ("First?", "Second?", "Third?"):
            _ask(page, question)
        page.reload()
        page.wait_for("document.querySelectorAll('.user').length === 2")
        shown, (note,) = _texts(page, ".user .text"), _texts(page, ".note")
        errors = page.console_errors()
    assert shown == ["Second?", "Third?"]
    assert note == (
        "The service keeps the last 4 messages of a conversation: older ones are not shown, and"
        " the assistant no longer has them."
    )
    assert errors == []


def test_a_reload_says_when_the_service_no_longer_has_the_conversation(
    tmp_path: Path, page: Browser
) -> None:
    app = create_app(config(tmp_path / "s.db", model=fake_llm()))
    with serving(app) as url:
        page.goto(url)
        _ask(page, "Any refund rules?")
        app.state.service.memory.clear(page.run("localStorage.getItem('tooluse.conversation')"))
        page.reload()
        page.wait_for("!!document.querySelector('.note')")
        shown = _texts(page, ".msg")
        errors = page.console_errors()
    assert shown == [
        "The service has no earlier messages of this conversation (its memory was cleared, or no"
        " question in it was answered)."
    ]
    # The browser logs the 404 itself; nothing else went wrong.
    assert [e for e in errors if "status of 404 (Not Found)" not in e] == []


def test_a_reload_whose_conversation_cannot_be_read_says_why(tmp_path: Path, page: Browser) -> None:
    with serving(create_app(config(tmp_path / "s.db", model=fake_llm()))) as url:
        page.goto(url)
        # An id the service refuses (longer than 200 characters), as if asked in.
        page.run(
            "const id = 'x'.repeat(201); localStorage.setItem('tooluse.conversation', id);"
            " localStorage.setItem('tooluse.conversation.asked', id)"
        )
        page.reload()
        page.wait_for("!!document.querySelector('.msg.error')")
        (error,) = _texts(page, ".msg.error")
        errors = page.console_errors()
    assert error == (
        "Earlier messages of this conversation could not be shown (path.conversation_id: String"
        " should have at most 200 characters); the assistant may still have them. Reload to try"
        " again."
    )
    assert [e for e in errors if "status of 422 (Unprocessable" not in e] == []


def test_enter_while_an_answer_streams_keeps_the_next_question_in_the_box(
    tmp_path: Path, page: Browser
) -> None:
    answering = threading.Event()
    release = threading.Event()

    def slow_answer(prompt: Prompt) -> ResponseLike:
        if prompt.options.tool_callbacks:
            return ""  # the router: no tool
        answering.set()
        assert release.wait(10)
        return "First answer."

    with serving(create_app(config(tmp_path / "s.db", model=FunctionModel(slow_answer)))) as url:
        page.goto(url)
        page.run(
            "document.getElementById('message').value = 'first';"
            "document.getElementById('chat').requestSubmit()"
        )
        assert answering.wait(10)
        page.run(
            "const box = document.getElementById('message'); box.value = 'second';"
            "box.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}))"
        )
        asked_while_streaming = _texts(page, ".msg.user")
        release.set()
        page.wait_for("!document.getElementById('send').disabled")
        box = page.run("document.getElementById('message').value")
        errors = page.console_errors()
    assert asked_while_streaming == ["first"]
    assert box == "second"
    assert errors == []


def test_a_question_over_the_limit_stays_in_the_box_and_says_why(
    tmp_path: Path, page: Browser
) -> None:
    # The box had maxlength: a longer paste was cut to 32,000 characters without a word, and
    # the cut question sent. A question over the limit now stays whole in the box, unsent.
    def paste(text: str) -> str:
        return (
            f"box.value = {json.dumps(text)};"
            "box.dispatchEvent(new InputEvent('input', {inputType: 'insertFromPaste'}));"
            "document.getElementById('chat').requestSubmit()"
        )

    with serving(create_app(config(tmp_path / "s.db", model=fake_llm()))) as url:
        page.goto(url)
        page.run("window.box = document.getElementById('message')")
        page.run(paste("长" * 32_001))
        kept = page.run("box.value.length")
        said = page.run("box.validationMessage")
        asked = _texts(page, ".msg.user")
        # Counted as the service counts: an emoji is one character (two in box.value.length,
        # which maxlength counts).
        page.run(paste("😀" * 32_000))
        page.wait_for(
            "document.querySelectorAll('.bot .text').length === 1"
            " && !document.getElementById('send').disabled"
        )
        sent = [len(text) for text in _texts(page, ".msg.user")]
        errors = page.console_errors()
    assert (kept, asked) == (32_001, [])
    assert said == "The service takes 32000 characters at most; this is 32001."
    assert sent == [32_000]
    assert errors == []
