"""docs/models.md's examples run as written, in order. The first talks to OpenAI: here it
talks to the local server of ``provider_server`` in OpenAI's wire format, reached through the
variables ``from_config`` documents (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``)."""

import ast
import inspect

import pytest

from _doc_examples import DOCS, python_examples, run_examples
from provider_payloads import openai_call, openai_completion
from provider_server import Reply, shared_server
from tooluse.models import AnthropicChatModel, OpenAIResponsesChatModel

DOC = DOCS / "models.md"


def test_the_examples_run_in_order(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = shared_server()
    server.expect(
        Reply.json(
            openai_completion(
                tool_calls=[openai_call("c1", "get_weather", {"city": "Paris"})],
                finish_reason="tool_calls",
            )
        ),
        Reply.json(openai_completion("It is sunny in Paris.")),
    )
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    examples = python_examples(DOC)
    assert len(examples) == 4
    run_examples(DOC, examples, {"__name__": "models_doc"})
    assert capsys.readouterr().out == "It is sunny in Paris.\n"
    first, second = (request.body for request in server.requests)
    assert first["model"] == "gpt-4o-mini"
    assert [tool["function"]["name"] for tool in first["tools"]] == ["get_weather"]
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": '"Sunny in Paris"',
    }


@pytest.mark.parametrize(
    ("position", "model_class"), [(2, OpenAIResponsesChatModel), (3, AnthropicChatModel)]
)
def test_the_settings_shown_are_the_defaults(position: int, model_class: type) -> None:
    example = python_examples(DOC)[position]
    call = next(node for node in ast.walk(ast.parse(example)) if isinstance(node, ast.Call))
    assert isinstance(call.func, ast.Name) and call.func.id == model_class.__name__
    shown = {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords}
    parameters = inspect.signature(model_class).parameters
    assert set(shown) == set(parameters) - {"model"}
    assert shown == {name: parameters[name].default for name in shown}
