"""Retrieval: per-conversation BM25 and dense (faiss) indexes, cached on disk, and budgets.

Indexes are keyed by content hash, model and parameters, built once per cache and shared by
every method and run; embeddings are cached per text. `IndexStore` is the entry point.
"""

from tmem_core._cache_dir import CACHE_ENV, build_once, cache_root
from tmem_core.retrieval._bm25 import Bm25Index, Bm25Params
from tmem_core.retrieval._budget import within_tokens
from tmem_core.retrieval._conversation import (
    Conversation,
    conversations_from_table,
    group_conversations,
)
from tmem_core.retrieval._dense import DenseIndex
from tmem_core.retrieval._embed import (
    Embedder,
    EmbeddingStore,
    HashEmbedder,
    MiniLMEmbedder,
    text_key,
)
from tmem_core.retrieval._fusion import RRF_K, rrf
from tmem_core.retrieval._index import (
    KINDS,
    BuildStats,
    ConversationIndex,
    IndexConfig,
    IndexStore,
    Kind,
    message_vectors,
)
from tmem_core.retrieval._index_keys import content_key, default_index_dir
from tmem_core.retrieval._text import (
    METADATA_FIELDS,
    document_text,
    lexical_tokens,
    metadata_header,
    query_text,
)
from tmem_core.retrieval._tokens import TokenCounter, cl100k_tokens

__all__ = [
    "CACHE_ENV",
    "KINDS",
    "METADATA_FIELDS",
    "RRF_K",
    "Bm25Index",
    "Bm25Params",
    "BuildStats",
    "Conversation",
    "ConversationIndex",
    "DenseIndex",
    "Embedder",
    "EmbeddingStore",
    "HashEmbedder",
    "IndexConfig",
    "IndexStore",
    "Kind",
    "MiniLMEmbedder",
    "TokenCounter",
    "build_once",
    "cache_root",
    "cl100k_tokens",
    "content_key",
    "conversations_from_table",
    "default_index_dir",
    "document_text",
    "group_conversations",
    "lexical_tokens",
    "message_vectors",
    "metadata_header",
    "query_text",
    "rrf",
    "text_key",
    "within_tokens",
]
