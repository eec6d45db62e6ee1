"""``PostgresVectorStore``: documents and vectors in PostgreSQL, searched by pgvector."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tooluse._postgres import PostgresDatabase, database_of
from tooluse.embedding import EmbeddingModel
from tooluse.rag._document import Document
from tooluse.rag._filter import (
    AnyOf,
    Condition,
    FieldTest,
    Filter,
    FilterNode,
    Negation,
    check_deletion_filter,
    compile_filter,
    kind,
    parse_filter,
)
from tooluse.rag._index import validate_search
from tooluse.rag._store import (
    ThreadedVectorStore,
    check_collection_model,
    check_ids,
    embed_documents,
    model_id_of,
    resolve_embedding_model,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresVectorStore", "filter_sql"]

MIN_PGVECTOR = (0, 8)  # iterative index scans: a filtered search still finds top_k documents

# The schema's migrations, oldest first (tooluse._postgres). Each collection has its own
# HNSW index (made when the collection is first opened): an expression index over the
# vectors cast to the collection's dimensions, partial on the collection, as pgvector
# advises for one column holding vectors of several dimensions.
_MIGRATIONS = (
    (
        "CREATE EXTENSION IF NOT EXISTS vector",
        """CREATE TABLE vector_store_collection (
            collection TEXT PRIMARY KEY,
            dimensions INTEGER NOT NULL,
            model_id TEXT
        )""",
        # seq: the order documents were first added in (a replaced one keeps its place), the
        # order find() lists them in, as the other stores do.
        """CREATE TABLE vector_store_document (
            collection TEXT NOT NULL,
            id TEXT NOT NULL,
            seq BIGINT GENERATED ALWAYS AS IDENTITY,
            text TEXT NOT NULL,
            metadata JSONB NOT NULL,
            embedding vector NOT NULL,
            PRIMARY KEY (collection, id)
        )""",
        "CREATE INDEX vector_store_document_by_seq ON vector_store_document (collection, seq)",
        "CREATE INDEX vector_store_document_metadata ON vector_store_document "
        "USING gin (metadata jsonb_path_ops)",
    ),
)
SCHEMA_VERSION = len(_MIGRATIONS)

# HNSW build settings: pgvector's defaults (m 16, ef_construction 64).
_HNSW = "WITH (m = 16, ef_construction = 64)"
# Candidates the HNSW scan keeps (pgvector's default 40), at least top_k.
_EF_SEARCH = 40


class PostgresVectorStore(ThreadedVectorStore):
    """Documents, metadata (JSONB) and vectors (pgvector) in PostgreSQL, for several hosts.

    A search runs in the database: cosine distance over an HNSW index of the collection,
    with the metadata filter compiled to SQL (:func:`filter_sql`) and applied during the
    index scan (pgvector's iterative scan, so a selective filter still yields ``top_k``
    documents when there are that many). A filter that is a function of the metadata cannot
    run in SQL: it is checked here on the documents in distance order until ``top_k`` pass.
    ``add`` embeds the documents and upserts them in one transaction (an existing id is
    replaced); several named ``collection``s share the tables, each recording its embedding
    model's dimensions and id, and opening one with another model is an error.

    ``database`` is a URL (``postgresql://...``; the store opens its own pool, closed with
    it) or a :class:`~tooluse.memory.PostgresDatabase` shared with other stores. The tables
    and the ``vector`` extension are created when the store opens (creating the extension
    needs a role allowed to, once per database); pgvector 0.8 or later is required. Needs
    ``pip install 'tooluse[postgres]'``.
    """

    def __init__(
        self,
        database: str | PostgresDatabase,
        embedding_model: EmbeddingModel | None = None,
        *,
        collection: str = "default",
    ) -> None:
        if not isinstance(collection, str) or not collection.strip():
            raise ValueError(f"collection must be a non-blank string, got {collection!r}")
        self._model = resolve_embedding_model(embedding_model)
        self._collection = collection
        self._database, self._owned = database_of(database)
        dimensions = self._model.dimensions
        self._vector_type = f"vector({dimensions})"
        # The collection is a literal in each statement, not a parameter: the planner must
        # see it to use the collection's partial HNSW index.
        self._where = "collection = " + _literal(collection)
        self._distance = f"(embedding::{self._vector_type} <=> %s::{self._vector_type})"
        try:
            self._database.migrate("vector_store", _MIGRATIONS)
            self._check_pgvector()
            self._register_collection()
        except BaseException:
            self.close()
            raise

    @property
    def collection(self) -> str:
        return self._collection

    @property
    def embedding_model(self) -> EmbeddingModel:
        return self._model

    def close(self) -> None:
        """Close the connection pool if the store opened it (from a URL)."""
        if self._owned:
            self._database.close()

    def __enter__(self) -> PostgresVectorStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __len__(self) -> int:
        with self._database.connection() as connection:
            row = connection.execute(
                f"SELECT count(*) FROM vector_store_document WHERE {self._where}"
            ).fetchone()
        return int(row[0]) if row else 0

    def add(self, documents: Sequence[Document]) -> None:
        vectors = embed_documents(self._model, documents)
        rows = [
            (document.id, _storable_text(document), _metadata_json(document), _vector(vector))
            for document, vector in zip(documents, vectors, strict=True)
        ]
        with self._database.transaction() as connection, connection.cursor() as cursor:
            # executemany sends the rows in one pipeline: one round trip, not one per row.
            cursor.executemany(
                "INSERT INTO vector_store_document (collection, id, text, metadata, embedding) "
                f"VALUES ({_literal(self._collection)}, %s, %s, %s::jsonb, %s::vector) "
                "ON CONFLICT (collection, id) DO UPDATE SET text = EXCLUDED.text, "
                "metadata = EXCLUDED.metadata, embedding = EXCLUDED.embedding",
                rows,
            )

    def delete(self, ids: Iterable[str] = (), *, filter: Filter | None = None) -> int:
        doomed = check_ids(ids)
        check_deletion_filter(filter)
        with self._database.transaction() as connection:
            if filter is not None:
                doomed = [*doomed, *(d.id for d in self._find(connection, filter))]
            cursor = connection.execute(
                f"DELETE FROM vector_store_document WHERE {self._where} AND id = ANY(%s)",
                (sorted(set(doomed)),),
            )
        return cursor.rowcount

    def find(self, filter: Filter | None = None) -> list[Document]:
        with self._database.connection() as connection:
            return self._find(connection, filter)

    def similarity_search(
        self, query: str, top_k: int = 4, threshold: float = 0.0, filter: Filter | None = None
    ) -> list[Document]:
        validate_search(query, top_k, threshold)
        compile_filter(filter)  # a bad filter fails before the query is embedded
        predicate = None if filter is None or isinstance(filter, Mapping) else filter
        where, parameters = self._filter(None if predicate is not None else filter)
        if top_k == 0:
            return []
        vector = _vector(self._model.embed_query(query))
        statement = (
            f"SELECT id, text, metadata, 1 - {self._distance} FROM vector_store_document "
            f"WHERE {where} ORDER BY {self._distance}"
        )
        found: list[Document] = []
        with self._database.transaction() as connection:
            connection.execute(
                f"SET LOCAL hnsw.ef_search = {max(_EF_SEARCH, min(top_k, 1000))}; "
                "SET LOCAL hnsw.iterative_scan = strict_order"
            )
            if predicate is None:
                rows = connection.execute(
                    f"{statement} LIMIT %s", (vector, *parameters, vector, top_k)
                ).fetchall()
                found = [_document(row) for row in rows]
            else:  # a function of the metadata: checked here, best first, until top_k pass
                with connection.cursor(name="tooluse_vector_search") as cursor:
                    cursor.itersize = max(top_k * 4, 100)
                    cursor.execute(statement, (vector, *parameters, vector))
                    for row in cursor:
                        if float(row[3]) < threshold or len(found) == top_k:
                            break
                        if predicate(row[2]):
                            found.append(_document(row))
        return [document for document in found if (document.score or 0.0) >= threshold]

    def _find(self, connection: psycopg.Connection[Any], filter: Filter | None) -> list[Document]:
        if filter is not None and not isinstance(filter, Mapping):
            predicate = compile_filter(filter)
            assert predicate is not None
            return [d for d in self._find(connection, None) if predicate(d.metadata)]
        where, parameters = self._filter(filter)
        rows = connection.execute(
            f"SELECT id, text, metadata FROM vector_store_document WHERE {where} ORDER BY seq",
            parameters,
        ).fetchall()
        return [Document(id=row[0], text=row[1], metadata=row[2]) for row in rows]

    def _filter(self, filter: Filter | None) -> tuple[str, list[Any]]:
        """The WHERE clause of the collection and ``filter`` (a mapping), and its
        parameters."""
        if filter is None:
            return self._where, []
        if not isinstance(filter, Mapping):
            raise TypeError(f"A filter is a mapping or a function of the metadata, got {filter!r}")
        condition, parameters = filter_sql(parse_filter(filter))
        return f"{self._where} AND {condition}", parameters

    def _check_pgvector(self) -> None:
        with self._database.connection() as connection:
            row = connection.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
        version = tuple(int(part) for part in str(row[0] if row else "0").split(".")[:2])
        if version < MIN_PGVECTOR:
            raise RuntimeError(
                f"PostgresVectorStore needs pgvector {'.'.join(map(str, MIN_PGVECTOR))} or "
                f"later; the database has {row[0] if row else 'none'} "
                "(ALTER EXTENSION vector UPDATE)"
            )

    def _register_collection(self) -> None:
        dimensions = self._model.dimensions
        index = "vector_store_hnsw_" + hashlib.sha256(self._collection.encode()).hexdigest()[:20]
        with self._database.transaction() as connection:
            connection.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))", (self._collection,)
            )
            row = connection.execute(
                "SELECT dimensions, model_id FROM vector_store_collection WHERE collection = %s",
                (self._collection,),
            ).fetchone()
            if row is None:
                connection.execute(
                    "INSERT INTO vector_store_collection (collection, dimensions, model_id) "
                    "VALUES (%s, %s, %s)",
                    (self._collection, dimensions, model_id_of(self._model)),
                )
                connection.execute(
                    f"CREATE INDEX IF NOT EXISTS {index} ON vector_store_document USING hnsw "
                    f"((embedding::{self._vector_type}) vector_cosine_ops) {_HNSW} "
                    f"WHERE {self._where}"
                )
                return
        check_collection_model(
            self._model,
            collection=self._collection,
            location="the database",
            dimensions=row[0],
            stored_model=row[1],
        )


def filter_sql(node: FilterNode) -> tuple[str, list[Any]]:
    """A parsed filter as a SQL condition on the ``metadata`` JSONB column, with its
    parameters: it matches exactly the documents :func:`~tooluse.rag.compile_filter`'s
    predicate does (values compare only with values of their kind; a missing key matches
    only ``$ne``, ``$nin`` and ``$exists: false``; strings compare by code point)."""
    if isinstance(node, FieldTest):
        parts = [_condition_sql(node.key, condition) for condition in node.conditions]
        return _joined(parts, "AND")
    if isinstance(node, Negation):
        inner, parameters = filter_sql(node.part)
        return f"NOT {inner}", parameters
    if not node.parts:
        return "TRUE", []
    return _joined(
        [filter_sql(part) for part in node.parts], "OR" if isinstance(node, AnyOf) else "AND"
    )


def _joined(parts: list[tuple[str, list[Any]]], operator: str) -> tuple[str, list[Any]]:
    if len(parts) == 1:
        return parts[0]
    return (
        "(" + f" {operator} ".join(sql for sql, _ in parts) + ")",
        [parameter for _, parameters in parts for parameter in parameters],
    )


_ORDERINGS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _condition_sql(key: str, condition: Condition) -> tuple[str, list[Any]]:
    """One condition, never NULL (a missing key compares as NULL in SQL: coalesced to what
    the predicate says of a missing key), so that NOT negates it exactly."""
    operator, operand = condition.operator, condition.operand
    if operator in ("$eq", "$ne"):
        sql = "COALESCE(metadata -> %s = %s::jsonb, FALSE)"
        return (sql if operator == "$eq" else f"NOT {sql}"), [key, _json(operand)]
    if operator in ("$in", "$nin"):
        sql = "COALESCE(metadata -> %s = ANY(%s::jsonb[]), FALSE)"
        return (sql if operator == "$in" else f"NOT {sql}"), [key, [_json(o) for o in operand]]
    if operator == "$exists":
        return ("(metadata ? %s)" if operand else "NOT (metadata ? %s)"), [key]
    compare = _ORDERINGS[operator]
    if kind(operand) == "number":
        sql = (
            "COALESCE(jsonb_typeof(metadata -> %s) = 'number' AND "
            f"metadata -> %s {compare} %s::jsonb, FALSE)"
        )
        return sql, [key, key, _json(operand)]
    # Strings: byte order of UTF-8 ("C" collation) is code point order, as Python compares.
    sql = (
        f"COALESCE(jsonb_typeof(metadata -> %s) = 'string' AND "
        f'(metadata ->> %s) COLLATE "C" {compare} %s, FALSE)'
    )
    return sql, [key, key, operand]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _literal(text: str) -> str:
    """``text`` as a SQL string literal (standard_conforming_strings: only quotes double)."""
    if "\x00" in text:
        raise ValueError(f"collection names cannot hold a NUL character: {text!r}")
    return "'" + text.replace("'", "''") + "'"


def _vector(vector: np.ndarray[Any, Any]) -> str:
    """A vector as pgvector's text form; float32 values round-trip exactly."""
    return "[" + ",".join(map(repr, np.asarray(vector, dtype=np.float32).tolist())) + "]"


def _document(row: tuple[Any, ...]) -> Document:
    return Document(id=row[0], text=row[1], metadata=row[2], score=float(row[3]))


def _storable_text(document: Document) -> str:
    if "\x00" in document.text:
        raise ValueError(
            f"Document {document.id!r}: its text holds a NUL character, which PostgreSQL "
            "cannot store"
        )
    return document.text


def _metadata_json(document: Document) -> str:
    try:
        text = json.dumps(document.metadata, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"Document {document.id!r}: metadata must be JSON-serialisable to be stored "
            f"in PostgreSQL ({exc})"
        ) from exc
    if "\\u0000" in text:
        raise ValueError(
            f"Document {document.id!r}: its metadata holds a NUL character, which "
            "PostgreSQL's jsonb cannot store"
        )
    return text
