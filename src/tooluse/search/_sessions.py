"""Per-session storage shared by the built-in indexes.

Each session holds its references by name (a re-indexed name replaces the old entry) and a
built, immutable snapshot of them that searches read without locks. Snapshots are
content-addressed and shared: a thousand sessions over one catalogue hold one snapshot, built
once. Indexing only marks the session stale; the next search builds (or reuses) the snapshot.
"""

from __future__ import annotations

import hashlib
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

import numpy as np
import numpy.typing as npt

from tooluse._fork import ProcessLock
from tooluse.search._cousage import ToolCoUsage
from tooluse.search._types import (
    ToolReference,
    ToolSearchRequest,
    ToolSearchResponse,
    check_count,
)

__all__ = ["DEFAULT_MAX_RESULTS", "SessionToolIndex", "ToolCatalogue", "top_positions"]

DEFAULT_MAX_RESULTS = 10

SnapshotT = TypeVar("SnapshotT")


class ToolCatalogue(Sequence[ToolReference]):
    """An immutable list of tools that sessions share: a thousand conversations over one
    catalogue hold one of these, not a copy each, and its key (a hash over every tool, which
    finds the shared snapshot) is computed once, not per session. A name given twice keeps the
    last, moved to the end (as indexing it again does). Pass one to ``replace_tools`` (the
    search advisor does)."""

    __slots__ = ("_key", "_positions", "_references")

    def __init__(self, references: Iterable[ToolReference]) -> None:
        by_name: dict[str, ToolReference] = {}
        for reference in references:
            if not isinstance(reference, ToolReference):
                raise TypeError(f"expected ToolReference, got {type(reference).__name__}")
            by_name.pop(reference.tool_name, None)
            by_name[reference.tool_name] = reference
        self._references = tuple(by_name.values())
        self._key: str | None = None
        self._positions: dict[str, int] | None = None

    @property
    def references(self) -> tuple[ToolReference, ...]:
        return self._references

    @property
    def key(self) -> str:
        """SHA-256 (hex) over every tool's name, summary, category and parameters; computed on
        first use (two threads may both compute it: same value)."""
        if self._key is None:
            self._key = _catalogue_key(self._references)
        return self._key

    @property
    def positions(self) -> dict[str, int]:
        """Each tool's position by name; made on first use, as ``key`` is."""
        if self._positions is None:
            self._positions = {r.tool_name: p for p, r in enumerate(self._references)}
        return self._positions

    def __len__(self) -> int:
        return len(self._references)

    @overload
    def __getitem__(self, index: int) -> ToolReference: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[ToolReference, ...]: ...

    def __getitem__(self, index: int | slice) -> ToolReference | tuple[ToolReference, ...]:
        return self._references[index]

    def __iter__(self) -> Iterator[ToolReference]:
        return iter(self._references)

    def __repr__(self) -> str:
        return f"ToolCatalogue({len(self._references)} tools)"


class _Session:
    """A session's tools: a shared :class:`ToolCatalogue` until tools are added one by one,
    then its own dict (made into a catalogue again at its next search)."""

    __slots__ = ("catalogue", "own", "snapshot", "version")

    def __init__(self, catalogue: ToolCatalogue | None = None) -> None:
        self.catalogue = catalogue
        self.own: dict[str, ToolReference] | None = None if catalogue is not None else {}
        self.snapshot: _Shared[Any] | None = None
        self.version = 0

    def __len__(self) -> int:
        return len(self.catalogue) if self.catalogue is not None else len(self.own or ())

    def add(self, references: Sequence[ToolReference]) -> None:
        if self.own is None:
            self.own = {r.tool_name: r for r in self.catalogue or ()}
            self.catalogue = None
        for reference in references:
            self.own.pop(reference.tool_name, None)  # re-indexed: moves to the end
            self.own[reference.tool_name] = reference
        self.snapshot = None
        self.version += 1

    def frozen(self) -> ToolCatalogue:
        """The session's tools as a catalogue (its own dict given up for it)."""
        if self.catalogue is None:
            self.catalogue = ToolCatalogue((self.own or {}).values())
            self.own = None
        return self.catalogue


def _catalogue_key(references: Sequence[ToolReference]) -> str:
    digest = hashlib.sha256()
    for reference in references:
        digest.update(repr((reference.tool_name, reference.summary, reference.category)).encode())
        digest.update(repr(reference.parameters).encode())
        digest.update(b"\x00")
    return digest.hexdigest()


