"""Toolsets: the tools of a suite (an MCP server, an API class) are used together.

A turn that moves a file also changes directory; one that posts also logs in. The tools it
names rank well, their siblings often do not. So each tool of a toolset also gets a share of
the best score among its category's *other* tools: a found tool lifts its siblings, and a
tool's own score never lifts itself.

Only categories of a suite's size count. A large one is a topic (100 Java APIs); so, mostly,
is a category of a few tools: alternatives for one need ("analyse evidence", "analyse a
substance", "get a forensic report"), where lifting the others pushes out the tools of the
request's other needs (docs/benchmarks.md, "Outside the dev sets").
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tooluse.search._types import ToolReference

__all__ = ["Toolsets"]

Scores = npt.NDArray[np.float32]


@dataclasses.dataclass(frozen=True, slots=True)
class Toolsets:
    """The catalogue's categories of ``min_size`` to ``max_size`` tools, as flat position
    arrays."""

    positions: npt.NDArray[np.intp]  # the members, grouped by toolset
    starts: npt.NDArray[np.intp]  # where each toolset starts in ``positions``
    toolset_of: npt.NDArray[np.intp]  # for each member, its toolset

    @classmethod
    def of(cls, references: Sequence[ToolReference], min_size: int, max_size: int) -> Toolsets:
        groups: dict[str, list[int]] = defaultdict(list)
        for position, reference in enumerate(references):
            if reference.category is not None and reference.category.strip():
                groups[reference.category.strip().casefold()].append(position)
        members = [group for group in groups.values() if min_size <= len(group) <= max_size]
        sizes = [len(group) for group in members]
        return cls(
            np.array([p for group in members for p in group], dtype=np.intp),
            np.cumsum([0, *sizes[:-1]], dtype=np.intp) if sizes else np.empty(0, np.intp),
            np.repeat(np.arange(len(sizes), dtype=np.intp), sizes),
        )

    def boost(self, scores: Scores, weight: float) -> None:
        """Add ``weight`` x the best score of its toolset's other tools to each member."""
        if weight == 0 or self.positions.size == 0:
            return
        values = scores[self.positions]
        best = np.maximum.reduceat(values, self.starts)
        is_best = values == best[self.toolset_of]
        # The best member's siblings' best: the runner-up, or the best again if tied.
        runner_up = np.maximum.reduceat(np.where(is_best, -np.inf, values), self.starts)
        tied = np.add.reduceat(is_best.astype(np.intp), self.starts) > 1
        best_others = np.where(tied, best, runner_up)
        lift = np.where(is_best, best_others[self.toolset_of], best[self.toolset_of])
        scores[self.positions] += weight * np.maximum(lift, 0.0).astype(np.float32)
