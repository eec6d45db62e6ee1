"""``import tooluse`` and the loop's names load what a request needs, not the whole package:
the package root resolves its names on first use (``tooluse._lazy``), and numpy, the embedding
model's runtime, the provider SDKs, the web stack and OpenTelemetry are imported by the code
that uses them."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tooluse

HEAVY = ("numpy", "onnxruntime", "openai", "anthropic", "fastapi", "starlette", "opentelemetry")
# The guards' stores, loaded by the programs that configure them (the service), not the loop.
STORES = (
    "sqlite3",
    "tooluse._sqlite",
    "tooluse._postgres",
    "tooluse._tables",
    "tooluse.calling._journal_stores",
    "tooluse.calling._audit_stores",
    "tooluse.calling._rate_limit_stores",
)
LAZY_PACKAGES = ("tooluse", "tooluse.calling", "tooluse.models", "tooluse.schema")


def _loaded_after(statement: str, *, whole_names: bool = False) -> set[str]:
    """Top-level packages (or, ``whole_names``, modules) a fresh interpreter holds after
    ``statement``."""
    name = "name" if whole_names else 'name.partition(".")[0]'
    script = textwrap.dedent(
        f"""
        {statement}
        import sys
        print(" ".join(sorted({{{name} for name in sys.modules}})))
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


def test_the_loop_loads_none_of_the_guards_stores() -> None:
    statement = (
        "from tooluse import ChatClient, Prompt, Usage, tool, ToolCallingAdvisor; "
        "from tooluse.messages import AssistantMessage, ChatResponse, ToolCall; "
        "from tooluse.calling import ToolCallingManager, RateLimit, ToolCallJournal"
    )
    assert _loaded_after(statement, whole_names=True) & set(STORES) == set()
    assert "sqlite3" in _loaded_after("from tooluse.calling import SqliteAuditLog")


def test_a_name_of_a_heavy_part_loads_it_when_used() -> None:
    loaded = _loaded_after("from tooluse import RetrievalAugmentationAdvisor")
    assert "numpy" in loaded  # the mechanism defers imports, it does not drop them


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_public_name_resolves_and_is_the_submodules_own(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__all__, f"{package}'s stub lists no names"
    for name in module.__all__:
        assert getattr(module, name) is not None
    assert set(module.__all__) <= set(dir(module))
    assert tooluse.ChatClient is importlib.import_module("tooluse.client").ChatClient
    calling = importlib.import_module("tooluse.calling")
    assert (
        calling.SqliteAuditLog
        is importlib.import_module("tooluse.calling._audit_stores").SqliteAuditLog
    )


def test_one_way_of_lazy_loading_in_the_package() -> None:
    """A package that loads names on first use does it through ``tooluse._lazy`` (its stub is
    the one list of its names, which type checkers read), not a ``__getattr__`` of its own."""
    root = Path(tooluse.__file__).parent
    for init in root.rglob("__init__.py"):
        package = ".".join(init.parent.relative_to(root.parent).parts)
        getter = getattr(importlib.import_module(package), "__getattr__", None)
        if getter is not None:
            assert getter.__module__ == "tooluse._lazy", f"{package} has a __getattr__ of its own"
            assert init.with_suffix(".pyi").exists(), f"{package} loads lazily without a stub"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'tooluse' has no attribute 'NoSuchName'"):
        _ = tooluse.NoSuchName  # type: ignore[attr-defined]
