"""``python -m tooluse.cli``: the ``tooluse`` command."""

from tooluse.cli import entry_point

entry_point()
