"""Retrieval-augmented generation: documents, vector stores, retrievers, augmenters, ingestion.

``SqliteVectorStore`` (a file, the embedded default), ``InMemoryVectorStore`` and
``PostgresVectorStore`` (pgvector, for several hosts) embed with
the bundled offline multilingual model unless given another :class:`EmbeddingModel` (such as
``tooluse.embedding.OpenAIEmbeddingModel`` for an OpenAI-compatible endpoint).
``RetrievalAugmentationAdvisor`` wires a retriever and an augmenter into a ``ChatClient``;
query transformers (``CompressionQueryTransformer`` for follow-up questions,
``RewriteQueryTransformer``) rewrite what it searches for.
"""

from tooluse.embedding import EmbeddingModel
from tooluse.rag._advisor import (
    DOCUMENT_CONTEXT,
    RETRIEVAL_QUERY,
    RetrievalAugmentationAdvisor,
)
from tooluse.rag._augmenter import (
    DEFAULT_EMPTY_CONTEXT_TEMPLATE,
    DEFAULT_PROMPT_TEMPLATE,
    ContextualQueryAugmenter,
    QueryAugmenter,
)
from tooluse.rag._document import Document, Query
from tooluse.rag._filter import Filter, compile_filter
from tooluse.rag._ingest import DEFAULT_PATTERNS, IngestReport, ingest_directory
from tooluse.rag._postgres_store import PostgresVectorStore
from tooluse.rag._readers import (
    MarkdownReader,
    TextReader,
    UndecodableFileError,
    markdown_sections,
)
from tooluse.rag._retrieval import (
    FILTER_EXPRESSION,
    DocumentReranker,
    DocumentRetriever,
    RerankingRetriever,
    VectorStoreRetriever,
)
from tooluse.rag._splitter import TextSplitter, estimate_tokens
from tooluse.rag._sqlite_store import SqliteVectorStore
from tooluse.rag._store import InMemoryVectorStore, VectorStore
from tooluse.rag._template import PromptTemplate
from tooluse.rag._transform import (
    DEFAULT_COMPRESSION_TEMPLATE,
    DEFAULT_REWRITE_TEMPLATE,
    CompressionQueryTransformer,
    QueryTransformer,
    QueryTransformError,
    RewriteQueryTransformer,
    format_history,
)

__all__ = [
    "DEFAULT_COMPRESSION_TEMPLATE",
    "DEFAULT_EMPTY_CONTEXT_TEMPLATE",
    "DEFAULT_PATTERNS",
    "DEFAULT_PROMPT_TEMPLATE",
    "DEFAULT_REWRITE_TEMPLATE",
    "DOCUMENT_CONTEXT",
    "FILTER_EXPRESSION",
    "RETRIEVAL_QUERY",
    "CompressionQueryTransformer",
    "ContextualQueryAugmenter",
    "Document",
    "DocumentReranker",
    "DocumentRetriever",
    "EmbeddingModel",
    "Filter",
    "InMemoryVectorStore",
    "IngestReport",
    "MarkdownReader",
    "PostgresVectorStore",
    "PromptTemplate",
    "Query",
    "QueryAugmenter",
    "QueryTransformError",
    "QueryTransformer",
    "RerankingRetriever",
    "RetrievalAugmentationAdvisor",
    "RewriteQueryTransformer",
    "SqliteVectorStore",
    "TextReader",
    "TextSplitter",
    "UndecodableFileError",
    "VectorStore",
    "VectorStoreRetriever",
    "compile_filter",
    "estimate_tokens",
    "format_history",
    "ingest_directory",
    "markdown_sections",
]
