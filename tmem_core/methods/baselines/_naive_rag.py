"""Naive RAG: dense retrieval over fixed-size chunks of consecutive messages."""

from __future__ import annotations

from dataclasses import dataclass, field

from tmem_core import check_range
from tmem_core.methods._base import Evidence, evidence
from tmem_core.methods._context import ContextMethod
from tmem_core.methods._flat import ranked
from tmem_core.methods._registry import MethodEnv, method
from tmem_core.retrieval import Conversation, DenseIndex, IndexStore, content_key, query_text
from tmem_core.schema import Message, Question


@dataclass
class NaiveRag:
    """Chunks of `chunk_size` consecutive messages, ranked by MiniLM similarity to the query
    (the question after its asking user: version 2; version 1 embedded the question alone).

    Whole chunks are taken in rank order while they hold at most `top_k` messages (a chunk
    that would exceed it ends the selection). A message counts as selected when its chunk is.
    """

    store: IndexStore
    chunk_size: int = 4
    name: str = "naive_rag"
    _indexes: dict[str, tuple[list[list[Message]], DenseIndex]] = field(
        default_factory=dict, repr=False)

    def __call__(self, question: Question, top_k: int) -> Evidence:
        chunks, index = self._index(question.conv_id)
        query = self.store.embeddings.embed([query_text(question)], persist=False)[0]
        taken: list[Message] = []
        for c in index.search(query, len(chunks)):
            if len(taken) + len(chunks[c]) > top_k:
                break
            taken += chunks[c]
        return evidence(self.name, question, [m.msg_id for m in taken])

    def _index(self, conv_id: str) -> tuple[list[list[Message]], DenseIndex]:
        if conv_id not in self._indexes:
            chunks = chunk_messages(self.store.conversations[conv_id], self.chunk_size)
            texts = [chunk_text(c) for c in chunks]
            key = content_key(["chunks-v1", self.store.embedder.model_id, *texts])
            index, _ = DenseIndex.cached(key, lambda: self.store.embeddings.embed(texts),
                                         self.store.root)
            self._indexes[conv_id] = (chunks, index)
        return self._indexes[conv_id]


def chunk_messages(conversation: Conversation, size: int) -> list[list[Message]]:
    messages = list(conversation.messages)
    return [messages[i:i + size] for i in range(0, len(messages), size)]


def chunk_text(chunk: list[Message]) -> str:
    return "\n".join(f"{m.author}: {m.text}" if m.author else m.text for m in chunk)


@dataclass(frozen=True)
class NaiveRagParams:
    chunk_size: int = 4  # consecutive messages per chunk

    def __post_init__(self) -> None:
        check_range("chunk_size", self.chunk_size)


@method("naive_rag", config=NaiveRagParams, ranked=True, version=2,
        axes={"reasoning_budget": None},  # no LLM of its own: the answer reasons
        description="dense retrieval over fixed-size chunks, whole chunks up to Top-k messages")
def _naive_rag(env: MethodEnv, params: NaiveRagParams, _name: str) -> ContextMethod:
    return ranked(NaiveRag(env.index_store, chunk_size=params.chunk_size), env)
