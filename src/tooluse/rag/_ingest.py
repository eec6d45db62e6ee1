"""Ingesting a directory of text and Markdown files into a vector store, idempotently."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from tooluse.rag._document import Document
from tooluse.rag._readers import MarkdownReader, TextReader, UndecodableFileError
from tooluse.rag._splitter import TextSplitter
from tooluse.rag._store import VectorStore

__all__ = ["DEFAULT_PATTERNS", "IngestReport", "ingest_directory", "source_files"]

DEFAULT_PATTERNS = ("*.md", "*.markdown", "*.txt")
_MARKDOWN_SUFFIXES = {".md", ".markdown"}


@dataclasses.dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ingestion did, by source (the file's path relative to the directory)."""

    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    chunks_written: int = 0
    skipped: tuple[tuple[str, str], ...] = ()
    """``(source, why)`` of each file left out with ``skip_undecodable``."""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed)


def source_files(directory: Path, patterns: Sequence[str] = DEFAULT_PATTERNS) -> list[Path]:
    """The files under ``directory`` matching any pattern, in a stable order."""
    found = {path for pattern in patterns for path in directory.rglob(pattern) if path.is_file()}
    return sorted(found)


def ingest_directory(
    directory: str | os.PathLike[str],
    store: VectorStore,
    *,
    splitter: TextSplitter | None = None,
    patterns: Sequence[str] = DEFAULT_PATTERNS,
    prune: bool = False,
    force: bool = False,
    skip_undecodable: bool = False,
    on_file: Callable[[str], None] | None = None,
) -> IngestReport:
    """Read, split and store every matching file under ``directory``.

    Idempotent: every chunk records its ``source`` and a ``source_sha256`` of the file's bytes
    and the splitter settings, so a file that did not change is skipped (nothing embedded),
    and a changed file's old chunks are deleted before its new ones are added. ``prune``
    also deletes the chunks of every ingested source not found in ``directory``, so give
    each directory a store (collection) of its own when pruning; ``force`` re-ingests
    everything. A file without text stores nothing and counts as unchanged (once its old
    chunks, if any, are deleted). A file that is not text in the readers' encoding (UTF-8, or
    any with a byte order mark) raises :class:`UndecodableFileError`; with
    ``skip_undecodable`` it is left out instead (its chunks from before, if any, stay) and
    listed in :attr:`IngestReport.skipped` with why, and the other files are ingested.
    ``on_file(source)`` is called after each file (for a progress bar).
    """
    root = Path(directory)
    if not root.is_dir():
        raise NotADirectoryError(f"not a directory: {root}")
    splitter = splitter if splitter is not None else TextSplitter()
    stored = _stored_fingerprints(store)
    added: list[str] = []
    updated: list[str] = []
    unchanged: list[str] = []
    skipped: list[tuple[str, str]] = []
    written = 0
    seen: set[str] = set()
    for path in source_files(root, patterns):
        source = path.relative_to(root).as_posix()
        seen.add(source)
        fingerprint = _fingerprint(path, splitter)
        previous = stored.get(source)
        if previous == fingerprint and not force:
            unchanged.append(source)
        else:
            try:
                chunks = _chunks(path, source, fingerprint, splitter)
            except UndecodableFileError as exc:
                if not skip_undecodable:
                    raise
                skipped.append((source, str(exc)))
            else:
                if not chunks and previous is None:
                    # No text: nothing to store and nothing stored. The store cannot record
                    # the file, so counting it as added would repeat on every run.
                    unchanged.append(source)
                elif previous is not None:
                    store.delete(filter={"source": source})
                    updated.append(source)
                else:
                    added.append(source)
                if chunks:
                    store.add(chunks)
                written += len(chunks)
        if on_file is not None:
            on_file(source)
    removed = sorted(set(stored) - seen) if prune else []
    for source in removed:
        store.delete(filter={"source": source})
    return IngestReport(
        tuple(added), tuple(updated), tuple(unchanged), tuple(removed), written, tuple(skipped)
    )


def _stored_fingerprints(store: VectorStore) -> dict[str, str]:
    fingerprints: dict[str, str] = {}
    for document in store.find({"source_sha256": {"$exists": True}}):
        source, digest = document.metadata.get("source"), document.metadata["source_sha256"]
        if isinstance(source, str) and isinstance(digest, str):
            fingerprints[source] = digest
    return fingerprints


def _fingerprint(path: Path, splitter: TextSplitter) -> str:
    digest = hashlib.sha256(path.read_bytes())
    digest.update(splitter.fingerprint.encode())
    return digest.hexdigest()


def _chunks(path: Path, source: str, fingerprint: str, splitter: TextSplitter) -> list[Document]:
    reader = MarkdownReader if path.suffix.lower() in _MARKDOWN_SUFFIXES else TextReader
    chunks = splitter.split(reader(path, source=source).read())
    return [
        dataclasses.replace(chunk, metadata={**chunk.metadata, "source_sha256": fingerprint})
        for chunk in chunks
    ]
