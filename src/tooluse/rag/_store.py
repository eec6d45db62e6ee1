"""The ``VectorStore`` protocol and ``InMemoryVectorStore``."""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

import numpy as np

from tooluse._fork import ProcessLock
from tooluse.embedding import EmbeddingModel, Vectors
from tooluse.rag._document import Document
from tooluse.rag._filter import Filter, compile_deletion_filter, compile_filter
from tooluse.rag._index import VectorIndex, validate_search

__all__ = [
    "InMemoryVectorStore",
    "IndexedVectorStore",
    "ThreadedVectorStore",
    "VectorStore",
    "check_collection_model",
    "check_ids",
    "embed_documents",
    "model_id_of",
    "resolve_embedding_model",
]


@runtime_checkable
class VectorStore(Protocol):
    """Documents searchable by meaning.

    ``add`` embeds and stores documents (an existing id is replaced); ``delete`` removes
    documents by id and/or by metadata filter and returns how many went;
    ``similarity_search`` returns at most ``top_k`` documents whose cosine similarity to the
    query is at least ``threshold``, best first, with ``score`` set; ``find`` lists the
    documents a filter matches. Each has an async form that does not block the event loop.
    """

    def add(self, documents: Sequence[Document]) -> None: ...

    def delete(self, ids: Iterable[str] = (), *, filter: Filter | None = None) -> int: ...

    def similarity_search(
        self, query: str, top_k: int = 4, threshold: float = 0.0, filter: Filter | None = None
    ) -> list[Document]: ...

    def find(self, filter: Filter | None = None) -> list[Document]: ...

    async def aadd(self, documents: Sequence[Document]) -> None: ...

    async def adelete(self, ids: Iterable[str] = (), *, filter: Filter | None = None) -> int: ...

    async def asimilarity_search(
        self, query: str, top_k: int = 4, threshold: float = 0.0, filter: Filter | None = None
    ) -> list[Document]: ...

    async def afind(self, filter: Filter | None = None) -> list[Document]: ...


def resolve_embedding_model(model: EmbeddingModel | None) -> EmbeddingModel:
    if model is not None:
        return model
    from tooluse.embedding import default_embedding_model  # loads the bundled model lazily

    return default_embedding_model()


def embed_documents(model: EmbeddingModel, documents: Sequence[Document]) -> Vectors:
    """Embed ``documents`` (checked first, so a bad batch fails before any work is done)."""
    if isinstance(documents, Document) or not isinstance(documents, Sequence):
        raise TypeError(f"add takes a sequence of Documents, got {documents!r}")
    for index, document in enumerate(documents):
        if not isinstance(document, Document):
            raise TypeError(f"documents[{index}] is not a Document: {document!r}")
        if not document.text.strip():
            raise ValueError(f"Document {document.id!r} has no text to embed")
    ids = [d.id for d in documents]
    if len(set(ids)) != len(ids):
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"duplicate document ids in one batch: {duplicates}")
    vectors = model.embed_documents([d.text for d in documents])
    return np.asarray(vectors, dtype=np.float32).reshape(len(documents), model.dimensions)


class ThreadedVectorStore(abc.ABC):
    """A store whose methods block: the async forms run them in a worker thread."""

    @abc.abstractmethod
    def add(self, documents: Sequence[Document]) -> None: ...

    @abc.abstractmethod
    def delete(self, ids: Iterable[str] = (), *, filter: Filter | None = None) -> int: ...

    @abc.abstractmethod
    def similarity_search(
        self, query: str, top_k: int = 4, threshold: float = 0.0, filter: Filter | None = None
    ) -> list[Document]: ...

    @abc.abstractmethod
    def find(self, filter: Filter | None = None) -> list[Document]: ...

    async def aadd(self, documents: Sequence[Document]) -> None:
        await asyncio.to_thread(self.add, documents)

    async def adelete(self, ids: Iterable[str] = (), *, filter: Filter | None = None) -> int:
        return await asyncio.to_thread(self.delete, ids, filter=filter)

    async def asimilarity_search(
        self, query: str, top_k: int = 4, threshold: float = 0.0, filter: Filter | None = None
    ) -> list[Document]:
        return await asyncio.to_thread(self.similarity_search, query, top_k, threshold, filter)

    async def afind(self, filter: Filter | None = None) -> list[Document]:
        return await asyncio.to_thread(self.find, filter)


