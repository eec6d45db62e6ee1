"""``QaService``: the QA pipeline with the service's embedded defaults, shared by the HTTP
app (``tooluse serve``) and the terminal (``tooluse chat``)."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

from tooluse.advisors._api import model_name
from tooluse.embedding import EmbeddingModel
from tooluse.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
from tooluse.models import ChatModel
from tooluse.qa import QaPipeline
from tooluse.rag._sqlite_store import SCHEMA_VERSION as VECTOR_STORE_SCHEMA_VERSION
from tooluse.search import HybridToolIndex, ToolSearchToolCallingAdvisor
from tooluse.service._approvals import DEFAULT_APPROVAL_EXPIRY, ApprovalStore
from tooluse.service._knowledge import KnowledgeBase
from tooluse.service._offline import OFFLINE_NOTICE, OfflineModel
from tooluse.service._samples import SAMPLE_TOOLS
from tooluse.tools import ToolCallback, tool_callbacks

__all__ = ["DEFAULT_DATABASE", "TOOL_SEARCH_ABOVE", "QaService", "ServiceConfig", "router_advisor"]

logger = logging.getLogger("tooluse.service")

DEFAULT_DATABASE = "tooluse.db"

# More tools than this and the router searches for its tools: OpenAI's function-calling guide
# advises fewer than 20 functions offered at once, for accuracy; each also costs prompt tokens.
TOOL_SEARCH_ABOVE = 20


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ServiceConfig:
    """What the service runs with; every field has an embedded default.

    - ``db``: the SQLite file for chat memory, the knowledge base (collection
      ``"default"``, where ``tooluse ingest`` writes) and paused runs;
    - ``model``: ``None`` runs the offline ``TestModel`` (:class:`OfflineModel`);
      ``model_label`` names the model on the page (default: the model's name);
    - ``tools``: tool sources (default: the sample tools);
    - ``embedding_model``: default the bundled offline E5 model;
    - ``sample_knowledge``: ingest the sample documents while the knowledge base has no
      documents of its own;
    - ``memory_window``: messages remembered per conversation; ``top_k``: documents per
      question;
    - ``keepalive_seconds``: a stream that sends nothing for this long (a model thinking, a
      slow tool) gets an SSE comment, so that proxies do not close it as idle;
    - ``api_key``: when set, ``/api/*`` and ``/v1/*`` require ``Authorization: Bearer <key>``
      (the page asks for it once; ``/`` and ``/healthz`` stay open);
    - ``tool_search``: the router sees only ``toolSearchTool`` and the tools its searches
      found (:class:`~tooluse.search.ToolSearchToolCallingAdvisor` over the default hybrid
      index, with ``embedding_model``); ``None``: when there are more than
      :data:`TOOL_SEARCH_ABOVE` tools;
    - ``approval_expiry_seconds``: how long a run paused for approval waits for a decision
      before it expires.
    """

    db: str | os.PathLike[str] = DEFAULT_DATABASE
    model: ChatModel | None = None
    model_label: str | None = None
    tools: Sequence[object] = SAMPLE_TOOLS
    embedding_model: EmbeddingModel | None = None
    sample_knowledge: bool = True
    memory_window: int = 20
    top_k: int = 4
    keepalive_seconds: float = 15.0
    api_key: str | None = None
    tool_search: bool | None = None
    approval_expiry_seconds: float = DEFAULT_APPROVAL_EXPIRY

    def __post_init__(self) -> None:
        if not self.keepalive_seconds > 0:
            raise ValueError(f"keepalive_seconds must be > 0, got {self.keepalive_seconds}")
        if not self.approval_expiry_seconds > 0:
            raise ValueError(
                f"approval_expiry_seconds must be > 0, got {self.approval_expiry_seconds}"
            )
        if self.api_key is not None and (not self.api_key.strip() or " " in self.api_key):
            raise ValueError("api_key must be a non-blank token without spaces")


def router_advisor(config: ServiceConfig) -> ToolSearchToolCallingAdvisor | None:
    """The router's tool loop for ``config``: tool search when ``config.tool_search`` asks for
    it (``None``: when there are more than :data:`TOOL_SEARCH_ABOVE` tools), else ``None``
    (the pipeline's default loop)."""
    enabled = config.tool_search
    if enabled is None:
        enabled = len(tool_callbacks(*config.tools)) > TOOL_SEARCH_ABOVE
    if not enabled:
        return None
    return ToolSearchToolCallingAdvisor(tool_index=HybridToolIndex(config.embedding_model))


class QaService:
    """The pipeline, its memory, knowledge base and store of paused runs, built from a
    :class:`ServiceConfig`. :meth:`start` begins loading the knowledge base in the
    background; :meth:`close` releases the files."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.offline = config.model is None
        model: ChatModel = OfflineModel() if config.model is None else config.model
        self.model_label = config.model_label or model_name(model)
        self.tools = tuple(config.tools)
        tool_callbacks(*self.tools)  # bad tool sources fail here, with their names
        self._repository = SqliteChatMemoryRepository(config.db)
        try:
            # The knowledge base opens its store in the background, where a file of another
            # schema version would only be a failed load: refused now, as for the others.
            self._repository.check_schema(
                component="vector_store", version=VECTOR_STORE_SCHEMA_VERSION
            )
            self.approvals = ApprovalStore(config.db, expire_after=config.approval_expiry_seconds)
        except BaseException:
            self._repository.close()
            raise
        self.memory = MessageWindowChatMemory(
            max_messages=config.memory_window, repository=self._repository
        )
        self.knowledge = KnowledgeBase(
            config.db,
            embedding_model=config.embedding_model,
            samples=config.sample_knowledge,
            top_k=config.top_k,
        )
        self.tool_search = router_advisor(config)
        self.pipeline = QaPipeline(
            model,
            retriever=self.knowledge,
            tools=self.tools,
            memory=self.memory,
            router_advisor=self.tool_search,
        )

    def start(self) -> None:
        if self.offline:
            logger.warning("%s", OFFLINE_NOTICE)
        else:
            logger.info("model: %s", self.model_label)
        self.knowledge.start()
        if self.tool_search is not None:
            callbacks = tool_callbacks(*self.tools)
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

    def close(self) -> None:
        self.knowledge.close()
        self.approvals.close()
        self._repository.close()

    def health(self) -> dict[str, Any]:
        error = self.knowledge.error
        return {
            "status": "ok" if error is None else "degraded",
            "model": self.model_label,
            "offline": self.offline,
            "knowledge": self.knowledge.status,
            "knowledge_error": None if error is None else str(error),
            "documents": self.knowledge.documents,
            "tools": len(tool_callbacks(*self.tools)),
            "tool_search": self.tool_search is not None,
        }

    def tool_descriptions(self) -> list[dict[str, Any]]:
        described = []
        for callback in tool_callbacks(*self.tools):
            required = callback.metadata.requires_approval
            definition = callback.definition
            described.append(
                {
                    "name": definition.name,
                    "description": definition.description,
                    "input_schema": definition.input_schema,
                    "requires_approval": required if isinstance(required, bool) else "rule",
                }
            )
        return described
