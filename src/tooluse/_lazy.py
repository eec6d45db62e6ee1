"""Lazy package attributes: a package's public names are imported when first used.

The one way the package loads lazily (the root, ``tooluse.calling``, ``tooluse.models``,
``tooluse.schema``): ``import tooluse`` and the loop's names then cost only what the names a
program uses need (the loop's names load neither numpy, the embedding model and the SDKs, nor
the SQLite and PostgreSQL stores of the guards). The names are listed once, in the package's
stub (``__init__.pyi``, which type checkers read instead of ``__init__.py``): its ``from
MODULE import NAME as ALIAS`` lines say where each comes from, and :func:`stub_exports` reads
them on first use. A package's ``__init__.py`` is then only its docstring and
``__getattr__, __dir__ = stub_exports(__name__)``.
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["stub_exports"]


def stub_exports(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: each ``from MODULE import
    NAME as ALIAS`` of its stub is the attribute ``ALIAS``, and ``__all__`` lists those not
    starting with ``_``. An attribute is imported on first access and stored in the
    package's namespace, so later accesses are plain attribute reads; the stub is read on
    the first access of any."""
    sources: dict[str, tuple[str, str]] = {}  # alias -> (module, name), once read

    def exported() -> dict[str, tuple[str, str]]:
        if not sources:
            sources.update(_stub_imports(package))
        return sources

    def __getattr__(alias: str) -> Any:
        if alias == "__all__":
            value: Any = sorted(name for name in exported() if not name.startswith("_"))
        elif (source := exported().get(alias)) is not None:
            value = getattr(importlib.import_module(source[0]), source[1])
        else:
            raise AttributeError(f"module {package!r} has no attribute {alias!r}")
        setattr(sys.modules[package], alias, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exported()))

    return __getattr__, __dir__


def _stub_imports(package: str) -> dict[str, tuple[str, str]]:
    """Alias -> (module, name) of the ``from MODULE import NAME as ALIAS`` lines of
    ``package``'s ``__init__.pyi``."""
    init = sys.modules[package].__file__
    if init is None:
        raise ImportError(f"{package} has no __file__: its stub cannot be found")
    stub = os.path.splitext(init)[0] + ".pyi"
    with open(stub, encoding="utf-8") as file:
        tree = ast.parse(file.read(), stub)
    found = {
        alias.asname: (node.module, alias.name)
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
        for alias in node.names
        if alias.asname is not None
    }
    if not found:
        raise ImportError(f"{stub} names no attributes (from MODULE import NAME as ALIAS)")
    return found
