"""``QaService``: the QA pipeline with the service's embedded defaults, shared by the HTTP
app (``tooluse serve``) and the terminal (``tooluse chat``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import threading
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tooluse._tables import Location, is_postgres_url
from tooluse.advisors import ToolCallingAdvisor
from tooluse.advisors._api import model_name
from tooluse.calling import (
    DEFAULT_AUDIT_RETENTION,
    DEFAULT_JOURNAL_RETENTION,
    AuditSink,
    Caller,
    Decision,
    PostgresAuditLog,
    PostgresRateLimitStore,
    PostgresToolCallJournal,
    RateLimit,
    RateLimitStore,
    RedisRateLimitStore,
    SqliteAuditLog,
    SqliteRateLimitStore,
    SqliteToolCallJournal,
    ToolCallingManager,
    ToolCallJournal,
    ToolVisibility,
    WriteApproval,
)
from tooluse.calling._approval import approval_reason
from tooluse.embedding import (
    CachedEmbeddingModel,
    E5EmbeddingModel,
    EmbeddingModel,
    InMemoryEmbeddingCache,
    PostgresEmbeddingCache,
    TieredEmbeddingCache,
)
from tooluse.memory import (
    ChatMemory,
    ChatMemoryRepository,
    MessageWindowChatMemory,
    PostgresChatMemoryRepository,
    PostgresDatabase,
    SqliteChatMemoryRepository,
)
from tooluse.messages import Message, ToolCall
from tooluse.models import ChatModel
from tooluse.qa import ROUTER_REMINDER, QaEvent, QaPause, QaPipeline
from tooluse.rag import CompressionQueryTransformer, QueryTransformer
from tooluse.rag._sqlite_store import SCHEMA_VERSION as VECTOR_STORE_SCHEMA_VERSION
from tooluse.search import (
    HybridToolIndex,
    QueryTranslator,
    ToolCoUsage,
    ToolSearchToolCallingAdvisor,
    mcp_server_category,
)
from tooluse.service._access import service_tool_visibility
from tooluse.service._approvals import (
    DEFAULT_APPROVAL_EXPIRY,
    DEFAULT_APPROVAL_RETENTION,
    ApprovalStore,
)
from tooluse.service._auth import ANONYMOUS, ApiKeys, Authenticator
from tooluse.service._co_usage import TenantCoUsage
from tooluse.service._conversation_events import ConversationEvents
from tooluse.service._durable import (
    DbosRunEngine,
    RecordedChatMemory,
    RecordedChatModel,
    RecordedToolCallingManager,
    RunEngine,
    executor_id,
)
from tooluse.service._knowledge import KnowledgeBase
from tooluse.service._offline import OFFLINE_NOTICE, OfflineModel
from tooluse.service._owners import ConversationOwners
from tooluse.service._runs import LiveRun, run_turn
from tooluse.service._samples import SAMPLE_TOOLS
from tooluse.service._turn_displays import DEFAULT_TURN_DISPLAY_RETENTION, TurnDisplayStore
from tooluse.service._turn_memory import TurnMemory
from tooluse.service._turns import ConversationTurns, RedisTurnLocks, TurnLease
from tooluse.tools import ToolCallback, ToolContext, tool_callbacks

if TYPE_CHECKING:  # the mcp extra is imported only for a service with MCP servers
    from tooluse.mcp import McpToolProvider, ServerParameters

__all__ = [
    "DEFAULT_DATABASE",
    "TOOL_SEARCH_ABOVE",
    "QaService",
    "ServiceConfig",
    "grounded_arguments",
    "history_as_text",
    "local_tools",
    "mcp_provider",
    "query_transformers",
    "router_advisor",
    "router_reminder",
    "run_context",
    "shared_embedding_model",
    "tool_calling_manager",
    "tool_sources",
]

logger = logging.getLogger("tooluse.service")

T = TypeVar("T")


def run_context(caller: Caller) -> dict[str, Any] | None:
    """The tool-context entries of a run for ``caller`` (none for an anonymous one)."""
    return None if caller == ANONYMOUS else caller.tool_context()


DEFAULT_DATABASE = "tooluse.db"

# More tools than this and the router searches for its tools: OpenAI's function-calling guide
# advises fewer than 20 functions offered at once, for accuracy; each also costs prompt tokens.
TOOL_SEARCH_ABOVE = 20

# A request body over this is refused (413): a question of the page's 32,000 characters and a
# conversation of them for /v1 fit many times; a body that would hold the embedding model for
# seconds does not.
DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ServiceConfig:
    """What the service runs with; every field has an embedded default.

    - ``db``: the SQLite file for chat memory, the knowledge base (collection
      ``"default"``, where ``tooluse ingest`` writes), paused runs and the tool calls'
      journal, audit log and rate-limit buckets;
    - ``database_url``: a PostgreSQL database (``postgresql://...``, with pgvector) that
      holds all of these instead of ``db``, shared by every worker of the service, and the
      embedding cache of the bundled model (``embedding_model`` unset);
    - ``redis_url``: a Redis server (``redis://...``) through which the workers of the
      service run the turns of a conversation one at a time, whichever worker each comes to
      (:class:`ConversationTurns`; without it, one at a time on each worker), and which
      holds the rate-limit buckets;
    - ``model``: ``None`` runs the offline ``TestModel`` (:class:`OfflineModel`);
      ``model_label`` names the model on the page (default: the model's name);
    - ``tools``: tool sources; ``None``: the sample tools, unless ``mcp_servers`` is given;
    - ``mcp_servers``: MCP servers whose tools the service offers too, e.g.
      ``tooluse.mcp.load_mcp_config("mcp.json")`` or ``[StdioServer("uvx",
      ["mcp-server-time"])]``; connected when the service starts (:meth:`QaService.astart`)
      and stopped when it closes;
    - ``embedding_model``: default the bundled offline E5 model;
    - ``sample_knowledge``: ingest the sample documents while the knowledge base has no
      documents of its own;
    - ``memory_window``: messages remembered per conversation; ``top_k``: documents per
      question;
    - ``query_compression``: with a model configured, a question asked after others is
      rewritten by the model into a standalone question for retrieval, one model call more
      (:func:`query_transformers`); the offline ``TestModel`` never rewrites;
    - ``router_fetch_rounds``: the router ends after this many rounds that fetched data
      (default 1: fetch, then answer, which small models need; ``None``: when the model
      calls no more tools), see :class:`~tooluse.qa.QaPipeline`;
    - ``router_grounded_arguments``: the router drops a call whose required arguments
      (texts, numbers, the items of lists and objects) appear nowhere in the conversation,
      as made up (small models call a tool with its
      description's example values when asked a knowledge question), and, asked what a
      term is or means, a call whose arguments are all in that term; ``tooluse serve``
      turns it on; a model that translates arguments, 东京 -> "Tokyo", would lose such
      calls); never with the offline ``TestModel``, whose arguments are all made up
      (:func:`grounded_arguments`);
    - ``router_history_as_text``: the router reads the earlier turns as a note before the
      question, not as messages (a small model shown answers in words answers the next
      question in words too); ``tooluse serve`` turns it on; never with the offline
      ``TestModel`` (:func:`history_as_text`);
    - ``router_reminder``: the router's request repeats the routing rule after the question
      (:data:`~tooluse.qa.ROUTER_REMINDER`: a small model heeds it there, not only in the
      system message); ``tooluse serve`` turns it on for a local model; never with the
      offline ``TestModel`` (:func:`router_reminder`);
    - ``keepalive_seconds``: a stream that sends nothing for this long (a model thinking, a
      slow tool) gets an SSE comment, so that proxies do not close it as idle;
    - ``api_key``: when set, ``/api/*`` and ``/v1/*`` require ``Authorization: Bearer <key>``
      (the page asks for it once; ``/`` and ``/healthz`` stay open);
    - ``tool_search``: the router sees only ``toolSearchTool`` and the tools its searches
      found (:class:`~tooluse.search.ToolSearchToolCallingAdvisor` over the default hybrid
      index, with ``embedding_model``); ``None``: when there are more than
      :data:`TOOL_SEARCH_ABOVE` tools (counted when the service starts, MCP tools included);
    - ``tool_search_translation``: with tool search, a question the tools cannot match
      lexically (a Chinese question over tools described in English) is also translated
      into English by ``model`` and searched with its translation
      (:class:`~tooluse.search.QueryTranslator`: seconds of the model per such question;
      off by default, docs/tool-search.md); needs ``model``;
    - ``tool_co_usage``: with tool search, a search that finds a tool also offers the tools
      the caller's tenant's turns called with it (:class:`~tooluse.search.ToolCoUsage`, one
      per tenant, learned from the audit log at a tenant's first turn on a worker and from
      each of its turns then: :class:`~tooluse.service._co_usage.TenantCoUsage`); never
      another tenant's usage, never a tool the caller may not see;
    - ``approval_expiry_seconds``: how long a run paused for approval waits for a decision
      before it expires;
    - ``approval_retention_seconds``: how long a run paused for approval is kept after it
      expires or would have expired (it has ended by then: decided, superseded or expired),
      before its row is deleted from ``db``; runs still pending or resuming are kept;
    - ``turn_display_retention_seconds``: how long a turn's tool calls and results, route and
      sources are kept for a reloaded page after the turn last ran (its question and answer
      are in memory, which keeps them as long as the memory window does);
    - ``allowed_hosts``: host names the service answers for (the ``Host`` header) besides
      its IP addresses and ``localhost``; ``("*",)``: any (a proxy in front checks them);
    - ``max_request_bytes``: the largest request body taken, on every route (413 beyond);
    - ``write_approval``: which tools wait for a human by their kind (see
      :data:`~tooluse.calling.WriteApproval`): by default every tool not marked read-only
      (``@tool(read_only=True)``, an MCP tool's ``readOnlyHint``), except those whose
      ``requires_approval`` is ``False`` (an ``mcp.json`` ``"approval": "never"``);
    - ``idempotency_retention_seconds``: how long the journal answers a repeated
      call of a tool with an ``idempotency_key`` with its stored result (a model's repeat,
      a client's retry, a resume, a restart after a crash) instead of running it again;
    - ``audit_retention_seconds``: how long the audit log keeps its record of each
      tool call (``tooluse audit`` reads it);
    - ``rate_limits``: a :class:`~tooluse.calling.RateLimit` per tool name (per user,
      tenant, conversation or for all), its buckets shared by the workers;
    - ``authenticators``: who a request comes from, beyond ``api_key`` (asked after it, in
      order; see :mod:`tooluse.service._auth`): per-user keys (:class:`ApiKeys`), a
      reverse proxy's headers (:class:`TrustedProxyHeaders`), signed tokens
      (:class:`JwtBearer`). A named user's conversations and paused runs are theirs: any
      other caller gets 404. The user, tenant and roles go into the tool context (the
      audit log records them) and decide with ``tool_visibility`` which tools are offered;
    - ``tool_visibility``: which tools each caller may see and use (a
      :class:`~tooluse.calling.ToolVisibility`, e.g. a
      :class:`~tooluse.calling.ToolAccessPolicy`), besides the access rules of the MCP
      servers' settings (``mcp.json``); a tool either forbids is never offered, found by
      tool search or run for that caller.
    - ``durable_runs``: each turn of ``/api/chat``, each resumed run and each run of
      ``/v1/chat/completions`` is a durable workflow in ``database_url`` (DBOS, ``pip
      install 'tooluse[durable]'``): a worker that dies mid-run leaves it to another, which
      goes on from its last completed step without running a completed tool call again
      (:mod:`tooluse.service._durable`); one such service per process.
    """

    db: str | os.PathLike[str] = DEFAULT_DATABASE
    database_url: str | None = None
    redis_url: str | None = None
    model: ChatModel | None = None
    model_label: str | None = None
    tools: Sequence[object] | None = None
    mcp_servers: Sequence[ServerParameters] = ()
    embedding_model: EmbeddingModel | None = None
    sample_knowledge: bool = True
    memory_window: int = 20
    top_k: int = 4
    query_compression: bool = True
    router_fetch_rounds: int | None = 1
    router_grounded_arguments: bool = False
    router_history_as_text: bool = False
    router_reminder: bool = False
    keepalive_seconds: float = 15.0
    api_key: str | None = None
    tool_search: bool | None = None
    tool_search_translation: bool = False
    tool_co_usage: bool = True
    approval_expiry_seconds: float = DEFAULT_APPROVAL_EXPIRY
    approval_retention_seconds: float = DEFAULT_APPROVAL_RETENTION
    turn_display_retention_seconds: float = DEFAULT_TURN_DISPLAY_RETENTION
    allowed_hosts: Sequence[str] = ()
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    write_approval: WriteApproval = "writes"
    idempotency_retention_seconds: float = DEFAULT_JOURNAL_RETENTION
    audit_retention_seconds: float = DEFAULT_AUDIT_RETENTION
    rate_limits: Mapping[str, RateLimit] = dataclasses.field(default_factory=dict)
    authenticators: Sequence[Authenticator] = ()
    tool_visibility: ToolVisibility | None = None
    durable_runs: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.allowed_hosts, str):
            raise TypeError(f"allowed_hosts takes a list of host names, got {self.allowed_hosts!r}")
        object.__setattr__(self, "allowed_hosts", tuple(self.allowed_hosts))
        if not self.max_request_bytes > 0:
            raise ValueError(f"max_request_bytes must be > 0, got {self.max_request_bytes}")
        if not self.keepalive_seconds > 0:
            raise ValueError(f"keepalive_seconds must be > 0, got {self.keepalive_seconds}")
        if not self.approval_expiry_seconds > 0:
            raise ValueError(
                f"approval_expiry_seconds must be > 0, got {self.approval_expiry_seconds}"
            )
        if not self.approval_retention_seconds > 0:
            raise ValueError(
                f"approval_retention_seconds must be > 0, got {self.approval_retention_seconds}"
            )
        if not self.turn_display_retention_seconds > 0:
            raise ValueError(
                "turn_display_retention_seconds must be > 0, got "
                f"{self.turn_display_retention_seconds}"
            )
        if self.database_url is not None and not is_postgres_url(self.database_url):
            raise ValueError(
                "database_url must be a PostgreSQL URL, postgresql://USER:PASSWORD@HOST/DB, "
                f"got {self.database_url!r}"
            )
        if self.tool_search_translation and self.model is None:
            raise ValueError(
                "tool_search_translation translates with the service's model: give model too "
                "(the offline TestModel does not translate)"
            )
        if self.durable_runs and self.database_url is None:
            raise ValueError("durable_runs records the runs in PostgreSQL: give database_url too")
        if self.redis_url is not None and not self.redis_url.startswith(
            ("redis://", "rediss://", "unix://")
        ):
            raise ValueError(
                f"redis_url must be a Redis URL, redis://HOST:PORT/DB, got {self.redis_url!r}"
            )
        if self.api_key is not None and (not self.api_key.strip() or " " in self.api_key):
            raise ValueError("api_key must be a non-blank token without spaces")
        authenticators = tuple(self.authenticators)
        wrong = [a for a in authenticators if not isinstance(a, Authenticator)]
        if wrong:
            raise TypeError(
                "authenticators takes Authenticators (async authenticate(credentials) -> "
                f"Caller | None), got {wrong[0]!r}"
            )
        object.__setattr__(self, "authenticators", authenticators)
        if self.tool_visibility is not None and not isinstance(
            self.tool_visibility, ToolVisibility
        ):
            raise TypeError(
                "tool_visibility takes a ToolVisibility (allows(caller, tool) -> bool), got "
                f"{self.tool_visibility!r}"
            )
        servers = self.mcp_servers
        if isinstance(servers, str | os.PathLike):
            raise TypeError(
                "mcp_servers takes server parameters (StdioServer, HttpServer, ...); for a "
                f"configuration file, use tooluse.mcp.load_mcp_config({str(servers)!r})"
            )
        if not isinstance(servers, Iterable):
            raise TypeError(
                "mcp_servers takes a list of server parameters (StdioServer, HttpServer, ...), "
                f"got {servers!r}"
            )
        object.__setattr__(self, "mcp_servers", tuple(servers))


def local_tools(config: ServiceConfig) -> tuple[object, ...]:
    """The tool sources of ``config`` other than its MCP servers: ``config.tools``, or without
    them the sample tools, unless MCP servers bring the tools."""
    if config.tools is not None:
        return tuple(config.tools)
    return () if config.mcp_servers else tuple(SAMPLE_TOOLS)


def tool_sources(config: ServiceConfig, mcp: McpToolProvider | None) -> tuple[object, ...]:
    """Every tool source of ``config``: its :func:`local_tools`, then ``mcp`` (the provider
    of its MCP servers' tools, from :func:`mcp_provider`)."""
    local = local_tools(config)
    return local if mcp is None else (*local, mcp)


def mcp_provider(config: ServiceConfig) -> McpToolProvider | None:
    """A provider (not connected yet) of the tools of ``config.mcp_servers``; ``None``
    without servers."""
    if not config.mcp_servers:
        return None
    from tooluse.mcp import McpToolProvider

    return McpToolProvider(*config.mcp_servers)


def query_transformers(config: ServiceConfig, model: ChatModel) -> tuple[QueryTransformer, ...]:
    """The answer stage's query transformers for ``config``, whose answers ``model`` writes:
    a :class:`~tooluse.rag.CompressionQueryTransformer` with ``model`` when a model is
    configured and ``config.query_compression`` is on, else none (the offline ``TestModel``
    would echo the prompt back as the question to search for)."""
    if config.model is None or not config.query_compression:
        return ()
    return (CompressionQueryTransformer(model),)


def grounded_arguments(config: ServiceConfig) -> bool:
    """Whether the router drops calls with made-up arguments: as ``config`` asks, with a
    model configured (the offline ``TestModel`` makes up every argument)."""
    return config.router_grounded_arguments and config.model is not None


def history_as_text(config: ServiceConfig) -> bool:
    """Whether the router reads the earlier turns as a note: as ``config`` asks, with a
    model configured (the offline ``TestModel`` calls the tools its question mentions, and
    the note would mention the earlier questions' tools)."""
    return config.router_history_as_text and config.model is not None


def router_reminder(config: ServiceConfig) -> str | None:
    """The reminder the router adds after the question (:data:`~tooluse.qa.ROUTER_REMINDER`)
    when ``config`` asks, with a model configured (the offline ``TestModel`` would read the
    reminder as part of the question)."""
    return ROUTER_REMINDER if config.router_reminder and config.model is not None else None


def tool_calling_manager(
    config: ServiceConfig,
    journal: ToolCallJournal | None,
    audit: AuditSink | None,
    rate_buckets: RateLimitStore | None,
    runs: RunEngine | None = None,
) -> ToolCallingManager:
    """What runs the router's tool calls: the default limits and identical-call guard, the
    approval policy and rate limits of ``config`` (their buckets in ``rate_buckets``),
    ``journal`` for the tools with idempotency keys, ``audit`` for a record of every call,
    and which tools each caller may use (``config.tool_visibility`` and the MCP servers'
    access rules); with ``runs``, each round is a step of the durable run it is made in."""
    options: dict[str, Any] = {
        "write_approval": config.write_approval,
        "journal": journal,
        "audit": audit,
        "rate_limits": config.rate_limits,
        "rate_limit_store": rate_buckets,
        "tool_visibility": service_tool_visibility(config.tool_visibility, config.mcp_servers),
    }
    if runs is not None:
        return RecordedToolCallingManager(runs, **options)
    return ToolCallingManager(**options)


def router_advisor(
    config: ServiceConfig,
    callbacks: Sequence[ToolCallback],
    journal: ToolCallJournal | None = None,
    audit: AuditSink | None = None,
    rate_buckets: RateLimitStore | None = None,
    runs: RunEngine | None = None,
    *,
    embedding_model: EmbeddingModel | None = None,
    co_usage: Callable[[Caller], ToolCoUsage | None] | None = None,
) -> ToolCallingAdvisor:
    """The router's tool loop for ``config`` and its tools ``callbacks`` (MCP tools
    included), running them with :func:`tool_calling_manager`: tool search when
    ``config.tool_search`` asks for it (``None``: when there are more than
    :data:`TOOL_SEARCH_ABOVE` tools), else a plain loop. Tool search files an MCP tool under
    its server's name (its category); its index embeds with ``embedding_model`` (default
    ``config.embedding_model``), translates with ``config.model`` when
    ``config.tool_search_translation`` asks for it, and lifts the companions ``co_usage``
    gives for each search's caller. With ``runs``, each tool round is a step of the durable
    run it is made in."""
    manager = tool_calling_manager(config, journal, audit, rate_buckets, runs)
    enabled = config.tool_search
    if enabled is None:
        enabled = len(callbacks) > TOOL_SEARCH_ABOVE
    if not enabled:
        return ToolCallingAdvisor(tool_calling_manager=manager)
    translator = (
        QueryTranslator(config.model)
        if config.tool_search_translation and config.model is not None
        else None
    )
    return ToolSearchToolCallingAdvisor(
        tool_index=HybridToolIndex(
            embedding_model or config.embedding_model, query_translator=translator
        ),
        tool_calling_manager=manager,
        co_usage=co_usage,
    )


class QaService:
    """The pipeline, its memory, knowledge base, store of paused runs and of what each turn
    showed besides its answer (:class:`TurnDisplayStore`), and the turns of
    its conversations (:class:`ConversationTurns`: one at a time per conversation), built
    from a :class:`ServiceConfig`. The files are opened here. :meth:`astart` (or :meth:`start`
    without MCP servers) connects the MCP servers, builds the pipeline and begins loading
    the knowledge base in the background; :meth:`aclose` (or :meth:`close`) stops the MCP
    servers and releases the files."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.offline = config.model is None
        self._model: ChatModel = OfflineModel() if config.model is None else config.model
        self.model_label = config.model_label or model_name(self._model)
        # With durable runs, each model call, tool round and write of a turn is a step of
        # its run (tooluse.service._durable); the clients of the runs streaming from here.
        self.runs: DbosRunEngine | None = None
        self.live_runs: dict[str, LiveRun] = {}
        # The worker's name in its Redis locks is its executor id: a worker that takes over
        # a dead one's runs frees the conversations it held, so they need not wait the lease.
        worker = executor_id()
        self.events = ConversationEvents(config.redis_url)
        # A turn's lock is taken and released through the events' sender, on its held
        # connection: the release with the turn's done, one round trip; the take counts the
        # conversation's watchers.
        turn_locks = (
            None
            if config.redis_url is None
            else RedisTurnLocks(
                config.redis_url,
                owner=worker,
                sends=self.events.after_published,
                channel_of=self.events.channel,
            )
        )
        if config.durable_runs:
            assert config.database_url is not None  # checked by ServiceConfig
            self.runs = DbosRunEngine(
                config.database_url,
                functools.partial(run_turn, self),
                executor=worker,
                on_takeover=None if turn_locks is None else turn_locks.release_held_by,
            )
            self._model = RecordedChatModel(self._model, self.runs)
        tool_callbacks(*local_tools(config))  # bad tool sources fail here, with their names
        self.mcp = mcp_provider(config)
        self.tools = tool_sources(config, self.mcp)
        with contextlib.ExitStack() as opened:  # closed again if one cannot be opened
            self._repository, self.approvals, self.turn_displays, location = _open_stores(
                config, opened
            )
            self.journal, self.audit, self.rate_buckets = _open_guard_stores(
                config, location, opened
            )
            self.owners = opened.enter_context(ConversationOwners(location))
            self.embedding_model = config.embedding_model
            if self.embedding_model is None and isinstance(location, PostgresDatabase):
                cache = opened.enter_context(PostgresEmbeddingCache(location))
                self.embedding_model = shared_embedding_model(cache)
            self._stores = opened.pop_all()
        # Its pool of this event loop (the turns' async reads and writes) closes on the loop.
        self._database = location if isinstance(location, PostgresDatabase) else None
        shared = () if config.api_key is None else (ApiKeys({config.api_key: ANONYMOUS}),)
        self.authenticators: tuple[Authenticator, ...] = (*shared, *config.authenticators)
        # Only these name users: without them every caller is anonymous, and nobody owns a
        # conversation (nothing to check per request).
        self.names_users = bool(config.authenticators)
        self.tool_visibility = service_tool_visibility(config.tool_visibility, config.mcp_servers)
        # A turn reads its conversation once (:class:`TurnMemory`), under the durable
        # runs' recording of the writes.
        self.turn_memory = TurnMemory(
            MessageWindowChatMemory(max_messages=config.memory_window, repository=self._repository)
        )
        self.memory: ChatMemory = self.turn_memory
        if self.runs is not None:
            self.memory = RecordedChatMemory(self.memory, self.runs)
        self.turns = ConversationTurns(turn_locks)
        self.knowledge = KnowledgeBase(
            location,
            embedding_model=self.embedding_model,
            samples=config.sample_knowledge,
            top_k=config.top_k,
        )
        self.tool_search: ToolSearchToolCallingAdvisor | None = None
        # With tool search and config.tool_co_usage: the tools each tenant uses together.
        self.co_usage: TenantCoUsage | None = None
        self._pipeline: QaPipeline | None = None
        self._starting = False  # astart() is connecting the MCP servers
        self._closed = False

    @property
    def started(self) -> bool:
        return self._pipeline is not None

    @property
    def pipeline(self) -> QaPipeline:
        if self._pipeline is None:
            raise RuntimeError(
                "The QaService is not started: `await service.astart()` (or `service.start()` "
                "without MCP servers) first"
            )
        return self._pipeline

    async def astart(self) -> None:
        """Connect the MCP servers, then :meth:`start`. A server that cannot start raises
        ``McpServerError`` naming it (the others are closed again). The sessions live on
        this event loop: the tools are called from it. Starting a service that is started,
        starting or closed raises ``RuntimeError`` and leaves it as it is."""
        # Checked before anything is touched: connecting again, or closing on the way out,
        # would break the MCP sessions of the service already running.
        self._check_startable()
        self._starting = True
        try:
            await self.turns.check()  # an unreachable Redis fails here, not at the first turn
            if self.runs is not None:
                await self.runs.start()
            if self.mcp is not None:
                await self.mcp.aconnect()
            try:
                self._start()
            except BaseException:  # e.g. an MCP tool named like one of the other tools
                if self.mcp is not None:
                    await self.mcp.aclose()
                if self.runs is not None:
                    await self.runs.aclose()
                raise
        finally:
            self._starting = False

    def start(self) -> None:
        """Build the pipeline (tool search decided on the tools there are now) and begin
        loading the knowledge base. With MCP servers, use :meth:`astart`."""
        if self.mcp is not None or self.runs is not None:
            raise RuntimeError(
                "A QaService with MCP servers or durable runs starts with `await "
                "service.astart()`, on the event loop that will call their tools and run "
                "its runs"
            )
        self._check_startable()
        self._start()

    def _check_startable(self) -> None:
        if self._closed:
            raise RuntimeError("The QaService is closed; make a new one to start")
        if self._starting:
            raise RuntimeError("The QaService is already starting")
        if self._pipeline is not None:
            raise RuntimeError("The QaService is already started")

    def _start(self) -> None:
        callbacks = tool_callbacks(*self.tools)
        co_usage = TenantCoUsage(self.audit) if self.config.tool_co_usage else None
        router = router_advisor(
            self.config,
            callbacks,
            self.journal,
            self.audit,
            self.rate_buckets,
            self.runs,
            embedding_model=self.embedding_model,
            co_usage=None if co_usage is None else co_usage.usage_of,
        )
        self.tool_search = router if isinstance(router, ToolSearchToolCallingAdvisor) else None
        self.co_usage = co_usage if self.tool_search is not None else None
        self._pipeline = QaPipeline(
            self._model,
            retriever=self.knowledge,
            query_transformers=query_transformers(self.config, self._model),
            tools=self.tools,
            memory=self.memory,
            router_advisor=router,
            router_fetch_rounds=self.config.router_fetch_rounds,
            router_grounded_arguments=grounded_arguments(self.config),
            router_history_as_text=history_as_text(self.config),
            router_reminder=router_reminder(self.config),
        )
        if self.offline:
            logger.warning("%s", OFFLINE_NOTICE)
        else:
            logger.info("model: %s", self.model_label)
        if self.mcp is not None:
            per_server = _tools_per_server(callbacks)
            for connection in self.mcp.connections:
                logger.info(
                    "MCP server '%s': %s, %d tools",
                    connection.name,
                    connection.state,
                    per_server[connection.name],
                )
        self.knowledge.start()
        if self.tool_search is not None:
            logger.info("tool search: the model finds its tools among %d", len(callbacks))
            # Embedding a new catalogue takes a while; searches meanwhile rank with BM25.
            threading.Thread(
                target=self._warm_up_tool_search,
                args=(self.tool_search, callbacks),
                name="tooluse-tool-search-warm-up",
                daemon=True,
            ).start()

    @staticmethod
    def _warm_up_tool_search(
        advisor: ToolSearchToolCallingAdvisor, callbacks: Sequence[ToolCallback]
    ) -> None:
        try:
            advisor.warm_up(callbacks)
        except Exception:
            logger.exception("Indexing the tools for tool search failed; searches use BM25 only")

    async def aclose(self) -> None:
        """Stop the MCP servers (a stdio server's process ends) and release the files.
        Idempotent."""
        if self.runs is not None:  # first: a run still going on is taken over by another
            await self.runs.aclose()
        if self.mcp is not None:
            await self.mcp.aclose()
        await self.turns.aclose()
        await self.events.aclose()
        if self._database is not None:
            await self._database.aclose()
        await asyncio.to_thread(self._close_files)

    def close(self) -> None:
        """:meth:`aclose` for sync code (not inside a running event loop), for a service
        without durable runs."""
        if self.runs is not None:
            raise RuntimeError("A QaService with durable runs closes with `await service.aclose()`")
        if self.mcp is not None:
            self.mcp.close()
        self._close_files()

    def _close_files(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.knowledge.close()
        self._stores.close()

    async def start_turn(self, conversation_id: str, lease: TurnLease | None = None) -> None:
        """A new question's turn in a conversation that goes on, once it has begun: what
        still waits for a decision in the conversation is withdrawn, so that an action asked
        for again cannot also run from the old approval (a pause of the turn it waited for
        too). The conversation's memory is read for the turn with the approvals' read
        (:meth:`TurnMemory.remember_read`): on PostgreSQL in one round trip on the event
        loop, else in one hop to a thread. Neither is read when the turn's ``lease`` says
        it continues this worker's last turn of the conversation (nothing written and no
        approval asked for since, by any worker) and the memory knows the rows that turn
        left: only turns write a conversation's memory (a durable run's steps may be
        replayed elsewhere: those always read)."""
        if (
            lease is not None
            and lease.continues_here
            and self.runs is None
            and isinstance(self._repository, PostgresChatMemoryRepository)
            and (known := self._repository.remembered(conversation_id)) is not None
        ):
            self.turn_memory.remember_read(conversation_id, known)
            return
        if isinstance(self._repository, PostgresChatMemoryRepository):
            # The approvals are in its database (_open_stores): both reads in one statement.
            messages, waiting = await self._repository.afind_by_conversation_id_with_exists(
                conversation_id, *ApprovalStore.waiting_query(conversation_id)
            )
            superseded = (
                await asyncio.to_thread(self.approvals.supersede, conversation_id, waiting=True)
                if waiting
                else []
            )
        else:
            superseded, messages = await asyncio.to_thread(self._start_turn, conversation_id)
        self.turn_memory.remember_read(conversation_id, messages)
        if superseded:
            logger.info("approval %s superseded by a new message", ", ".join(superseded))

    def _start_turn(self, conversation_id: str) -> tuple[list[str], list[Message]]:
        return self.approvals.supersede(conversation_id), self.turn_memory.memory.get(
            conversation_id
        )

    def stream(
        self,
        question: str,
        *,
        conversation_id: str | None = None,
        history: Sequence[Message] = (),
        tool_context: Mapping[str, Any] | None = None,
        turn_id: str | None = None,
        live_tool_events: bool = True,
    ) -> AsyncGenerator[QaEvent, None]:
        """The pipeline's :meth:`~tooluse.qa.QaPipeline.stream`, its calls learned as the
        caller's tenant's usage (:attr:`co_usage`)."""
        events = self.pipeline.stream(
            question,
            conversation_id=conversation_id,
            history=history,
            tool_context=tool_context,
            turn_id=turn_id,
            live_tool_events=live_tool_events,
        )
        return events if self.co_usage is None else self.co_usage.learning(events, tool_context)

    def resume_stream(
        self,
        pause: QaPause,
        decisions: Mapping[str, Decision],
        *,
        tool_context: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[QaEvent, None]:
        """The pipeline's :meth:`~tooluse.qa.QaPipeline.resume_stream`, its calls learned
        as :meth:`stream`'s are."""
        events = self.pipeline.resume_stream(pause, decisions, tool_context=tool_context)
        return events if self.co_usage is None else self.co_usage.learning(events, tool_context)

    async def recorded(self, name: str, compute: Callable[[], Awaitable[T]]) -> T:
        """``compute()``; in a durable run, as its step ``name`` (recorded, never done again
        when the run is taken over)."""
        if self.runs is None:
            return await compute()
        return await self.runs.step(name, compute)

    def health(self) -> dict[str, Any]:
        """What ``/healthz`` says. It counts the knowledge base's chunks (a query of its
        store): call it in a thread from async code."""
        error = self.knowledge.error
        callbacks = tool_callbacks(*self.tools)
        health: dict[str, Any] = {
            "status": "ok" if error is None else "degraded",
            "model": self.model_label,
            "offline": self.offline,
            "knowledge": self.knowledge.status,
            "knowledge_error": None if error is None else str(error),
            "documents": self.knowledge.count_documents(),
            "tools": len(callbacks),
            "tool_search": self.tool_search is not None,
        }
        if self.mcp is not None:
            per_server = _tools_per_server(callbacks)
            health["mcp_servers"] = [
                {
                    "name": connection.name,
                    "state": connection.state,
                    "tools": per_server[connection.name],
                    "error": None if connection.failure is None else str(connection.failure),
                }
                for connection in self.mcp.connections
            ]
            # A dead server reconnects on the next call to it; an optional one that never
            # came up is retried in the background: either way, not all tools work now.
            if any(connection.state != "connected" for connection in self.mcp.connections):
                health["status"] = "degraded"
        return health

    def tool_descriptions(self, caller: Caller = ANONYMOUS) -> list[dict[str, Any]]:
        """The tools ``caller`` may use, as ``GET /api/tools`` lists them."""
        described = []
        visibility = self.tool_visibility
        for callback in tool_callbacks(*self.tools):
            if visibility is not None and not visibility.allows(caller, callback):
                continue
            definition = callback.definition
            described.append(
                {
                    "name": definition.name,
                    "description": definition.description,
                    "input_schema": definition.input_schema,
                    "requires_approval": _approval_shown(callback, self.config.write_approval),
                    "read_only": callback.metadata.read_only,
                    "mcp_server": mcp_server_category(callback),
                }
            )
        return described


def _open_stores(
    config: ServiceConfig, opened: contextlib.ExitStack
) -> tuple[ChatMemoryRepository, ApprovalStore, TurnDisplayStore, Location]:
    """The service's stores: in ``config.database_url``'s PostgreSQL database, on one
    connection pool, or in the SQLite file ``config.db``; and where the knowledge base is
    (opened later, in the background). ``opened`` closes what was opened."""
    location: Location
    repository: ChatMemoryRepository
    if config.database_url is not None:
        location = opened.enter_context(PostgresDatabase(config.database_url))
        repository = opened.enter_context(PostgresChatMemoryRepository(location))
    else:
        location = config.db
        sqlite = opened.enter_context(SqliteChatMemoryRepository(config.db))
        # The knowledge base opens its store in the background, where a file of another
        # schema version would only be a failed load: refused now, as for the others.
        sqlite.check_schema(component="vector_store", version=VECTOR_STORE_SCHEMA_VERSION)
        repository = sqlite
    approvals = opened.enter_context(
        ApprovalStore(
            location,
            expire_after=config.approval_expiry_seconds,
            retention=config.approval_retention_seconds,
        )
    )
    turn_displays = opened.enter_context(
        TurnDisplayStore(location, retention=config.turn_display_retention_seconds)
    )
    return repository, approvals, turn_displays, location


def shared_embedding_model(cache: PostgresEmbeddingCache) -> CachedEmbeddingModel:
    """The bundled E5 model with the document vectors it made kept in memory and in
    ``cache``, which every worker shares: what one worker embedded (a catalogue, the
    knowledge base) no other embeds again, nor a restarted one."""
    return CachedEmbeddingModel(
        E5EmbeddingModel(), TieredEmbeddingCache(InMemoryEmbeddingCache(), cache)
    )


def _open_guard_stores(
    config: ServiceConfig, location: Location, opened: contextlib.ExitStack
) -> tuple[ToolCallJournal, SqliteAuditLog | PostgresAuditLog, RateLimitStore]:
    """The tool-calling guards' stores: the idempotency journal and the audit log at
    ``location`` (``config.database_url``'s database, shared by the workers, or the SQLite
    file), the rate-limit buckets there too or, with ``config.redis_url``, in Redis."""
    journal: ToolCallJournal
    audit: SqliteAuditLog | PostgresAuditLog
    journal_retention = config.idempotency_retention_seconds
    audit_retention = config.audit_retention_seconds
    if isinstance(location, PostgresDatabase):
        journal = opened.enter_context(
            PostgresToolCallJournal(location, retention=journal_retention)
        )
        audit = opened.enter_context(PostgresAuditLog(location, retention=audit_retention))
    else:
        journal = opened.enter_context(SqliteToolCallJournal(location, retention=journal_retention))
        audit = opened.enter_context(SqliteAuditLog(location, retention=audit_retention))
    buckets: RateLimitStore
    if config.redis_url is not None:
        buckets = opened.enter_context(RedisRateLimitStore(config.redis_url))
    elif isinstance(location, PostgresDatabase):
        buckets = opened.enter_context(PostgresRateLimitStore(location))
    else:
        buckets = opened.enter_context(SqliteRateLimitStore(location))
    return journal, audit, buckets


def _approval_shown(callback: ToolCallback, write_approval: WriteApproval) -> bool | str:
    """Whether the tool's calls wait for approval: ``"rule"`` when a predicate decides per
    call."""
    required = callback.metadata.requires_approval
    if callable(required):
        return "rule"
    if required is None:
        probe = ToolCall(id="", name=callback.definition.name, arguments="{}")
        return approval_reason(probe, callback, ToolContext(), None, write_approval) is not None
    return required


def _tools_per_server(callbacks: Sequence[ToolCallback]) -> Counter[str | None]:
    """How many of the tools each MCP server gave (``None``: the tools of no server)."""
    return Counter(mcp_server_category(callback) for callback in callbacks)
