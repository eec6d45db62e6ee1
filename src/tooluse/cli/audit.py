"""``tooluse audit``: the service's record of tool calls, as JSON lines."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

from tooluse._postgres import postgres_errors
from tooluse._tables import location_label
from tooluse.calling import PostgresAuditLog, SqliteAuditLog
from tooluse.cli._option_types import add_database_url_argument, positive_seconds
from tooluse.service._service import DEFAULT_DATABASE

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Print the audit log of tool calls (who, conversation, tool, arguments, result or "
        "error, latency, approval), oldest first, one JSON object per line."
    )
    parser.add_argument(
        "--db",
        default=os.environ.get("TOOLUSE_DB", DEFAULT_DATABASE),
        help=f"the service's SQLite file (default: $TOOLUSE_DB or {DEFAULT_DATABASE})",
    )
    add_database_url_argument(parser, "the service's PostgreSQL database instead of --db")
    parser.add_argument("--tool", help="only the calls of this tool")
    parser.add_argument("--user", help="only the calls made for this user")
    parser.add_argument("--tenant", help="only the calls made for this tenant")
    parser.add_argument("--conversation", help="only the calls of this conversation")
    parser.add_argument(
        "--since", type=positive_seconds, metavar="SECONDS", help="only the last SECONDS"
    )
    parser.add_argument("--limit", type=int, default=1000, help="at most this many (the newest)")


def run(args: argparse.Namespace) -> int:
    if args.database_url is None and not Path(args.db).is_file():
        print(
            f"tooluse audit: {args.db} does not exist (--db names the service's file)",
            file=sys.stderr,
        )
        return 2
    if args.limit <= 0:
        print(f"tooluse audit: --limit must be positive, got {args.limit}", file=sys.stderr)
        return 2
    since = None
    if args.since is not None:
        since = datetime.datetime.now(datetime.UTC).timestamp() - args.since
    try:
        with _open_log(args) as log:
            records = log.query(
                tool=args.tool,
                user=args.user,
                tenant=args.tenant,
                conversation=args.conversation,
                since=since,
                limit=args.limit,
            )
    except postgres_errors() as exc:
        label = location_label(args.database_url)
        print(f"tooluse audit: --database-url {label}: {exc}", file=sys.stderr)
        return 2
    for record in records:
        line = record.to_dict()
        line["at"] = datetime.datetime.fromtimestamp(record.at, datetime.UTC).isoformat()
        print(json.dumps(line, ensure_ascii=False))
    return 0


def _open_log(args: argparse.Namespace) -> SqliteAuditLog | PostgresAuditLog:
    if args.database_url is None:
        return SqliteAuditLog(args.db)
    return PostgresAuditLog(args.database_url)
