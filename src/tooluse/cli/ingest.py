"""``tooluse ingest DIR``: load a directory of text and Markdown files into the knowledge base."""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tooluse._postgres import postgres_errors
from tooluse._tables import location_label
from tooluse.cli._option_types import add_database_url_argument
from tooluse.errors import SchemaVersionError
from tooluse.rag._ingest import DEFAULT_PATTERNS, ingest_directory, source_files
from tooluse.rag._splitter import TextSplitter
from tooluse.rag._sqlite_store import SqliteVectorStore

if TYPE_CHECKING:
    from tooluse.rag import PostgresVectorStore

__all__ = ["DEFAULT_DATABASE", "add_arguments", "run"]

DEFAULT_DATABASE = "tooluse.db"
"""The SQLite file used when neither ``--db`` nor ``$TOOLUSE_DB`` names one."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Split the text and Markdown files under DIR into chunks, embed them with the bundled "
        "offline model and store them in the knowledge base: a SQLite file, or a PostgreSQL "
        "database with --database-url. Unchanged files are skipped, changed files replace "
        "their chunks. A file that is not UTF-8 text (nor UTF-16/32 with a byte order mark) "
        "is left out with a warning naming it. Exit status: 0 all ingested, 1 files left out "
        "or no files found, 2 nothing done (an option, the database)."
    )
    parser.add_argument("directory", metavar="DIR", type=Path, help="directory to ingest")
    parser.add_argument(
        "--db",
        default=os.environ.get("TOOLUSE_DB", DEFAULT_DATABASE),
        help=f"SQLite file (default: $TOOLUSE_DB or {DEFAULT_DATABASE})",
    )
    add_database_url_argument(
        parser, "a PostgreSQL database (with pgvector) instead of --db, as tooluse serve takes it"
    )
    parser.add_argument(
        "--collection", default="default", help='collection (default: "default", the service\'s)'
    )
    parser.add_argument(
        "--pattern",
        dest="patterns",
        action="append",
        help=f"file name pattern, repeatable (default: {' '.join(DEFAULT_PATTERNS)})",
    )
    parser.add_argument("--chunk-size", type=int, default=256, help="estimated tokens")
    parser.add_argument("--chunk-overlap", type=int, default=32, help="estimated tokens")
    parser.add_argument(
        "--prune",
        action="store_true",
        help="remove the chunks of every ingested file not in DIR (one collection per DIR)",
    )
    parser.add_argument("--force", action="store_true", help="re-ingest unchanged files too")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm  # type: ignore[import-untyped]  # the rag extra; only the CLI needs it

    directory: Path = args.directory
    if not directory.is_dir():
        print(f"tooluse ingest: not a directory: {directory}", file=sys.stderr)
        return 2
    try:
        splitter = TextSplitter(args.chunk_size, args.chunk_overlap)
    except ValueError as exc:
        print(f"tooluse ingest: {exc}", file=sys.stderr)
        return 2
    patterns = tuple(args.patterns or DEFAULT_PATTERNS)
    total = len(source_files(directory, patterns))
    if total == 0:
        # Not "0 added": a mistyped directory or pattern would pass for an ingestion.
        print(
            f"tooluse ingest: no files matching {' '.join(patterns)} under {directory}: "
            "nothing ingested",
            file=sys.stderr,
        )
        return 1
    try:
        with contextlib.ExitStack() as opened:
            store = _open_store(args, opened)
            bar = opened.enter_context(
                tqdm(total=total, unit="file", disable=args.quiet, file=sys.stderr)
            )
            report = ingest_directory(
                directory,
                store,
                splitter=splitter,
                patterns=patterns,
                prune=args.prune,
                force=args.force,
                skip_undecodable=True,
                on_file=lambda source: bar.update(1),
            )
    except sqlite3.Error as exc:
        print(f"tooluse ingest: --db {args.db}: {exc}", file=sys.stderr)
        return 2
    except postgres_errors() as exc:  # cannot connect, no pgvector, no permission, ...
        label = location_label(args.database_url)
        print(f"tooluse ingest: --database-url {label}: {exc}", file=sys.stderr)
        return 2
    except SchemaVersionError as exc:  # it names the file
        print(f"tooluse ingest: {exc}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:  # a blank --collection, an unreadable file, ...
        print(f"tooluse ingest: {exc}", file=sys.stderr)
        return 2
    for _, why in report.skipped:
        print(f"tooluse ingest: left out: {why}", file=sys.stderr)
    where = args.db if args.database_url is None else location_label(args.database_url)
    left_out = f", {len(report.skipped)} left out (not text)" if report.skipped else ""
    print(
        f"{len(report.added)} added, {len(report.updated)} updated, "
        f"{len(report.unchanged)} unchanged, {len(report.removed)} removed{left_out}; "
        f"{report.chunks_written} chunks written to {where} (collection {args.collection!r})"
    )
    return 1 if report.skipped else 0


def _open_store(
    args: argparse.Namespace, opened: contextlib.ExitStack
) -> SqliteVectorStore | PostgresVectorStore:
    """The knowledge base the options name, closed by ``opened``. In PostgreSQL it embeds
    as the service on that database does: with the bundled model and the database's
    embedding cache, so that what is ingested here is not embedded again there."""
    if args.database_url is None:
        return opened.enter_context(SqliteVectorStore(args.db, collection=args.collection))
    from tooluse.embedding import PostgresEmbeddingCache
    from tooluse.memory import PostgresDatabase
    from tooluse.rag import PostgresVectorStore
    from tooluse.service._service import shared_embedding_model

    database = opened.enter_context(PostgresDatabase(args.database_url))
    model = shared_embedding_model(opened.enter_context(PostgresEmbeddingCache(database)))
    return opened.enter_context(PostgresVectorStore(database, model, collection=args.collection))
