"""The service's knowledge base: opened (and the sample documents ingested) in a background
thread, so the server binds at once while the embedding model loads."""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.resources
import logging
import threading
import time
from collections.abc import Callable
from typing import Literal

from tooluse._fork import ProcessLock
from tooluse._tables import Location, is_postgres_url, location_label
from tooluse.embedding import EmbeddingModel
from tooluse.memory import PostgresDatabase
from tooluse.rag import (
    Document,
    IngestReport,
    PostgresVectorStore,
    Query,
    SqliteVectorStore,
    VectorStoreRetriever,
    ingest_directory,
)
from tooluse.rag._retrieval import as_query
from tooluse.search._text import last_words
from tooluse.search._vector import query_tail_of

__all__ = [
    "SAMPLE_SOURCE_PREFIX",
    "KnowledgeBase",
    "KnowledgeStore",
    "open_knowledge_store",
    "sync_sample_documents",
]

logger = logging.getLogger("tooluse.service")

SAMPLE_SOURCE_PREFIX = "tooluse-samples/"
"""The ``source`` of every sample document starts with this."""

KnowledgeStatus = Literal["loading", "ready", "failed"]

QUERY_TOKENS = 512
"""A question is embedded up to its last this many tokens: one window of the bundled model
(about 0.2 s on two cores), as tool search embeds its queries."""

KnowledgeStore = SqliteVectorStore | PostgresVectorStore


def open_knowledge_store(
    location: Location, embedding_model: EmbeddingModel | None, *, collection: str = "default"
) -> KnowledgeStore:
    """The knowledge base's vector store at ``location``: PostgreSQL (pgvector) for a
    ``postgresql://`` URL or a :class:`~tooluse.memory.PostgresDatabase`, else a SQLite
    file."""
    if isinstance(location, PostgresDatabase) or is_postgres_url(location):
        assert isinstance(location, str | PostgresDatabase)
        return PostgresVectorStore(location, embedding_model, collection=collection)
    return SqliteVectorStore(location, embedding_model, collection=collection)


def sync_sample_documents(store: KnowledgeStore) -> IngestReport | None:
    """Ingest the sample documents into ``store`` unless it holds documents of its own.

    Idempotent (unchanged files are skipped). When the store has other documents (e.g. from
    ``tooluse ingest``) the sample documents are removed instead and ``None`` is returned.
    """
    if _samples_make_way(store):
        return None
    root = importlib.resources.files("tooluse.service") / "sample_knowledge"
    with importlib.resources.as_file(root) as directory:
        return ingest_directory(directory, store)


def _samples_make_way(store: KnowledgeStore) -> bool:
    """Whether ``store`` holds documents of its own; if so, its sample documents are deleted."""
    documents = store.find()
    samples = [d.id for d in documents if _is_sample(d)]
    if len(samples) == len(documents):
        return False
    if samples:
        store.delete(samples)
        logger.info("removed %d sample chunks: the knowledge base has its own", len(samples))
    return True


def _is_sample(document: Document) -> bool:
    return str(document.metadata.get("source", "")).startswith(SAMPLE_SOURCE_PREFIX)


