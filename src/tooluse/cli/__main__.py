"""``python -m tooluse.cli``: the ``tooluse`` command."""

from tooluse.cli import main

raise SystemExit(main())
