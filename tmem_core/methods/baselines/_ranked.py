"""Ranked retrieval baselines: recent context, BM25, dense, hybrid (RRF), BM25 (Expand).

Version 2 of the ranked family (one factory, so its `*_meta` variants too, whose query
already named the asker): the query carries the asking user, as every method's does
(`query_text`); `*_meta` index messages with their metadata."""

from __future__ import annotations

from dataclasses import dataclass

from tmem_core import check_range
from tmem_core.methods._base import Evidence, evidence
from tmem_core.methods._context import ContextMethod
from tmem_core.methods._flat import ranked
from tmem_core.methods._registry import MethodEnv, NoParams, method
from tmem_core.retrieval import IndexStore, Kind, query_text, within_tokens
from tmem_core.schema import Question


@dataclass(frozen=True)
class RecentContext:
    """The most recent messages of the conversation, newest first, whose texts fit `budget`
    tokens (Top-k does not apply). Named for what it keeps: a LoCoMo conversation is several
    times a budget of 8,192 tokens, so it holds the newest 20 to 40% of one, not the whole
    (the name `full_context` it had is refused with this one's)."""

    store: IndexStore
    budget: int
    name: str = "recent_context"

    def __call__(self, question: Question, top_k: int) -> Evidence:
        messages = self.store.conversations[question.conv_id].messages
        taken = within_tokens(reversed(messages), self.budget)
        return evidence(self.name, question, [m.msg_id for m in taken])


@dataclass(frozen=True)
class RankedRetrieval:
    """The `top_k` best messages of one retriever (`bm25`, `dense` or `hybrid`)."""

    store: IndexStore
    kind: Kind
    metadata: bool = False
    name: str = ""  # default: the kind, with "_meta" under metadata expansion

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.kind + ("_meta" if self.metadata else ""))

    def __call__(self, question: Question, top_k: int) -> Evidence:
        index = self.store.index(question.conv_id, self.metadata)
        ranked = index.ranking(query_text(question), self.kind, top_k)
        return evidence(self.name, question,
                        [index.conversation.messages[p].msg_id for p in ranked[:top_k]])


@dataclass(frozen=True)
class Bm25Expand:
    """BM25 anchors, each followed by its `window` neighbours on either side, `top_k` messages.

    Anchors are taken in rank order; an anchor adds its block (neighbours in conversation
    order, already-taken messages skipped) until `top_k` messages are taken.
    """

    store: IndexStore
    window: int = 1
    metadata: bool = False
    name: str = "bm25_expand"

    def __call__(self, question: Question, top_k: int) -> Evidence:
        index = self.store.index(question.conv_id, self.metadata)
        size = len(index.conversation)
        ranked = index.ranking(query_text(question), "bm25", size)
        order: dict[int, None] = {}
        for anchor in ranked:
            block = range(max(0, anchor - self.window), min(size, anchor + self.window + 1))
            order.update((p, None) for p in (anchor, *block))
            if len(order) >= top_k:
                break
        return evidence(self.name, question,
                        [index.conversation.messages[p].msg_id for p in list(order)[:top_k]])


@method("recent_context", llm_free=True,
        description="the most recent messages up to the token budget")
def _recent_context(env: MethodEnv, _params: NoParams, _name: str) -> ContextMethod:
    return ranked(RecentContext(env.index_store, env.budget), env)


@dataclass(frozen=True)
class RankedParams:
    kind: Kind = "bm25"  # the retriever: bm25, dense (MiniLM + faiss) or hybrid (RRF of both)
    metadata: bool = False  # metadata-expanded messages


@method("bm25", config=RankedParams, ranked=True, version=2, variants={
    "dense": {"kind": "dense"},
    "hybrid": {"kind": "hybrid"},
    "bm25_meta": {"metadata": True},
    "dense_meta": {"kind": "dense", "metadata": True},
    "hybrid_meta": {"kind": "hybrid", "metadata": True},
}, description="one retriever over messages (BM25, dense, or both fused by reciprocal rank), "
               "optionally metadata-expanded, Top-k")
def _ranked(env: MethodEnv, params: RankedParams, name: str) -> ContextMethod:
    return ranked(RankedRetrieval(env.index_store, params.kind, params.metadata, name), env)


@dataclass(frozen=True)
class ExpandParams:
    window: int = 1  # neighbours on either side of each anchor

    def __post_init__(self) -> None:
        check_range("window", self.window, 0)


@method("bm25_expand", config=ExpandParams, ranked=True, version=2,
        description="BM25 anchors with their neighbours, Top-k messages")
def _bm25_expand(env: MethodEnv, params: ExpandParams, _name: str) -> ContextMethod:
    return ranked(Bm25Expand(env.index_store, window=params.window), env)
