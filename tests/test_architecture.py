"""The layering that docs/architecture.md states, checked on the source: dependencies point
one way, declaration <- models <- execution <- loop <- patterns <- service, as its first
statement and its layer table both say."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src"
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
_NAME = re.compile(r"`(tooluse(?:\.\w+)*)`")


def _rows() -> list[list[str]]:
    """The cells of each row of the doc's layer table, in order."""
    table = DOC[DOC.index("| layer | modules |") :].split("\n\n")[0]
    return [line.split("|")[1:-1] for line in table.splitlines()[2:]]


def _layers() -> list[list[str]]:
    """The modules of each row of the doc's layer table, in order."""
    return [_NAME.findall(row[1]) for row in _rows()]


def _chain() -> list[str]:
    """The layers the doc's first statement names, left to right."""
    statement = DOC[DOC.index("Dependencies point one way: **") :].split("**")[1]
    return statement.split(" <- ")


def _plumbing() -> list[str]:
    """The private modules the doc names before the table (shared by every layer)."""
    return [name for name in _NAME.findall(DOC[: DOC.index("| layer |")]) if "._" in name]


LAYERS = _layers()
PLUMBING = _plumbing()
# The one import to the right the doc states: SPEC section 1 names the provider shaping under
# tooluse.schema, and only the providers use it, so it lives in tooluse.models and
# tooluse.schema re-exports it (imported on first use).
RE_EXPORTS = {("tooluse.schema", "tooluse.models._schema_shaping")}


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


def _imported(path: Path, *, at_load_only: bool = False) -> set[str]:
    """Every tooluse module the file imports, for type checking included, and lazily (in a
    function's body) unless ``at_load_only``."""
    imported = set()
    nodes = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while nodes:
        node = nodes.pop()
        if at_load_only and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        nodes.extend(ast.iter_child_nodes(node))
    return {name for name in imported if name == "tooluse" or name.startswith("tooluse.")}


def test_the_doc_names_six_layers_and_the_plumbing() -> None:
    assert len(LAYERS) == 6 and all(LAYERS)
    assert "tooluse._fork" in PLUMBING and "tooluse.messages" in LAYERS[0]


def test_the_allowed_re_export_is_the_docs() -> None:
    for module, name in RE_EXPORTS:
        assert f"`{module}` re-exports the provider shaping of `tooluse.models`" in DOC
        assert _layer(module) == 0 and _layer(name) == 1


def test_the_statement_and_the_table_name_the_same_layers_in_order() -> None:
    assert _chain() == [row[0].strip() for row in _rows()]


def test_each_layer_is_whole_top_level_packages() -> None:
    """The folders tell the layering: a table entry is a package (or module) right under
    ``tooluse``, and no package is listed twice, so none is split across layers."""
    names = [name for names in LAYERS for name in names]
    assert [name for name in names if name.count(".") != 1] == []
    assert len(names) == len(set(names))


def test_schema_loads_without_tools() -> None:
    """tools builds on schema; the one function-level name schema exports imports the
    function schema when called, never when schema loads."""
    at_load = set()
    for path in SOURCE.joinpath("tooluse", "schema").rglob("*.py"):
        at_load |= _imported(path, at_load_only=True)
    assert [name for name in sorted(at_load) if _inside(name, ["tooluse.tools"])] == []


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
            if layer is not None and layer > own and (module, name) not in RE_EXPORTS:
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