class SessionToolIndex(ABC, Generic[SnapshotT]):
    """Base of the built-in indexes: sessions, snapshots, limits, category filter, timing.

    Subclasses implement ``_build`` (references -> snapshot) and ``_rank`` (snapshot, query,
    limit, allowed positions -> ``(position, score)`` best first). With ``co_usage`` (a
    :class:`ToolCoUsage`, replaceable at any time through the property; a request's
    ``co_usage`` replaces it for that search), the tools past turns called with a top-ranked
    tool are lifted behind it (:meth:`ToolCoUsage.lift`), among the session's own tools only.
    """

    # True in a subclass whose search of built structures is CPU work of a fraction of a
    # millisecond with nothing to wait for (see searches_inline).
    _ranks_inline = False

    def __init__(
        self,
        *,
        default_max_results: int = DEFAULT_MAX_RESULTS,
        co_usage: ToolCoUsage | None = None,
    ) -> None:
        check_count("default_max_results", default_max_results)
        self._default_max_results = default_max_results
        self.co_usage = co_usage
        self._sessions: dict[str, _Session] = {}
        self._lock = ProcessLock()
        self._shared: weakref.WeakValueDictionary[str, _Shared[SnapshotT]] = (
            weakref.WeakValueDictionary()
        )
        self._build_locks: dict[str, ProcessLock] = {}

    @property
    def default_max_results(self) -> int:
        """How many tools a search returns when its request does not say."""
        return self._default_max_results

    @property
    def co_usage(self) -> ToolCoUsage | None:
        """The usage whose companions searches lift; None: none."""
        return self._co_usage

    @co_usage.setter
    def co_usage(self, co_usage: ToolCoUsage | None) -> None:
        if co_usage is not None and not isinstance(co_usage, ToolCoUsage):
            raise TypeError(
                f"co_usage must be a ToolCoUsage or None, got {type(co_usage).__name__}"
            )
        self._co_usage = co_usage

    # -- ToolIndex ---------------------------------------------------------------------------

    def index_tool(self, session_id: str, reference: ToolReference) -> None:
        self.index_tools(session_id, [reference])

    def index_tools(self, session_id: str, references: Sequence[ToolReference]) -> None:
        references = _checked(session_id, references)
        if not references:
            return
        with self._lock:
            session = self._sessions.setdefault(session_id, _Session())
            session.add(references)

    def replace_tools(self, session_id: str, references: Sequence[ToolReference]) -> None:
        """Make ``references`` the session's tools in one step: a concurrent search finds the
        old tools or the new ones, never none, as it can between ``clear_index`` and
        ``index_tools``. No references: the session is cleared."""
        if isinstance(references, ToolCatalogue):  # shared as it is: no copy, no hashing
            _check_session_id(session_id)
            catalogue = references
        else:
            catalogue = ToolCatalogue(_checked(session_id, references))
        with self._lock:
            if not catalogue:
                self._sessions.pop(session_id, None)
                return
            self._sessions[session_id] = _Session(catalogue)

    def clear_index(self, session_id: str) -> None:
        _check_session_id(session_id)
        with self._lock:
            self._sessions.pop(session_id, None)

    def search(self, request: ToolSearchRequest) -> ToolSearchResponse:
        started = time.perf_counter()
        snapshot_and_tools = self._snapshot(request.session_id)
        found: tuple[ToolReference, ...] = ()
        if snapshot_and_tools is not None:
            snapshot, catalogue = snapshot_and_tools
            references = catalogue.references
            limit = request.max_results or self._default_max_results
            allowed = _category_positions(references, request.category_filter)
            ranked = self._rank(snapshot, request.query, limit, allowed)
            # The request's, else the index's (read once: it may be replaced meanwhile).
            co_usage = self._co_usage if request.co_usage is None else request.co_usage
            if co_usage is not None:
                ranked = co_usage.lift(
                    ranked, references, lambda: catalogue.positions, allowed, limit
                )
            found = tuple(references[position].scored(score) for position, score in ranked)
        return ToolSearchResponse(
            found, type(self).__name__, (time.perf_counter() - started) * 1000.0
        )

    def searches_inline(self, session_id: str) -> bool:
        """Whether a search of the session now has nothing to wait for
        (:class:`InlineSearchToolIndex`): the index ranks without embedding the query
        (``_ranks_inline``) and the session's structures are built, or it has no tools. A
        session replaced between this answer and the search is built by that search, on
        the event loop's thread: once."""
        if not self._ranks_inline:
            return False
        with self._lock:
            session = self._sessions.get(session_id)
            return session is None or not len(session) or session.snapshot is not None

    def build(self, session_id: str) -> None:
        """Build the session's search structures now (embedding included) instead of on the
        first search, e.g. at start-up."""
        _check_session_id(session_id)
        built = self._snapshot(session_id)
        if built is not None:
            self._complete(built[0])

    # -- introspection -----------------------------------------------------------------------

    def size(self, session_id: str) -> int:
        with self._lock:
            session = self._sessions.get(session_id)
            return len(session) if session is not None else 0

    def session_ids(self) -> list[str]:
        with self._lock:
            return list(self._sessions)

    # -- for subclasses ----------------------------------------------------------------------

    @abstractmethod
    def _build(self, references: Sequence[ToolReference]) -> SnapshotT: ...

    def _complete(self, snapshot: SnapshotT) -> None:
        """Wait for what a snapshot finishes in the background (default: nothing does)."""

    @abstractmethod
    def _rank(
        self, snapshot: SnapshotT, query: str, limit: int, allowed: set[int] | None
    ) -> list[tuple[int, float]]:
        """Positions into the references (restricted to ``allowed`` when given) with their
        scores, best first, at most ``limit``."""

    def _snapshot(self, session_id: str) -> tuple[SnapshotT, ToolCatalogue] | None:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or not len(session):
                return None
            catalogue = session.frozen()
            if session.snapshot is not None:
                return session.snapshot.snapshot, catalogue
            version = session.version
        shared = self._shared_snapshot(catalogue)
        with self._lock:
            if self._sessions.get(session_id) is session and session.version == version:
                session.snapshot = shared  # the session keeps the shared snapshot alive
        return shared.snapshot, catalogue

    def _shared_snapshot(self, catalogue: ToolCatalogue) -> _Shared[SnapshotT]:
        key = catalogue.key
        with self._lock:
            build_lock = self._build_locks.setdefault(key, ProcessLock())
        try:
            with build_lock:  # concurrent sessions on a new catalogue build it once
                shared = self._shared.get(key)
                if shared is None:
                    shared = _Shared(self._build(catalogue.references))
                    self._shared[key] = shared
                return shared
        finally:
            with self._lock:
                self._build_locks.pop(key, None)