class KnowledgeBase:
    """A vector store collection (:func:`open_knowledge_store`) behind a retriever, loaded in
    the background.

    :meth:`start` opens the store in a thread (the bundled embedding model takes seconds to
    load), ingests the sample documents when ``samples`` is on (see
    :func:`sync_sample_documents`) and warms the model up. Retrieval waits for that; a load
    failure is raised by every retrieval (and shown by :attr:`status` / :attr:`error`).
    While the collection holds only the samples, each retrieval and
    :meth:`count_documents` look whether documents of its own came since (``tooluse
    ingest`` into the running service's file, another worker): the samples are then removed
    at once, not at the next start.
    """

    def __init__(
        self,
        location: Location,
        *,
        embedding_model: EmbeddingModel | None = None,
        collection: str = "default",
        samples: bool = True,
        top_k: int = 4,
    ) -> None:
        self._location = location
        self._label = location_label(location)
        self._embedding_model = embedding_model
        self._collection = collection
        self._samples = samples
        self._top_k = top_k
        self._ready: concurrent.futures.Future[VectorStoreRetriever] = concurrent.futures.Future()
        self._store: KnowledgeStore | None = None
        self._query_tail: Callable[[str, int], str] = last_words  # the model's, once loaded
        self._thread: threading.Thread | None = None
        self._lock = ProcessLock()
        self._closing = False
        self._documents = 0  # chunks in the collection when last counted
        self._only_samples = False  # the collection holds the sample documents alone
        self._samples_lock = ProcessLock()

    @property
    def status(self) -> KnowledgeStatus:
        if not self._ready.done():
            return "loading"
        return "failed" if self._ready.exception() is not None else "ready"

    @property
    def error(self) -> BaseException | None:
        return self._ready.exception() if self._ready.done() else None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("The knowledge base is already started")
        logger.info("loading the knowledge base (%s) in the background", self._label)
        self._thread = threading.Thread(target=self._load, name="tooluse-knowledge", daemon=True)
        self._thread.start()

    def _load(self) -> None:
        started = time.perf_counter()
        store: KnowledgeStore | None = None
        try:
            store = open_knowledge_store(
                self._location, self._embedding_model, collection=self._collection
            )
            self._store = store
            if self._samples:
                report = sync_sample_documents(store)
                self._only_samples = report is not None
                if report is not None and report.changed:
                    logger.info(
                        "sample knowledge base ingested: %d files, %d chunks",
                        len(report.added) + len(report.updated),
                        report.chunks_written,
                    )
            store.embedding_model.embed_query("warm-up")  # the first question is not slow
            self._documents = len(store)
            retriever = VectorStoreRetriever(store, top_k=self._top_k)
            self._query_tail = query_tail_of(store.embedding_model)  # before _ready is set
        except Exception as exc:
            if self._closing:  # the service stopped under it: its pool closed, say
                logger.info("the knowledge base stopped loading: the service stopped (%s)", exc)
            else:
                logger.exception("the knowledge base failed to load")
            self._settle(store, exc)
            return
        logger.info(
            "knowledge base ready: %d chunks in %s (collection %r), %.1f s",
            self._documents,
            self._label,
            self._collection,
            time.perf_counter() - started,
        )
        self._settle(store, retriever)

    def _settle(
        self, store: KnowledgeStore | None, outcome: VectorStoreRetriever | Exception
    ) -> None:
        with self._lock:
            if isinstance(outcome, Exception):
                self._ready.set_exception(outcome)
            else:
                self._ready.set_result(outcome)
            closing = self._closing
        if closing and store is not None:  # close() came while loading
            store.close()

    def wait(self, timeout: float | None = None) -> None:
        """Block until loaded (re-raises a load failure)."""
        self._ready.result(timeout)

    def count_documents(self) -> int:
        """The chunks the collection holds now (0 while it loads or when it failed to; once
        closed, as last counted)."""
        if self.status == "ready" and not self._closing:
            self._recount()
        return self._documents

    def _recount(self) -> None:
        """Count the chunks; while the collection held only the samples, a count that
        changed may be documents of its own, for which the samples make way."""
        store = self._store
        assert store is not None  # loaded
        count = len(store)
        if self._only_samples and count != self._documents:
            with self._samples_lock:  # one thread deletes them; the others count after it
                if self._only_samples and _samples_make_way(store):
                    self._only_samples = False
                    count = len(store)
        self._documents = count

    def retrieve(self, query: str | Query) -> list[Document]:
        retriever = self._ready.result()
        if self._only_samples:
            self._recount()
        return retriever.retrieve(self._bounded(query))

    async def aretrieve(self, query: str | Query) -> list[Document]:
        retriever = await asyncio.wrap_future(self._ready)
        if self._only_samples:
            await asyncio.to_thread(self._recount)
        return await retriever.aretrieve(self._bounded(query))

    def _bounded(self, query: str | Query) -> Query:
        """The query cut to its last :data:`QUERY_TOKENS` tokens: embedding time grows with
        the length, and the model reads one query at a time, so a pasted megabyte held every
        other question up for half a minute (where the question is, at the end, is kept)."""
        query = as_query(query)
        return query.replace(text=self._query_tail(query.text, QUERY_TOKENS))

    def close(self) -> None:
        """Close the store; a load still under way is not waited for (the server stops at
        once): it closes the store itself when it ends, or the process ends first, which
        SQLite survives (an interrupted ingestion is redone on the next start)."""
        with self._lock:
            self._closing = True
            loaded = self._ready.done()
        if loaded:
            if self._store is not None:
                self._store.close()
        elif self._thread is not None:
            logger.info("the knowledge base was still loading; not waiting for it")
