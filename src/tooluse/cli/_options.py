"""The command-line options ``tooluse serve`` and ``tooluse chat`` share."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from tooluse._postgres import postgres_errors
from tooluse._tables import location_label
from tooluse.cli._option_types import add_database_url_argument, positive_count
from tooluse.cli._targets import TargetError, load_target
from tooluse.errors import SchemaVersionError, ToolSourceError
from tooluse.models import ChatModel
from tooluse.models._llama_engine import DEFAULT_SLOTS
from tooluse.service._service import (
    DEFAULT_DATABASE,
    TOOL_SEARCH_ABOVE,
    QaService,
    ServiceConfig,
    local_tools,
    mcp_provider,
)
from tooluse.tools import ToolCallback, tool_callbacks

if TYPE_CHECKING:
    from tooluse.mcp import ServerParameters

__all__ = [
    "DEFAULT_MODEL",
    "LOCAL_ENGINE_URL",
    "TEST_MODEL",
    "OptionError",
    "add_service_arguments",
    "add_tools_argument",
    "close_model",
    "config_from_arguments",
    "configure_logging",
    "mcp_startup_errors",
    "open_service",
    "start_service",
    "tools_from_arguments",
]

T = TypeVar("T")

_TOOL_SEARCH: dict[str, bool | None] = {"auto": None, "on": True, "off": False}

DEFAULT_MODEL = "local:qwen2.5-coder-1.5b"
"""The model the commands run when neither ``--model`` nor ``$TOOLUSE_MODEL`` names one."""
TEST_MODEL = "test"
"""``--model test``: the offline ``TestModel`` (:class:`~tooluse.service._offline.OfflineModel`)."""


class OptionError(ValueError):
    """A command-line option that cannot be used; the message says why."""


def add_service_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=os.environ.get("TOOLUSE_DB", DEFAULT_DATABASE),
        help=f"SQLite file for memory, knowledge base and approvals "
        f"(default: $TOOLUSE_DB or {DEFAULT_DATABASE})",
    )
    add_database_url_argument(
        parser,
        "a PostgreSQL database (with pgvector) for memory, knowledge base, approvals, turn "
        "displays, audit log, idempotency journal and embedding cache instead of --db, shared "
        "by every worker",
    )
    parser.add_argument(
        "--model",
        default=os.environ.get("TOOLUSE_MODEL"),
        help="model spec: local:qwen2.5-coder-1.5b, local:qwen2.5-coder-0.5b, "
        "local:PATH.gguf, openai:gpt-4o-mini, openai-responses:gpt-5-mini, "
        "anthropic:claude-sonnet-4-5, deepseek:deepseek-chat, qwen:qwen-plus, ollama:qwen2.5, "
        f"openai-compatible:MODEL@URL, or '{TEST_MODEL}' for the offline TestModel (default: "
        f"$TOOLUSE_MODEL, else {DEFAULT_MODEL}, on this machine)",
    )
    parser.add_argument(
        "--model-slots",
        type=positive_count,
        metavar="N",
        help="a local: model's engine serves N requests side by side, each slot keeping "
        "its last prompt cached, so that the router's, the answer's and the question "
        "rewriter's prompts do not evict one another's (default: the spec's ?slots=, else "
        f"{DEFAULT_SLOTS}; each slot holds the model's context, about 28 KB a token for the "
        "1.5B)",
    )
    add_tools_argument(parser)
    parser.add_argument(
        "--tool-search",
        choices=sorted(_TOOL_SEARCH),
        default="auto",
        help="the model sees only a search tool and the tools it finds, instead of every tool "
        f"(auto: with more than {TOOL_SEARCH_ABOVE} tools)",
    )
    parser.add_argument(
        "--tool-search-translation",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="with tool search, a question the tools cannot match word for word (Chinese "
        "over tools described in English) is also translated into English by the model and "
        "searched with its translation: seconds of the model per such question (default: off)",
    )
    parser.add_argument(
        "--tool-co-usage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with tool search, a search that finds a tool also offers the tools the "
        "caller's tenant's turns called with it, learned from the audit log and from each "
        "turn, never from another tenant's (default: on)",
    )
    parser.add_argument(
        "--no-sample-knowledge",
        dest="sample_knowledge",
        action="store_false",
        help="do not ingest the sample documents into an empty knowledge base",
    )
    parser.add_argument(
        "--no-query-compression",
        dest="query_compression",
        action="store_false",
        help="retrieve for a follow-up question as asked, instead of first having the model "
        "rewrite it into a standalone question (one model call more per follow-up; never "
        "with the offline TestModel)",
    )
    parser.add_argument(
        "--router-fetch-rounds",
        type=_fetch_rounds,
        default=1,
        metavar="N",
        help="the router ends after N rounds of tool calls that fetched data, without "
        "asking the model again ('unlimited': when the model calls no more tools; small "
        "local models call again whatever they were sent) (default: 1)",
    )
    parser.add_argument(
        "--grounded-arguments",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the router drops a call whose required arguments (texts, numbers) appear nowhere "
        "in the conversation, as made up (small models fill in the tool's example values), "
        "and asked what a term is or means, a call on that term (什么是 UTC 时间？ -> "
        "get_current_time(UTC)) (default: on for a local: model; off for others, which "
        "translate arguments: 北京 -> Beijing)",
    )
    parser.add_argument(
        "--router-reminder",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the router's request repeats the routing rule after the question, where a "
        "small model heeds it (default: on for a local: model, off for others)",
    )
    parser.add_argument(
        "--router-history",
        choices=["text", "messages"],
        default="text",
        help="how the router reads the earlier turns: as a note before the question, or "
        "as messages (a small model shown answers in words answers in words too)",
    )
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning"], help="log level"
    )


def _fetch_rounds(text: str) -> int | None:
    if text == "unlimited":
        return None
    try:
        rounds = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of rounds: {text!r}") from None
    if rounds < 1:
        raise argparse.ArgumentTypeError(
            f"at least 1 round ('unlimited' for no limit), got {rounds}"
        )
    return rounds


def add_tools_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tools",
        action="append",
        metavar="MODULE:ATTRIBUTE",
        help="your tools instead of the sample tools: a module (found in the working "
        "directory or on PYTHONPATH) or a .py file, then the attribute, e.g. my_tools:tools or "
        "path/to/my_tools.py:tools (a function, an object with @tool methods or a list of "
        "them); repeatable",
    )
    parser.add_argument(
        "--mcp",
        metavar="FILE",
        help="the tools of MCP servers too (instead of the sample tools): a JSON file as "
        'Claude Desktop, Cursor or VS Code write it, {"mcpServers": {"NAME": {"command": '
        '"...", "args": [...], "env": {...}} or {"url": "https://.../mcp", "headers": {...}}}}',
    )


def tools_from_arguments(args: argparse.Namespace) -> list[ToolCallback]:
    """The tools ``--tools`` and ``--mcp`` name (the sample tools without either), as
    callbacks. The MCP servers are connected to list their tools, and closed again."""
    sources = tuple(_import_tools(reference) for reference in args.tools or ())
    config = ServiceConfig(tools=sources or None, mcp_servers=mcp_servers_from_arguments(args))
    try:
        local = tool_callbacks(*local_tools(config))
    except (ValueError, TypeError) as exc:  # not tools, two tools of one name, ...
        raise OptionError(f"--tools: {exc}") from exc
    mcp = mcp_provider(config)
    if mcp is None:
        return local
    with mcp_startup_errors(args), mcp:
        return tool_callbacks(*local, mcp)


def mcp_servers_from_arguments(args: argparse.Namespace) -> tuple[ServerParameters, ...]:
    """The servers of the ``--mcp`` file (none without it)."""
    if args.mcp is None:
        return ()
    from tooluse.mcp import McpConfigError, load_mcp_config

    try:
        return load_mcp_config(args.mcp)
    except McpConfigError as exc:  # it names the file
        raise OptionError(f"--mcp {exc}") from exc


@contextlib.contextmanager
def mcp_startup_errors(args: argparse.Namespace) -> Iterator[None]:
    """``OptionError`` for an MCP server of ``--mcp`` that cannot start (the error names it)
    and for an MCP tool that takes the name of another tool."""
    try:
        yield
    # McpServerError, or tool_callbacks refusing two tools of one name (it names both)
    except (ToolSourceError, ValueError) as exc:
        raise OptionError(f"--mcp {args.mcp}: {exc}") from exc


async def start_service(service: QaService, args: argparse.Namespace) -> None:
    """``await service.astart()``; when it fails for what the options ask for (see
    :func:`mcp_startup_errors`), the service is closed and ``OptionError`` says why."""
    try:
        try:
            with mcp_startup_errors(args):
                await service.astart()
        except _redis_errors() as exc:
            url = location_label(service.config.redis_url or "")
            raise OptionError(f"--redis-url {url}: {exc}") from exc
    except OptionError:
        await service.aclose()
        raise


def _redis_errors() -> tuple[type[Exception], ...]:
    """The redis client's errors, when the redis extra is installed."""
    try:
        import redis
    except ImportError:
        return ()
    return (redis.RedisError,)


