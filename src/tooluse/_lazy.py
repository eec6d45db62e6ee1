"""Lazy package attributes: a package's public names are imported when first used.

``import tooluse`` then costs only what the names a program uses need (the loop's names do not
pull in numpy, the embedding model or the SDKs). Each package keeps its explicit imports under
``TYPE_CHECKING`` for type checkers and IDEs, and hands the same names to :func:`lazy_exports`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, modules: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` for ``modules`` (a module's
    absolute name -> the names it exports). A name is imported on first access and stored in
    the package's namespace, so later accesses are plain attribute reads."""
    source = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = source.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(source))

    return __getattr__, __dir__