class IndexedVectorStore(ThreadedVectorStore):
    """What the stores searched in memory share: ``_index`` holds the documents and vectors
    (guarded by ``_lock``) and ``_refresh`` brings it up to date before a read. Subclasses set
    ``_model``, ``_index`` and ``_lock`` and implement ``add`` and ``delete``."""

    _model: EmbeddingModel
    _index: VectorIndex
    _lock: AbstractContextManager[None]

    @property
    def embedding_model(self) -> EmbeddingModel:
        return self._model

    def similarity_search(
        self, query: str, top_k: int = 4, threshold: float = 0.0, filter: Filter | None = None
    ) -> list[Document]:
        validate_search(query, top_k, threshold)
        predicate = compile_filter(filter)
        vector = self._model.embed_query(query)
        with self._lock:
            self._refresh()
            return self._index.search(vector, top_k, threshold, predicate)

    def find(self, filter: Filter | None = None) -> list[Document]:
        predicate = compile_filter(filter)
        with self._lock:
            self._refresh()
            return self._index.matching(predicate)

    @abc.abstractmethod
    def _refresh(self) -> None:
        """Bring ``_index`` up to date before a read (callers hold the lock)."""


class InMemoryVectorStore(IndexedVectorStore):
    """A vector store held in this process (numpy); gone when the process ends.

    ``embedding_model`` defaults to the bundled offline multilingual model.
    """

    def __init__(self, embedding_model: EmbeddingModel | None = None) -> None:
        self._model = resolve_embedding_model(embedding_model)
        self._index = VectorIndex(self._model.dimensions)
        self._lock = ProcessLock()

    def __len__(self) -> int:
        return len(self._index)

    def add(self, documents: Sequence[Document]) -> None:
        vectors = embed_documents(self._model, documents)
        with self._lock:
            self._index.upsert(documents, vectors)

    def delete(self, ids: Iterable[str] = (), *, filter: Filter | None = None) -> int:
        ids = check_ids(ids)
        predicate = compile_deletion_filter(filter)
        with self._lock:
            doomed = set(ids)
            if predicate is not None:
                doomed.update(d.id for d in self._index.matching(predicate))
            return self._index.remove(doomed)

    def _refresh(self) -> None:
        """Nothing to do: only this store changes its index."""


def check_ids(ids: Iterable[str]) -> list[str]:
    if isinstance(ids, str):
        raise TypeError(f"delete takes an iterable of ids, not one string: {ids!r}")
    listed = list(ids)
    for item in listed:
        if not isinstance(item, str):
            raise TypeError(f"document ids are strings, got {item!r}")
    return listed


def check_collection_model(
    model: EmbeddingModel,
    *,
    collection: str,
    location: str,
    dimensions: int,
    stored_model: str | None,
) -> None:
    """Refuse to open ``collection`` (embedded with ``stored_model`` into ``dimensions``)
    with ``model``, whose scores against its vectors would mean nothing."""
    model_id = model_id_of(model)
    if dimensions != model.dimensions or (
        stored_model is not None and model_id is not None and stored_model != model_id
    ):
        raise ValueError(
            f"collection {collection!r} in {location} was embedded with "
            f"{stored_model or 'an unnamed model'} ({dimensions} dimensions), but this "
            f"store uses {model_id or type(model).__name__} "
            f"({model.dimensions} dimensions); use the same model or re-ingest "
            "into a new collection"
        )


def model_id_of(model: EmbeddingModel) -> str | None:
    """The model's ``model_id``, if it names itself."""
    model_id = getattr(model, "model_id", None)
    return model_id if isinstance(model_id, str) else None
