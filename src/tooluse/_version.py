"""``VERSION``: the installed distribution's version (``tooluse.__version__``, ``tooluse
--version``, the MCP client's and server's ``serverInfo``/``clientInfo``)."""

from __future__ import annotations

import importlib.metadata

__all__ = ["VERSION", "__version__"]

try:
    VERSION: str = importlib.metadata.version("tooluse")
except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
    VERSION = "0+unknown"

__version__ = VERSION  # tooluse.__version__ (the package root imports it on first use)
