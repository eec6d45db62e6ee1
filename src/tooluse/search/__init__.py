"""Tool search: let the model find the tools it needs among hundreds or thousands.

Indexes (``RegexToolIndex``, ``BM25ToolIndex``, ``VectorToolIndex`` and the default
``HybridToolIndex``), the meta-tool ``toolSearchTool`` (:class:`ToolSearchTool`) and
:class:`ToolSearchToolCallingAdvisor`, which offers the model only that tool and what its
searches found. See ``docs/tool-search.md``.
"""

from tooluse.search._advisor import (
    DEFAULT_SYSTEM_MESSAGE_SUFFIX,
    ToolSearchToolCallingAdvisor,
    mcp_server_category,
    tool_fingerprint,
)
from tooluse.search._bm25 import BM25ToolIndex, FieldBoosts
from tooluse.search._cousage import ToolCoUsage
from tooluse.search._eviction import (
    AlwaysEvictStrategy,
    CompositeEvictionStrategy,
    EvictionStrategy,
    LruEvictionStrategy,
    NeverEvictStrategy,
    TtlEvictionStrategy,
)
from tooluse.search._hybrid import Fusion, HybridToolIndex
from tooluse.search._regex import RegexToolIndex, query_to_pattern
from tooluse.search._sessions import DEFAULT_MAX_RESULTS, SessionToolIndex, ToolCatalogue
from tooluse.search._tool import SESSION_ID_CONTEXT_KEY, TOOL_SEARCH_TOOL_NAME, ToolSearchTool
from tooluse.search._translate import QueryTranslator
from tooluse.search._types import (
    InlineSearchToolIndex,
    ReplaceableToolIndex,
    ToolIndex,
    ToolReference,
    ToolSearchRequest,
    ToolSearchResponse,
)
from tooluse.search._vector import VectorToolIndex, compact_embedding_text, embedding_text

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "DEFAULT_SYSTEM_MESSAGE_SUFFIX",
    "SESSION_ID_CONTEXT_KEY",
    "TOOL_SEARCH_TOOL_NAME",
    "AlwaysEvictStrategy",
    "BM25ToolIndex",
    "CompositeEvictionStrategy",
    "EvictionStrategy",
    "FieldBoosts",
    "Fusion",
    "HybridToolIndex",
    "InlineSearchToolIndex",
    "LruEvictionStrategy",
    "NeverEvictStrategy",
    "QueryTranslator",
    "RegexToolIndex",
    "ReplaceableToolIndex",
    "SessionToolIndex",
    "ToolCatalogue",
    "ToolCoUsage",
    "ToolIndex",
    "ToolReference",
    "ToolSearchRequest",
    "ToolSearchResponse",
    "ToolSearchTool",
    "ToolSearchToolCallingAdvisor",
    "TtlEvictionStrategy",
    "VectorToolIndex",
    "compact_embedding_text",
    "embedding_text",
    "mcp_server_category",
    "query_to_pattern",
    "tool_fingerprint",
]
