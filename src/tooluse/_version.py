"""``VERSION``: the installed distribution's version (``tooluse.__version__``, ``tooluse
--version``, the MCP client's and server's ``serverInfo``/``clientInfo``)."""

from __future__ import annotations

import importlib.metadata

__all__ = ["VERSION"]

try:
    VERSION: str = importlib.metadata.version("tooluse")
except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
    VERSION = "0+unknown"
