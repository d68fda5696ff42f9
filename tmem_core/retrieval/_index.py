"""Per-conversation lexical and dense indexes, with optional metadata expansion."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from tmem_core.retrieval._bm25 import Bm25Index, Bm25Params
from tmem_core.retrieval._conversation import Conversation
from tmem_core.retrieval._dense import DenseIndex
from tmem_core.retrieval._embed import Embedder, EmbeddingStore, MiniLMEmbedder, Vectors
from tmem_core.retrieval._fusion import RRF_K, rrf
from tmem_core.retrieval._index_keys import content_key, default_index_dir
from tmem_core.retrieval._text import METADATA_FIELDS, document_text
from tmem_core.schema import Message

Kind = Literal["bm25", "dense", "hybrid"]
KINDS: tuple[Kind, ...] = ("bm25", "dense", "hybrid")


@dataclass(frozen=True)
class IndexConfig:
    """How documents are indexed.

    With metadata expansion, BM25 indexes `header: text`; the dense vector of a message is
    `normalise(text + metadata_weight * metadata)`, where the metadata vector is the normalised
    sum of its field vectors (`"topic: ..."`, `"author: ..."`): text and field embeddings are
    cached separately, so metadata on/off and other conversations reuse them.
    """

    bm25: Bm25Params = field(default_factory=Bm25Params)
    metadata_weight: float = 0.5
    fusion_depth: int = 200  # depth of each ranked list fused by RRF
    rrf_k: int = RRF_K


@dataclass
class BuildStats:
    built: int = 0  # indexes built by this process
    loaded: int = 0  # indexes found in the cache


class ConversationIndex:
    """BM25 + faiss over one conversation's messages; results are message positions."""

    def __init__(self, conversation: Conversation, metadata: bool, store: EmbeddingStore,
                 root: Path, config: IndexConfig, stats: BuildStats) -> None:
        self.conversation, self.metadata, self.config = conversation, metadata, config
        self._store = store
        texts = [document_text(m, metadata) for m in conversation.messages]
        self.bm25, built_lexical = Bm25Index.cached(texts, root, config.bm25)
        weight = config.metadata_weight if metadata else 0.0
        key = content_key(["faiss-v1", store.embedder.model_id, str(weight), *texts])
        self.dense, built_dense = DenseIndex.cached(
            key, lambda: message_vectors(conversation.messages, store, weight), root)
        for built in (built_lexical, built_dense):
            stats.built += built
            stats.loaded += not built

    def query_vector(self, query: str) -> np.ndarray:
        return np.asarray(self._store.embed([query], persist=False)[0], dtype=np.float32)

    def bm25_scores(self, query: str) -> np.ndarray:
        return self.bm25.scores(query)

    def dense_scores(self, query: str) -> np.ndarray:
        return self.dense.scores(self.query_vector(query))

    def ranking(self, query: str, kind: Kind, depth: int) -> list[int]:
        """Positions of the best `depth` messages for `query`, best first."""
        if kind == "bm25":
            scores = self.bm25_scores(query)
            top = np.argsort(-scores, kind="stable")[:depth]
            return [int(p) for p in top if scores[p] > 0]
        if kind == "dense":
            return self.dense.search(self.query_vector(query), depth)
        pool = max(depth, self.config.fusion_depth)
        fused = rrf([self.ranking(query, "bm25", pool), self.ranking(query, "dense", pool)],
                    self.config.rrf_k)
        return fused[:depth]


def message_vectors(messages: tuple[Message, ...], store: EmbeddingStore,
                    metadata_weight: float) -> Vectors:
    """Text vectors, blended with metadata vectors when `metadata_weight` > 0."""
    vectors = store.embed([m.text for m in messages])
    if metadata_weight <= 0 or not messages:
        return vectors
    fields = [[f"{name}: {v}" for name in METADATA_FIELDS if (v := getattr(m, name))]
              for m in messages]
    unique = sorted({f for fs in fields for f in fs})
    if not unique:
        return vectors
    lookup = dict(zip(unique, store.embed(unique), strict=True))
    meta = np.stack([sum((lookup[f] for f in fs), np.zeros(vectors.shape[1], np.float32))
                     for fs in fields])
    blended = vectors + metadata_weight * _normalise(meta)
    return _normalise(blended)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.asarray(vectors / np.where(norms == 0, 1.0, norms), dtype=np.float32)


@dataclass
class IndexStore:
    """Indexes of a set of conversations, built lazily and shared by every method of a run."""

    conversations: Mapping[str, Conversation]
    embedder: Embedder = field(default_factory=MiniLMEmbedder)
    root: Path = field(default_factory=default_index_dir)
    config: IndexConfig = field(default_factory=IndexConfig)
    stats: BuildStats = field(default_factory=BuildStats)

    def __post_init__(self) -> None:
        self.embeddings = EmbeddingStore(self.embedder, self.root)
        self._indexes: dict[tuple[str, bool], ConversationIndex] = {}

    def index(self, conv_id: str, metadata: bool = False) -> ConversationIndex:
        key = (conv_id, metadata)
        if key not in self._indexes:
            self._indexes[key] = ConversationIndex(self.conversations[conv_id], metadata,
                                                   self.embeddings, self.root, self.config,
                                                   self.stats)
        return self._indexes[key]
