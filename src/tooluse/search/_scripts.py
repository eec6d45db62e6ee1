"""The language mix of a catalogue and a query, told by script: how much lexical matching can
mean for each tool.

A Chinese question over tools described in English shares no words with them: BM25 then
matches only its numbers and stray Latin words ("ID", "PDF"), and its best match, scaled to 1,
outweighs what the embeddings found. So each tool's lexical score counts in proportion to the
share of the query's words written in a script the tool is written in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tooluse.search._documents import parameter_choices, parameter_texts
from tooluse.search._text import SCRIPTS, script_counts
from tooluse.search._types import ToolReference

__all__ = ["ScriptMix"]

# A tool is fully written in a script when this share of its prose's words is; below, in
# proportion. A word or two of another script (an example value, a choice) counts for little.
_FULL_SHARE = 0.2


@dataclasses.dataclass(frozen=True, slots=True)
class ScriptMix:
    """Per tool and script, how fully the tool is written in it (0 to 1), computed once when a
    catalogue is built; per query, each tool's share of the query's words it can match."""

    affinity: npt.NDArray[np.float32]  # [scripts, tools]: a script's tools in one run
    everywhere: tuple[bool, ...]  # per script: every tool fully written in it

    @property
    def latin(self) -> npt.NDArray[np.float32] | None:
        """How fully each tool is written in Latin letters; None: every tool fully is."""
        return None if self.everywhere[0] else self.affinity[0]

    @property
    def has_latin(self) -> bool:
        """Whether any tool is written in Latin letters, even in part (its names count)."""
        return self.everywhere[0] or bool(self.affinity[0].any())

    @classmethod
    def of(cls, references: Sequence[ToolReference]) -> ScriptMix:
        """A tool's prose (its description, its parameters' descriptions and choices) says
        which scripts it is written in; its identifiers (name, parameter names) match in
        theirs whatever the prose: a Chinese tool's English names match an English word."""
        rows = [_counts(reference) for reference in references]
        prose, identifiers = (
            np.array([row[side] for row in rows], dtype=np.float32).reshape(-1, len(SCRIPTS))
            for side in (0, 1)
        )
        totals = prose.sum(axis=1, keepdims=True)
        affinity = np.minimum(prose / np.maximum(totals, 1.0) / _FULL_SHARE, 1.0)
        affinity[identifiers > 0] = 1.0
        affinity[(totals[:, 0] == 0) & (identifiers.sum(axis=1) == 0)] = 1.0  # nothing known
        everywhere = tuple(bool(column.all()) for column in (affinity == 1.0).T)
        return cls(np.ascontiguousarray(affinity.T), everywhere)

    def matchable(self, query: str) -> npt.NDArray[np.float32] | None:
        """Each tool's share of the query's words (0 to 1) in the scripts it is written in;
        None when every tool can match all of them (the usual case: one language), or the
        query has no words (digits only)."""
        counts = script_counts(query)
        total = sum(counts)
        present = [script for script, count in enumerate(counts) if count]
        if not total or all(self.everywhere[script] for script in present):
            return None
        first, *others = present
        share: npt.NDArray[np.float32] = (counts[first] / total) * self.affinity[first]
        for script in others:
            share += (counts[script] / total) * self.affinity[script]
        return share


def _counts(reference: ToolReference) -> tuple[list[int], list[int]]:
    """The words per script of a tool's prose and of its identifiers."""
    parameters = list(parameter_texts(reference.parameters))
    prose = [reference.summary, *(text for _, text in parameters)]
    prose.extend(parameter_choices(reference.parameters))
    identifiers = [reference.tool_name, *(name for name, _ in parameters)]
    return script_counts(" ".join(prose)), script_counts(" ".join(identifiers))
