"""The names of ``tooluse.calling``, one per line: type checkers read this stub instead of
``__init__.py``, and ``tooluse._lazy`` imports each from its module on first use (the stores
and ``sqlite3`` load only for the programs that use them)."""

from tooluse.calling._access import ROLES_KEY as ROLES_KEY
from tooluse.calling._access import Caller as Caller
from tooluse.calling._access import ToolAccess as ToolAccess
from tooluse.calling._access import ToolAccessPolicy as ToolAccessPolicy
from tooluse.calling._access import ToolVisibility as ToolVisibility
from tooluse.calling._approval import ApprovalPredicate as ApprovalPredicate
from tooluse.calling._approval import Approve as Approve
from tooluse.calling._approval import Decision as Decision
from tooluse.calling._approval import Deny as Deny
from tooluse.calling._approval import PendingToolCall as PendingToolCall
from tooluse.calling._approval import WriteApproval as WriteApproval
from tooluse.calling._audit import CONVERSATION_ID_KEY as CONVERSATION_ID_KEY
from tooluse.calling._audit import DEFAULT_AUDIT_RETENTION as DEFAULT_AUDIT_RETENTION
from tooluse.calling._audit import TENANT_ID_KEY as TENANT_ID_KEY
from tooluse.calling._audit import USER_ID_KEY as USER_ID_KEY
from tooluse.calling._audit import AuditRecord as AuditRecord
from tooluse.calling._audit import AuditSink as AuditSink
from tooluse.calling._audit_stores import PostgresAuditLog as PostgresAuditLog
from tooluse.calling._audit_stores import SqliteAuditLog as SqliteAuditLog
from tooluse.calling._exceptions import (
    DefaultToolExecutionExceptionProcessor as DefaultToolExecutionExceptionProcessor,
)
from tooluse.calling._exceptions import ToolCallLimitExceeded as ToolCallLimitExceeded
from tooluse.calling._exceptions import (
    ToolExecutionExceptionProcessor as ToolExecutionExceptionProcessor,
)
from tooluse.calling._exceptions import UnknownToolError as UnknownToolError
from tooluse.calling._journal import DEFAULT_JOURNAL_RETENTION as DEFAULT_JOURNAL_RETENTION
from tooluse.calling._journal import JournalEntry as JournalEntry
from tooluse.calling._journal import ToolCallJournal as ToolCallJournal
from tooluse.calling._journal_stores import PostgresToolCallJournal as PostgresToolCallJournal
from tooluse.calling._journal_stores import SqliteToolCallJournal as SqliteToolCallJournal
from tooluse.calling._manager import DEFAULT_MAX_ARGUMENT_CHARS as DEFAULT_MAX_ARGUMENT_CHARS
from tooluse.calling._manager import DEFAULT_MAX_IDENTICAL_CALLS as DEFAULT_MAX_IDENTICAL_CALLS
from tooluse.calling._manager import DEFAULT_MAX_IMAGE_BYTES as DEFAULT_MAX_IMAGE_BYTES
from tooluse.calling._manager import ToolCallingManager as ToolCallingManager
from tooluse.calling._rate_limit_stores import PostgresRateLimitStore as PostgresRateLimitStore
from tooluse.calling._rate_limit_stores import RedisRateLimitStore as RedisRateLimitStore
from tooluse.calling._rate_limit_stores import SqliteRateLimitStore as SqliteRateLimitStore
from tooluse.calling._rate_limits import InMemoryRateLimitStore as InMemoryRateLimitStore
from tooluse.calling._rate_limits import RateLimit as RateLimit
from tooluse.calling._rate_limits import RateLimitStore as RateLimitStore
from tooluse.calling._resolvers import (
    DelegatingToolCallbackResolver as DelegatingToolCallbackResolver,
)
from tooluse.calling._resolvers import StaticToolCallbackResolver as StaticToolCallbackResolver
from tooluse.calling._resolvers import ToolCallbackResolver as ToolCallbackResolver
from tooluse.calling._result import ToolExecutionResult as ToolExecutionResult
from tooluse.calling._usage import report_usage as report_usage