def _import_tools(reference: str) -> object:
    try:
        return load_target(reference)
    except TargetError as exc:
        raise OptionError(f"--tools {reference}: {exc}") from exc


def config_from_arguments(args: argparse.Namespace) -> ServiceConfig:
    """The service configuration the options ask for (``OptionError`` when they cannot be
    used: a model spec without its key, tools that do not import, an ``--mcp`` file that is
    not a configuration of MCP servers, ...)."""
    # The model last: a local one starts its engine, which a bad option would leave running.
    tools = tuple(_import_tools(reference) for reference in args.tools) if args.tools else None
    mcp_servers = mcp_servers_from_arguments(args)
    spec = (args.model or "").strip() or DEFAULT_MODEL
    if args.tool_search_translation and spec == TEST_MODEL:
        raise OptionError(
            "--tool-search-translation translates with the model: not with --model test "
            "(the offline model does not translate)"
        )
    return ServiceConfig(
        db=args.db,
        database_url=args.database_url,
        model=None if spec == TEST_MODEL else _model(spec, args),
        model_label=None if spec == TEST_MODEL else spec,
        sample_knowledge=args.sample_knowledge,
        query_compression=args.query_compression,
        router_fetch_rounds=args.router_fetch_rounds,
        router_grounded_arguments=(
            spec.startswith("local:")
            if args.grounded_arguments is None
            else args.grounded_arguments
        ),
        router_history_as_text=args.router_history == "text",
        router_reminder=(
            spec.startswith("local:") if args.router_reminder is None else args.router_reminder
        ),
        tool_search=_TOOL_SEARCH[args.tool_search],
        tool_search_translation=args.tool_search_translation,
        tool_co_usage=args.tool_co_usage,
        tools=tools,
        mcp_servers=mcp_servers,
    )


