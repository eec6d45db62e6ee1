"""``MODULE:ATTRIBUTE`` on the command line: the object a command is pointed at.

One loader for every command that takes one (``tooluse serve|chat|eval --tools``,
``tooluse mcp serve``), so they all find the same modules:

- ``my_tools:tools`` or ``myapp.tools:TOOLS``: a module name, found like ``python -m`` finds
  one: the working directory first, then ``sys.path`` (``PYTHONPATH``, installed packages);
- ``my_tools.py:tools`` or ``path/to/my_tools.py:tools``: a file, imported like
  ``python path/to/my_tools.py`` runs one: its directory first on ``sys.path`` (so it can
  import the modules next to it), under its own name (``my_tools``);
- the attribute may be dotted (``MyTools.search``).

A reference that does not resolve raises :class:`TargetError`, whose message says what to
do; an exception raised by the module's own code while it is imported propagates as it is
(its traceback points into that code).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["TargetError", "load_target"]


class TargetError(ValueError):
    """A ``MODULE:ATTRIBUTE`` reference that cannot be loaded; the message says why."""


def load_target(target: str) -> object:
    """The object ``target`` (``MODULE:ATTRIBUTE`` or ``FILE.py:ATTRIBUTE``) names."""
    module_name, colon, attribute = target.rpartition(":")  # rpartition: C:\\x\\tools.py:t
    if not colon or not module_name.strip() or not attribute.strip():
        raise TargetError(
            f"expected MODULE:ATTRIBUTE or FILE.py:ATTRIBUTE (e.g. my_tools:tools), got {target!r}"
        )
    if module_name.endswith(".py"):
        module = _import_file(Path(module_name), attribute)
    else:
        _prepend_path(os.getcwd())  # like `python -m`: modules in the working directory
        module = _import(module_name, attribute)
    found: object = module
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise TargetError(
                f"module {module.__name__!r} ({_where(module)}) has no attribute {attribute!r}"
            ) from None
    return found


def _prepend_path(directory: str) -> None:
    if directory not in sys.path:
        sys.path.insert(0, directory)
    importlib.invalidate_caches()  # a file written since the directory was last looked at


def _import_file(path: Path, attribute: str) -> ModuleType:
    if not path.is_file():
        where = "" if path.is_absolute() else f" in the working directory {os.getcwd()}"
        raise TargetError(f"no file {str(path)!r}{where}")
    name = path.stem
    if not name or "." in name:
        raise TargetError(
            f"{path}: a file imported as a module needs a name without dots "
            f"(e.g. my_tools.py), got {path.name!r}"
        )
    _prepend_path(str(path.resolve().parent))
    module = _import(name, attribute)
    loaded = getattr(module, "__file__", None)
    if loaded is None or Path(loaded).resolve() != path.resolve():
        raise TargetError(
            f"{path} cannot be imported as {name!r}: that name is already the module at "
            f"{_where(module)}; rename the file"
        )
    return module


def _import(name: str, attribute: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (name == missing or name.startswith(f"{missing}.")):
            hint = (
                f"Python looked in the working directory ({os.getcwd()}) and on sys.path. "
                "Run tooluse from the directory that holds the module, add that directory "
                "to PYTHONPATH, or install the package that provides it in this Python "
                f"environment ({sys.executable})"
            )
            if "." not in name:
                hint += f"; or give the file: path/to/{name}.py:{attribute}"
            raise TargetError(f"cannot import {name!r}: {exc}. {hint}") from exc
        raise TargetError(
            f"cannot import {name!r}: {exc}, which it imports; install that in this Python "
            f"environment ({sys.executable})"
        ) from exc
    except ImportError as exc:
        raise TargetError(f"cannot import {name!r}: {exc}") from exc


def _where(module: ModuleType) -> str:
    return str(getattr(module, "__file__", None) or "built in")