class _Shared(Generic[SnapshotT]):
    """Holder so snapshots of any type can live in a ``WeakValueDictionary``."""

    __slots__ = ("__weakref__", "snapshot")

    def __init__(self, snapshot: SnapshotT) -> None:
        self.snapshot = snapshot


def _checked(session_id: str, references: Sequence[ToolReference]) -> list[ToolReference]:
    _check_session_id(session_id)
    references = list(references)
    for reference in references:
        if not isinstance(reference, ToolReference):
            raise TypeError(f"expected ToolReference, got {type(reference).__name__}")
    return references


def _check_session_id(session_id: str) -> None:
    if not isinstance(session_id, str) or not session_id.strip():
        raise ValueError(f"session_id must be a non-blank string, got {session_id!r}")


def _category_positions(
    references: tuple[ToolReference, ...], category: str | None
) -> set[int] | None:
    """Positions of the tools in ``category`` (case-insensitive); None: no filter. A category
    no tool has is an error that names the categories there are (a model that guessed one
    reads it and searches again)."""
    if category is None or not category.strip():
        return None
    wanted = category.strip().casefold()
    categories = [
        reference.category.strip() if reference.category is not None else ""
        for reference in references
    ]  # spaces around a tool's category do not count either; blank is none
    allowed = {
        position
        for position, named in enumerate(categories)
        if named and named.casefold() == wanted
    }
    if not allowed:
        known = sorted({named for named in categories if named})
        if not known:
            raise ValueError(
                f"no tool has a category, so there is none named {category!r}; "
                "search without category_filter"
            )
        raise ValueError(f"no tool has the category {category!r}; the categories are {known}")
    return allowed


def top_positions(
    scores: npt.NDArray[np.floating[Any]], limit: int, allowed: set[int] | None = None
) -> list[tuple[int, float]]:
    """The ``limit`` best positions (among ``allowed`` when given), best first; ties in
    position order, also at the cut."""
    if limit <= 0:
        return []
    if allowed is None and limit == 1 and scores.size:
        best = int(np.argmax(scores))  # the first of the best: ties in position order
        return [(best, float(scores[best]))]
    if allowed is None:
        # Neither a list of every position nor a copy of every score: a top 100 of 20,000
        # took 0.085 -> 0.066 ms (p50), and a hybrid search selects three to eight times.
        if limit < scores.size:
            cut = np.partition(scores, scores.size - limit)[scores.size - limit]
            candidates = np.flatnonzero(scores >= cut)
        else:
            candidates = np.arange(scores.size)
    else:
        candidates = np.fromiter(sorted(allowed), dtype=np.int64, count=len(allowed))
        if limit < candidates.size:
            values = scores[candidates]
            cut = np.partition(values, values.size - limit)[values.size - limit]
            candidates = candidates[values >= cut]
    if candidates.size == 0:
        return []
    order = candidates[np.lexsort((candidates, -scores[candidates]))][:limit]
    return list(zip(order.tolist(), scores[order].tolist(), strict=True))
