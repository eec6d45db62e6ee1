"""``SqliteVectorStore``: documents and vectors persisted in a SQLite file (the default)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from tooluse._fork import current_process
from tooluse._sqlite import SqliteStore, Synchronous, write_transaction
from tooluse.embedding import EmbeddingModel
from tooluse.rag._document import Document
from tooluse.rag._filter import Filter, compile_deletion_filter
from tooluse.rag._index import VectorIndex
from tooluse.rag._store import (
    IndexedVectorStore,
    check_collection_model,
    check_ids,
    embed_documents,
    model_id_of,
    resolve_embedding_model,
)

__all__ = ["SqliteVectorStore"]

SCHEMA_VERSION = 1
_SCHEMA = (
    """CREATE TABLE vector_store_document (
        collection TEXT NOT NULL,
        id TEXT NOT NULL,
        text TEXT NOT NULL,
        metadata TEXT NOT NULL,
        embedding BLOB NOT NULL,
        PRIMARY KEY (collection, id)
    ) WITHOUT ROWID""",
    """CREATE TABLE vector_store_collection (
        collection TEXT PRIMARY KEY,
        dimensions INTEGER NOT NULL,
        model_id TEXT
    )""",
)


class SqliteVectorStore(SqliteStore, IndexedVectorStore):
    """Documents, metadata and vectors in a SQLite file; searched in memory with numpy.

    Several named ``collection``s can share one file (and the file can hold chat memory
    too). The vectors are loaded once and kept in step with the file: writes by this store
    update the in-memory index directly, and writes by other connections or processes are
    noticed (SQLite's ``data_version``) and reloaded before the next read. The collection
    records the embedding dimensions and model id; opening it with a different model is an
    error rather than silently meaningless scores.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        embedding_model: EmbeddingModel | None = None,
        *,
        collection: str = "default",
        busy_timeout: float = 30.0,
        synchronous: Synchronous = "NORMAL",
    ) -> None:
        if not isinstance(collection, str) or not collection.strip():
            raise ValueError(f"collection must be a non-blank string, got {collection!r}")
        self._model = resolve_embedding_model(embedding_model)
        self._collection = collection
        self._index = VectorIndex(self._model.dimensions)
        # (process, data_version) of the last load: each process has its own connection, and
        # data_version numbers of two connections cannot be compared.
        self._data_version: tuple[int, int] | None = None
        super().__init__(
            path,
            component="vector_store",
            version=SCHEMA_VERSION,
            statements=_SCHEMA,
            busy_timeout=busy_timeout,
            synchronous=synchronous,
        )
        with self._lock:
            try:
                self._register_collection()
            except BaseException:
                self._connection.close()
                raise

    @property
    def collection(self) -> str:
        return self._collection

    def __len__(self) -> int:
        with self._lock:
            self._refresh()
            return len(self._index)

    def add(self, documents: Sequence[Document]) -> None:
        vectors = embed_documents(self._model, documents)
        rows = [
            (self._collection, d.id, d.text, _metadata_json(d), v.astype("<f4").tobytes())
            for d, v in zip(documents, vectors, strict=True)
        ]
        # Indexed as stored (a tuple comes back from the file as a list): what this store
        # finds must not change when it reloads the file.
        stored = [Document(id=row[1], text=row[2], metadata=json.loads(row[3])) for row in rows]
        with self._lock:
            with self._writing():
                self._connection.executemany(
                    "INSERT OR REPLACE INTO vector_store_document "
                    "(collection, id, text, metadata, embedding) VALUES (?, ?, ?, ?, ?)",
                    rows,
                )
            self._index.upsert(stored, vectors)

    def delete(self, ids: Iterable[str] = (), *, filter: Filter | None = None) -> int:
        doomed = set(check_ids(ids))
        predicate = compile_deletion_filter(filter)
        with self._lock:
            with self._writing():
                if predicate is not None:
                    doomed.update(d.id for d in self._index.matching(predicate))
                self._connection.executemany(
                    "DELETE FROM vector_store_document WHERE collection = ? AND id = ?",
                    [(self._collection, i) for i in doomed],
                )
            return self._index.remove(doomed)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A write transaction on an up-to-date index (callers hold the lock). The index is
        changed after the commit; if the transaction fails it is reloaded on next use."""
        try:
            with write_transaction(self._connection):
                self._refresh()
                yield
        except BaseException:
            self._data_version = None
            raise

    def _register_collection(self) -> None:
        model_id = model_id_of(self._model)
        with write_transaction(self._connection):
            row = self._connection.execute(
                "SELECT dimensions, model_id FROM vector_store_collection WHERE collection = ?",
                (self._collection,),
            ).fetchone()
            if row is None:
                self._connection.execute(
                    "INSERT INTO vector_store_collection (collection, dimensions, model_id) "
                    "VALUES (?, ?, ?)",
                    (self._collection, self._model.dimensions, model_id),
                )
                return
        dimensions, stored_model = row
        check_collection_model(
            self._model,
            collection=self._collection,
            location=self._path,
            dimensions=dimensions,
            stored_model=stored_model,
        )

    def _refresh(self) -> None:
        """Reload the index if another connection changed the file since the last look."""
        number = self._connection.execute("PRAGMA data_version").fetchone()[0]
        version = (current_process(), number)
        if version == self._data_version:
            return
        rows = self._connection.execute(
            "SELECT id, text, metadata, embedding FROM vector_store_document WHERE collection = ?",
            (self._collection,),
        ).fetchall()
        index = VectorIndex(self._model.dimensions)
        if rows:
            # One JSON parse for all metadata: much faster than one per row.
            metadata = json.loads("[" + ",".join(row[2] for row in rows) + "]")
            documents = [
                Document(id=row[0], text=row[1], metadata=meta)
                for row, meta in zip(rows, metadata, strict=True)
            ]
            vectors = np.frombuffer(b"".join(row[3] for row in rows), dtype="<f4")
            index.upsert(documents, vectors.reshape(len(rows), self._model.dimensions))
        self._index = index
        self._data_version = version


def _metadata_json(document: Document) -> str:
    try:
        return json.dumps(document.metadata, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"Document {document.id!r}: metadata must be JSON-serialisable to be stored "
            f"in SQLite ({exc})"
        ) from exc
