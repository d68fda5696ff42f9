"""Retrieval: per-conversation BM25 and dense (faiss) indexes, cached on disk, and budgets.

Indexes are keyed by content hash, model and parameters, built once per cache and shared by
every method and run; embeddings are cached per text. `IndexStore` is the entry point;
`EmbedderConfig` says which sentence embedder it uses.
"""

from tmem_core._cache_dir import CACHE_ENV, cache_root
from tmem_core.retrieval._bm25 import Bm25Index
from tmem_core.retrieval._budget import within_tokens
from tmem_core.retrieval._conversation import Conversation, conversations_from_table
from tmem_core.retrieval._dense import DenseIndex
from tmem_core.retrieval._embed import EmbeddingStore, MiniLMEmbedder
from tmem_core.retrieval._embedders import EmbedderConfig
from tmem_core.retrieval._index import ConversationIndex, IndexStore, Kind
from tmem_core.retrieval._index_keys import content_key
from tmem_core.retrieval._text import document_text, lexical_tokens, query_text
from tmem_core.retrieval._tokens import cl100k_tokens

__all__ = [
    "CACHE_ENV",
    "Bm25Index",
    "Conversation",
    "ConversationIndex",
    "DenseIndex",
    "EmbedderConfig",
    "EmbeddingStore",
    "IndexStore",
    "Kind",
    "MiniLMEmbedder",
    "cache_root",
    "cl100k_tokens",
    "content_key",
    "conversations_from_table",
    "document_text",
    "lexical_tokens",
    "query_text",
    "within_tokens",
]