def _model(spec: str, args: argparse.Namespace) -> ChatModel:
    from tooluse.models import LocalChatModel, from_config
    from tooluse.models._config import MissingApiKeyError, local_model_name
    from tooluse.models._llama_engine import EngineError
    from tooluse.models.weights import WeightsError

    engine_url = getattr(args, LOCAL_ENGINE_URL, None)
    if engine_url is not None:  # a worker of `serve --workers N`: its supervisor's engine
        return LocalChatModel(local_model_name(spec), base_url=engine_url)
    if args.model_slots is not None and not spec.startswith("local:"):
        raise OptionError(f"--model-slots: only a local: model has slots, not {spec}")
    try:
        return from_config(spec, slots=args.model_slots)
    except MissingApiKeyError as exc:  # its message names from_config's api_key=
        raise OptionError(
            f"--model {spec} needs an API key: set the environment variable "
            f"{exc.key_env} (e.g. export {exc.key_env}=...)"
        ) from exc
    except (WeightsError, EngineError) as exc:  # each names the command that fixes it
        raise OptionError(
            f"--model {spec}: {exc} (or run the offline TestModel: --model {TEST_MODEL})"
        ) from exc
    except ValueError as exc:
        raise OptionError(f"--model: {exc}") from exc


LOCAL_ENGINE_URL = "local_engine_url"
"""The option a worker of ``tooluse serve --workers N`` gets from its supervisor: the API of
the engine of the local model the supervisor started, which every worker uses."""


def close_model(config: ServiceConfig) -> None:
    """Close the model the options built (a local model's engine stops)."""
    close = getattr(config.model, "close", None)
    if callable(close):
        close()


def open_service(args: argparse.Namespace, build: Callable[[ServiceConfig], T]) -> T:
    """``build(config)`` for the options' configuration, with ``OptionError`` for what the
    options ask for and the service cannot open: tools that are not tools, a ``--db`` that
    SQLite cannot open (a missing directory, not a database, ...) or that holds tables of
    another schema version."""
    config = config_from_arguments(args)
    try:
        return build(config)
    except sqlite3.Error as exc:
        close_model(config)
        raise OptionError(f"--db {args.db}: {exc}") from exc
    except postgres_errors() as exc:  # cannot connect, no pgvector, no permission, ...
        close_model(config)
        raise OptionError(f"--database-url {location_label(args.database_url)}: {exc}") from exc
    except SchemaVersionError as exc:  # it names the file
        close_model(config)
        raise OptionError(str(exc)) from exc
    except (ValueError, TypeError) as exc:  # tool_callbacks refusing a --tools source, ...
        close_model(config)
        raise OptionError(str(exc)) from exc


def configure_logging(level: str) -> None:
    """Log lines of the service (``tooluse.service``) to stderr, unless logging is set up."""
    if not logging.getLogger().handlers:
        logging.basicConfig(format="%(levelname)s:     %(name)s: %(message)s")
    logging.getLogger("tooluse").setLevel(level.upper())
