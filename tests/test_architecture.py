"""The layering that docs/architecture.md states, checked on the source: dependencies point
one way, declaration <- models <- execution <- loop <- patterns <- service."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src"
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
_NAME = re.compile(r"`(tooluse(?:\.\w+)*)`")


def _layers() -> list[list[str]]:
    """The modules of each row of the doc's layer table, in order."""
    table = DOC[DOC.index("| layer | modules |") :].split("\n\n")[0]
    rows = [line.split("|")[2] for line in table.splitlines()[2:]]
    return [_NAME.findall(modules) for modules in rows]


def _plumbing() -> list[str]:
    """The private modules the doc names before the table (shared by every layer)."""
    return [name for name in _NAME.findall(DOC[: DOC.index("| layer |")]) if "._" in name]


LAYERS = _layers()
PLUMBING = _plumbing()


def _inside(module: str, names: list[str]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in names)


def _layer(module: str) -> int | None:
    return next((i for i, names in enumerate(LAYERS) if _inside(module, names)), None)


def _modules() -> dict[str, Path]:
    found = {}
    for path in SOURCE.joinpath("tooluse").rglob("*.py"):
        parts = path.relative_to(SOURCE).with_suffix("").parts
        found[".".join(parts).removesuffix(".__init__")] = path
    return found


def _imported(path: Path) -> set[str]:
    """Every tooluse module the file imports, lazily or for type checking included."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    return {name for name in imported if name == "tooluse" or name.startswith("tooluse.")}


def test_the_doc_names_six_layers_and_the_plumbing() -> None:
    assert len(LAYERS) == 6 and all(LAYERS)
    assert "tooluse._fork" in PLUMBING and "tooluse.messages" in LAYERS[0]


def test_every_module_has_a_place_in_the_architecture() -> None:
    placed = {
        module
        for module in _modules()
        if module == "tooluse" or _layer(module) is not None or _inside(module, PLUMBING)
    }
    assert sorted(set(_modules()) - placed) == []


def test_no_module_imports_from_a_layer_to_its_right() -> None:
    wrong = []
    for module, path in sorted(_modules().items()):
        own = _layer(module)
        if _inside(module, PLUMBING):
            own = 0  # plumbing serves every layer, so it may use only the first
        if own is None:
            continue
        for name in sorted(_imported(path)):
            layer = _layer(name)
            if layer is not None and layer > own:
                wrong.append(f"{module} (layer {own}) imports {name} (layer {layer})")
    assert wrong == []


_MUTATORS = {"pop", "popitem", "setdefault", "update", "clear"}


def _context_writes(path: Path) -> list[str]:
    """Where the file writes into an object's ``context`` dict in place."""
    writes = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        target = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            target = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MUTATORS
        ):
            target = node.func.value
        if isinstance(target, ast.Attribute) and target.attr == "context":
            writes.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
    return writes


def test_the_request_context_holds_only_the_callers_data() -> None:
    """No module parks its own state in a request's (or a response's) ``context``: the tool
    loop's input and output are ``request.resume`` and ``request.turn.outcome``, and an
    advisor's state for the turn lives in ``request.turn`` under a ``TurnKey`` of its own.
    (An advisor may still publish something for the caller in a new dict it passes on.)"""
    writes = {
        module: found
        for module, path in sorted(_modules().items())
        if (found := _context_writes(path))
    }
    assert writes == {}


def test_the_advisors_package_exports_no_context_keys() -> None:
    import tooluse.advisors

    assert [name for name in tooluse.advisors.__all__ if name.endswith("_KEY")] == []
