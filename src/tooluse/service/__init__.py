"""The QA service: ``tooluse serve`` (HTTP, Server-Sent Events, a chat page and an
OpenAI-compatible endpoint) and ``tooluse chat`` (a terminal), both over
:class:`tooluse.qa.QaPipeline` with embedded defaults (SQLite file, bundled embedding model,
sample knowledge base and sample tools, the offline ``TestModel`` when no model is set).

Needs the ``service`` extra (FastAPI, uvicorn). See ``docs/service.md``.
"""

from tooluse.service._access import load_tool_access
from tooluse.service._app import ApprovalRequest, ChatRequest, DecisionRequest, create_app
from tooluse.service._approvals import (
    ApprovalConflict,
    ApprovalStore,
    StoredApproval,
    UnknownApproval,
)
from tooluse.service._auth import (
    ApiKeys,
    AuthenticationError,
    Authenticator,
    Credentials,
    JwtBearer,
    TrustedProxyHeaders,
)
from tooluse.service._knowledge import SAMPLE_SOURCE_PREFIX, KnowledgeBase, sync_sample_documents
from tooluse.service._offline import OFFLINE_NOTICE, OfflineModel, mentioned_tools
from tooluse.service._samples import SAMPLE_TOOLS
from tooluse.service._service import DEFAULT_DATABASE, QaService, ServiceConfig

__all__ = [
    "DEFAULT_DATABASE",
    "OFFLINE_NOTICE",
    "SAMPLE_SOURCE_PREFIX",
    "SAMPLE_TOOLS",
    "ApiKeys",
    "ApprovalConflict",
    "ApprovalRequest",
    "ApprovalStore",
    "AuthenticationError",
    "Authenticator",
    "ChatRequest",
    "Credentials",
    "DecisionRequest",
    "JwtBearer",
    "KnowledgeBase",
    "OfflineModel",
    "QaService",
    "ServiceConfig",
    "StoredApproval",
    "TrustedProxyHeaders",
    "UnknownApproval",
    "create_app",
    "load_tool_access",
    "mentioned_tools",
    "sync_sample_documents",
]
