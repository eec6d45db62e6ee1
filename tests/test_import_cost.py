"""``import tooluse`` and the loop's names load what a request needs, not the whole package:
the package root resolves its names on first use (``tooluse._lazy``), and numpy, the embedding
model's runtime, the provider SDKs, the web stack and OpenTelemetry are imported by the code
that uses them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import tooluse

HEAVY = ("numpy", "onnxruntime", "openai", "anthropic", "fastapi", "starlette", "opentelemetry")


def _loaded_after(statement: str) -> set[str]:
    """Top-level packages a fresh interpreter holds after ``statement``."""
    script = textwrap.dedent(
        f"""
        {statement}
        import sys
        print(" ".join(sorted({{name.partition(".")[0] for name in sys.modules}})))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


@pytest.mark.parametrize(
    "statement",
    [
        "import tooluse",
        "from tooluse import ChatClient, Prompt, Usage, tool, ToolCallingAdvisor",
        "import tooluse.messages, tooluse.tools, tooluse.calling, tooluse.client",
    ],
)
def test_the_loop_imports_no_heavy_module(statement: str) -> None:
    assert _loaded_after(statement) & set(HEAVY) == set()


def test_a_name_of_a_heavy_part_loads_it_when_used() -> None:
    loaded = _loaded_after("from tooluse import RetrievalAugmentationAdvisor")
    assert "numpy" in loaded  # the mechanism defers imports, it does not drop them


def test_every_public_name_resolves_and_is_the_submodules_own() -> None:
    for name in tooluse.__all__:
        value = getattr(tooluse, name)
        assert value is not None
    assert tooluse.ChatClient is __import__("tooluse.client").client.ChatClient
    assert set(tooluse.__all__) <= set(dir(tooluse))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'tooluse' has no attribute 'NoSuchName'"):
        _ = tooluse.NoSuchName  # type: ignore[attr-defined]
