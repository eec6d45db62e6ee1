"""Execution: one round of tool calls (lookup, concurrency, limits, timeouts, approval holds,
exceptions, tracing). See :class:`ToolCallingManager`."""

from tooluse.calling._access import (
    ROLES_KEY,
    Caller,
    ToolAccess,
    ToolAccessPolicy,
    ToolVisibility,
)
from tooluse.calling._approval import (
    ApprovalPredicate,
    Approve,
    Decision,
    Deny,
    PendingToolCall,
    WriteApproval,
)
from tooluse.calling._audit import (
    CONVERSATION_ID_KEY,
    DEFAULT_AUDIT_RETENTION,
    TENANT_ID_KEY,
    USER_ID_KEY,
    AuditRecord,
    AuditSink,
    PostgresAuditLog,
    SqliteAuditLog,
)
from tooluse.calling._exceptions import (
    DefaultToolExecutionExceptionProcessor,
    ToolCallLimitExceeded,
    ToolExecutionExceptionProcessor,
    UnknownToolError,
)
from tooluse.calling._journal import (
    DEFAULT_JOURNAL_RETENTION,
    JournalEntry,
    PostgresToolCallJournal,
    SqliteToolCallJournal,
    ToolCallJournal,
)
from tooluse.calling._manager import (
    DEFAULT_MAX_ARGUMENT_CHARS,
    DEFAULT_MAX_IDENTICAL_CALLS,
    DEFAULT_MAX_IMAGE_BYTES,
    ToolCallingManager,
)
from tooluse.calling._rate_limits import (
    InMemoryRateLimitStore,
    PostgresRateLimitStore,
    RateLimit,
    RateLimitStore,
    RedisRateLimitStore,
    SqliteRateLimitStore,
)
from tooluse.calling._resolvers import (
    DelegatingToolCallbackResolver,
    StaticToolCallbackResolver,
    ToolCallbackResolver,
)
from tooluse.calling._result import ToolExecutionResult

__all__ = [
    "CONVERSATION_ID_KEY",
    "DEFAULT_AUDIT_RETENTION",
    "DEFAULT_JOURNAL_RETENTION",
    "DEFAULT_MAX_ARGUMENT_CHARS",
    "DEFAULT_MAX_IDENTICAL_CALLS",
    "DEFAULT_MAX_IMAGE_BYTES",
    "ROLES_KEY",
    "TENANT_ID_KEY",
    "USER_ID_KEY",
    "ApprovalPredicate",
    "Approve",
    "AuditRecord",
    "AuditSink",
    "Caller",
    "Decision",
    "DefaultToolExecutionExceptionProcessor",
    "DelegatingToolCallbackResolver",
    "Deny",
    "InMemoryRateLimitStore",
    "JournalEntry",
    "PendingToolCall",
    "PostgresAuditLog",
    "PostgresRateLimitStore",
    "PostgresToolCallJournal",
    "RateLimit",
    "RateLimitStore",
    "RedisRateLimitStore",
    "SqliteAuditLog",
    "SqliteRateLimitStore",
    "SqliteToolCallJournal",
    "StaticToolCallbackResolver",
    "ToolAccess",
    "ToolAccessPolicy",
    "ToolCallJournal",
    "ToolCallLimitExceeded",
    "ToolCallbackResolver",
    "ToolCallingManager",
    "ToolExecutionExceptionProcessor",
    "ToolExecutionResult",
    "ToolVisibility",
    "UnknownToolError",
    "WriteApproval",
]
