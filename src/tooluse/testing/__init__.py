"""Test doubles for code that uses chat models, and assertions about the tools they called.

- :class:`ScriptedModel` replays given responses in order and records the requests.
- :class:`FunctionModel` lets a function decide each response.
- :class:`TestModel` calls every offered tool once with schema-valid arguments, then answers.

All three implement :class:`tooluse.models.ChatModel` (``acall``, ``stream``, and the blocking
``call`` of :class:`~tooluse.models.BaseChatModel`), so they stand in for a real provider
anywhere.
"""

from tooluse.testing._assertions import (
    ToolCallSource,
    assert_tool_called,
    assert_tool_not_called,
    called_tools,
)
from tooluse.testing._function import FunctionModel
from tooluse.testing._responses import ResponseLike, chat_response, tool_call
from tooluse.testing._schema_values import SchemaValueError, generate_arguments, generate_value
from tooluse.testing._scripted import ScriptedModel, ScriptExhaustedError
from tooluse.testing._test_model import TestModel

__all__ = [
    "FunctionModel",
    "ResponseLike",
    "SchemaValueError",
    "ScriptExhaustedError",
    "ScriptedModel",
    "TestModel",
    "ToolCallSource",
    "assert_tool_called",
    "assert_tool_not_called",
    "called_tools",
    "chat_response",
    "generate_arguments",
    "generate_value",
    "tool_call",
]
