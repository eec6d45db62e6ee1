"""Content-hash caches of embeddings, so an unchanged catalogue is never embedded twice.

A key is the SHA-256 of (model id, query or document, text): the same text embedded by
another model, or with the other prefix, is another entry.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from tooluse._fork import ProcessLock
from tooluse._postgres import PostgresDatabase
from tooluse._tables import OwnsTables, PostgresTables, Schema, SqliteTables, Tables
from tooluse.embedding._protocol import (
    EmbeddingModel,
    QueryBatchEmbeddingModel,
    QuerySpanEmbeddingModel,
    Vectors,
)

__all__ = [
    "CachedEmbeddingModel",
    "EmbeddingCache",
    "InMemoryEmbeddingCache",
    "PostgresEmbeddingCache",
    "SqliteEmbeddingCache",
    "TieredEmbeddingCache",
    "default_cache_path",
    "embedding_key",
]

Kind = Literal["query", "document", "query-span"]


def embedding_key(model_id: str, kind: Kind, text: str) -> str:
    """The cache key of one text: hex SHA-256 over model id, kind and text.

    The parts are joined with NUL bytes, so a model id must hold none: ``("m\\0query",
    "document", "x")`` would otherwise hash as ``("m", "query", "document\\0x")``."""
    if "\x00" in model_id:
        raise ValueError(f"model_id must not contain a NUL character, got {model_id!r}")
    if kind not in ("query", "document", "query-span"):
        raise ValueError(f"kind must be 'query', 'document' or 'query-span', got {kind!r}")
    digest = hashlib.sha256()
    for part in (model_id, kind, text):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()


def default_cache_path() -> Path:
    """``$TOOLUSE_CACHE_DIR/embeddings.sqlite3``, else under ``$XDG_CACHE_HOME/tooluse``, else
    ``~/.cache/tooluse``."""
    directory = os.environ.get("TOOLUSE_CACHE_DIR")
    if not directory:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
        directory = os.path.join(base, "tooluse")
    return Path(directory) / "embeddings.sqlite3"


@runtime_checkable
class EmbeddingCache(Protocol):
    """Vectors by key. ``get_many`` returns only the keys it has."""

    def get_many(self, keys: Sequence[str]) -> dict[str, Vectors]: ...

    def put_many(self, items: Mapping[str, Vectors]) -> None: ...


class InMemoryEmbeddingCache:
    """A thread-safe LRU dictionary of vectors (``max_entries`` bounds memory)."""

    def __init__(self, max_entries: int = 100_000) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self._max_entries = max_entries
        self._entries: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = ProcessLock()

    def __len__(self) -> int:
        return len(self._entries)

    def get_many(self, keys: Sequence[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        with self._lock:
            for key in keys:
                vector = self._entries.get(key)
                if vector is not None:
                    self._entries.move_to_end(key)
                    found[key] = vector
        return found

    def put_many(self, items: Mapping[str, Vectors]) -> None:
        # A copy of its own: a row of a caller's batch would keep the whole batch in memory
        # (max_entries would bound nothing), and a caller changing its array in place would
        # change the cached vector. Read-only, like the vectors SQLite returns.
        owned = {key: np.array(vector, dtype=np.float32) for key, vector in items.items()}
        for vector in owned.values():
            vector.flags.writeable = False
        with self._lock:
            for key, vector in owned.items():
                self._entries[key] = vector
                self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)


class _TableEmbeddingCache:
    """Vectors in a table of ``_tables`` (a SQLite file or a PostgreSQL database)."""

    _SELECT_CHUNK = 500  # stays under SQLite's limit on bound parameters
    _tables: Tables
    _table: str

    def __len__(self) -> int:
        with self._tables.read() as connection:
            return int(connection.execute(f"SELECT count(*) FROM {self._table}").fetchone()[0])

    def get_many(self, keys: Sequence[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        with self._tables.read() as connection:
            for start in range(0, len(keys), self._SELECT_CHUNK):
                chunk = list(keys[start : start + self._SELECT_CHUNK])
                marks = ",".join("?" * len(chunk))
                rows = connection.execute(
                    f"SELECT key, vector FROM {self._table} WHERE key IN ({marks})", chunk
                ).fetchall()
                for key, blob in rows:
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, items: Mapping[str, Vectors]) -> None:
        rows = [
            (key, np.ascontiguousarray(vector, dtype=np.float32).tobytes())
            for key, vector in items.items()
        ]
        with self._tables.write() as connection:
            connection.executemany(
                f"INSERT INTO {self._table} (key, vector) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET vector = excluded.vector",
                rows,
            )


_SQLITE_TABLE = "embeddings"
_POSTGRES_TABLE = "embedding_cache"  # a database shared with other programs: a telling name
_SCHEMA = Schema(
    component="embedding_cache",
    sqlite=(
        f"CREATE TABLE IF NOT EXISTS {_SQLITE_TABLE} "
        "(key TEXT PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID",
    ),
    sqlite_version=1,
    postgres=((f"CREATE TABLE {_POSTGRES_TABLE} (key TEXT PRIMARY KEY, vector BYTEA NOT NULL)",),),
)


class SqliteEmbeddingCache(SqliteTables, _TableEmbeddingCache):
    """Vectors in a SQLite file (WAL; safe for several threads and processes, also forked
    ones).

    Losing the last writes on power failure only costs a re-embedding, so commits do not wait
    for the disk (``synchronous=NORMAL``).
    """

    _table = _SQLITE_TABLE

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if os.fspath(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        super().__init__(path, _SCHEMA, busy_timeout=30.0)
        self._tables = self


class PostgresEmbeddingCache(OwnsTables, _TableEmbeddingCache):
    """Vectors in a PostgreSQL database, shared by every worker and host: a text one of them
    embedded is not embedded again by another. ``database`` is a URL (``postgresql://...``;
    the cache opens its own connection pool, closed with it) or a
    :class:`~tooluse.memory.PostgresDatabase` shared with other stores. Needs
    ``pip install 'tooluse[postgres]'``."""

    _table = _POSTGRES_TABLE

    def __init__(self, database: str | PostgresDatabase) -> None:
        self._tables = PostgresTables(database, _SCHEMA)


class TieredEmbeddingCache:
    """Looks up caches in order (e.g. memory, then disk); a hit in a later tier is copied into
    the earlier ones, and writes go to every tier."""

    def __init__(self, *tiers: EmbeddingCache) -> None:
        if not tiers:
            raise ValueError("TieredEmbeddingCache needs at least one cache")
        self._tiers = tiers

    def get_many(self, keys: Sequence[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        missing = list(keys)
        for position, tier in enumerate(self._tiers):
            if not missing:
                break
            hits = tier.get_many(missing)
            if hits:
                for earlier in self._tiers[:position]:
                    earlier.put_many(hits)
                found.update(hits)
                missing = [key for key in missing if key not in hits]
        return found

    def put_many(self, items: Mapping[str, Vectors]) -> None:
        for tier in self._tiers:
            tier.put_many(items)


class CachedEmbeddingModel:
    """An ``EmbeddingModel`` that embeds only the texts its cache has not seen.

    ``model_id`` names the wrapped model's weights in the keys (default: its ``model_id``
    attribute); change it when the model changes, or the cache returns the old model's vectors.
    Queries go to ``query_cache`` (default: an in-memory LRU, so a service does not write every
    new question to disk), documents to ``cache``.
    """

    def __init__(
        self,
        model: EmbeddingModel,
        cache: EmbeddingCache,
        *,
        model_id: str | None = None,
        query_cache: EmbeddingCache | None = None,
    ) -> None:
        resolved_id = model_id if model_id is not None else getattr(model, "model_id", None)
        if not isinstance(resolved_id, str) or not resolved_id.strip():
            raise ValueError(
                f"{type(model).__name__} has no model_id attribute; pass model_id= to name "
                "its weights in the cache keys"
            )
        embedding_key(resolved_id, "query", "")  # refuses a model id that keys cannot hold
        self._model = model
        self._cache = cache
        self._query_cache = (
            query_cache if query_cache is not None else InMemoryEmbeddingCache(10_000)
        )
        self._model_id = resolved_id
        self.embedded_texts = 0
        """How many texts were sent to the wrapped model (cache misses), for tests and stats."""

    @property
    def model(self) -> EmbeddingModel:
        return self._model

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return self._model.dimensions

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise TypeError("embed_documents takes a sequence of texts, not one string")
        keys = [embedding_key(self._model_id, "document", text) for text in texts]
        found = self._usable(self._cache.get_many(keys))
        todo: dict[str, str] = {}  # key -> text, de-duplicated, in first-seen order
        for key, text in zip(keys, texts, strict=True):
            if key not in found:
                todo.setdefault(key, text)
        if todo:
            fresh = self._checked(self._model.embed_documents(list(todo.values())), len(todo))
            new = dict(zip(todo, fresh, strict=True))
            self._cache.put_many(new)
            found.update(new)
            self.embedded_texts += len(todo)
        if not keys:
            return np.empty((0, self.dimensions), dtype=np.float32)
        return np.stack([found[key] for key in keys]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> Vectors:
        key = embedding_key(self._model_id, "query", text)
        hit = self._usable(self._query_cache.get_many([key])).get(key)
        if hit is not None:
            return hit
        vector = self._model.embed_query(text)
        if vector.shape != (self.dimensions,):
            raise ValueError(
                f"{type(self._model).__name__}.embed_query returned shape {vector.shape}, "
                f"expected {(self.dimensions,)}"
            )
        self._query_cache.put_many({key: vector})
        self.embedded_texts += 1
        return vector

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """:meth:`embed_query` of each text, the ones not cached embedded in one call when the
        model has ``embed_queries`` (:class:`QueryBatchEmbeddingModel`), else one by one."""
        if isinstance(texts, str):
            raise TypeError("embed_queries takes a sequence of texts, not one string")
        keys = [embedding_key(self._model_id, "query", text) for text in texts]
        found = self._usable(self._query_cache.get_many(keys))
        todo = {key: text for key, text in zip(keys, texts, strict=True) if key not in found}
        if todo:
            if isinstance(self._model, QueryBatchEmbeddingModel):
                fresh = self._model.embed_queries(list(todo.values()))
                if fresh.shape != (len(todo), self.dimensions):
                    raise ValueError(
                        f"{type(self._model).__name__}.embed_queries returned shape "
                        f"{fresh.shape}, expected {(len(todo), self.dimensions)}"
                    )
                new = dict(zip(todo, fresh, strict=True))
                self._query_cache.put_many(new)
                found.update(new)
                self.embedded_texts += len(todo)
            else:
                for key, text in todo.items():
                    found[key] = self.embed_query(text)
        if not keys:
            return np.empty((0, self.dimensions), dtype=np.float32)
        return np.stack([found[key] for key in keys]).astype(np.float32, copy=False)

    def embed_query_spans(self, text: str, spans: Sequence[tuple[int, int]]) -> Vectors | None:
        """The wrapped model's ``embed_query_spans`` (:class:`QuerySpanEmbeddingModel`; None
        for a model without it, or when it returns None), cached with the queries: the
        query's vector under its :meth:`embed_query` key, each span's under one of its own."""
        if not isinstance(self._model, QuerySpanEmbeddingModel):
            return None
        keys = [embedding_key(self._model_id, "query", text)] + [
            # The span's bounds first: digits and a colon, so the text after the NUL is
            # the query's whatever it holds.
            embedding_key(self._model_id, "query-span", f"{start}:{end}\x00{text}")
            for start, end in spans
        ]
        found = self._usable(self._query_cache.get_many(keys))
        if all(key in found for key in keys):
            return np.stack([found[key] for key in keys]).astype(np.float32, copy=False)
        fresh = self._model.embed_query_spans(text, spans)
        if fresh is None:
            return None
        if fresh.shape != (len(keys), self.dimensions):
            raise ValueError(
                f"{type(self._model).__name__}.embed_query_spans returned shape "
                f"{fresh.shape}, expected {(len(keys), self.dimensions)}"
            )
        self._query_cache.put_many(dict(zip(keys, fresh, strict=True)))
        self.embedded_texts += 1
        return fresh

    def _usable(self, hits: dict[str, Vectors]) -> dict[str, Vectors]:
        """The hits of this model's size; another size (a cache written under the same
        ``model_id`` by a model of other dimensions) is a miss, embedded again."""
        shape = (self.dimensions,)
        return {key: vector for key, vector in hits.items() if vector.shape == shape}

    def _checked(self, vectors: Vectors, count: int) -> Vectors:
        if vectors.shape != (count, self.dimensions):
            raise ValueError(
                f"{type(self._model).__name__}.embed_documents returned shape {vectors.shape}, "
                f"expected {(count, self.dimensions)}"
            )
        return vectors
