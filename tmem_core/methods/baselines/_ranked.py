"""Ranked retrieval baselines: full context, BM25, dense, hybrid (RRF), BM25 (Expand).

Version 2 of the plain ones (not `*_meta`, not full context): the query carries the asking
user, as every method's does (`query_text`); `*_meta` index messages with their metadata."""

from __future__ import annotations

from dataclasses import dataclass

from tmem_core.methods._base import Evidence, evidence
from tmem_core.methods._context import ContextMethod
from tmem_core.methods._flat import FlatContextMethod, ranked
from tmem_core.methods._registry import MethodEnv, NoParams, method
from tmem_core.retrieval import Budget, IndexStore, Kind, query_text
from tmem_core.schema import Question


@dataclass(frozen=True)
class FullContext:
    """The most recent messages of the conversation, newest first, up to the budget."""

    store: IndexStore
    name: str = "full_context"

    def __call__(self, question: Question, budget: Budget) -> Evidence:
        messages = self.store.conversations[question.conv_id].messages
        taken = budget.take(reversed(messages))
        return evidence(self.name, question, [m.msg_id for m in taken])


@dataclass(frozen=True)
class RankedRetrieval:
    """Messages in the order of one retriever (`bm25`, `dense` or `hybrid`), up to the budget."""

    store: IndexStore
    kind: Kind
    metadata: bool = False
    name: str = ""  # default: the kind, with "_meta" under metadata expansion

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.kind + ("_meta" if self.metadata else ""))

    def __call__(self, question: Question, budget: Budget) -> Evidence:
        index = self.store.index(question.conv_id, self.metadata)
        depth = budget.messages or len(index.conversation)
        ranked = index.ranking(query_text(question), self.kind, depth)
        taken = budget.take(index.conversation.messages[p] for p in ranked)
        return evidence(self.name, question, [m.msg_id for m in taken])


@dataclass(frozen=True)
class Bm25Expand:
    """BM25 anchors, each followed by its `window` neighbours on either side, up to the budget.

    Anchors are taken in rank order; an anchor adds its block (neighbours in conversation
    order, already-taken messages skipped) until the budget is full.
    """

    store: IndexStore
    window: int = 1
    metadata: bool = False
    name: str = "bm25_expand"

    def __call__(self, question: Question, budget: Budget) -> Evidence:
        index = self.store.index(question.conv_id, self.metadata)
        size = len(index.conversation)
        ranked = index.ranking(query_text(question), "bm25", size)
        order: dict[int, None] = {}
        for anchor in ranked:
            block = range(max(0, anchor - self.window), min(size, anchor + self.window + 1))
            order.update((p, None) for p in (anchor, *block))
            if budget.messages is not None and len(order) >= budget.messages:
                break
        taken = budget.take(index.conversation.messages[p] for p in order)
        return evidence(self.name, question, [m.msg_id for m in taken])


@method("full_context", description="the most recent messages up to the token budget")
def _full_context(env: MethodEnv, _params: NoParams, _name: str) -> ContextMethod:
    return FlatContextMethod(FullContext(env.index_store), env, Budget(tokens=env.budget_tokens))


@method("bm25", description="BM25 over messages, Top-k", ranked=True, version=2)
def _bm25(env: MethodEnv, _params: NoParams, _name: str) -> ContextMethod:
    return ranked(RankedRetrieval(env.index_store, "bm25"), env)


@method("dense", description="MiniLM + faiss over messages, Top-k", ranked=True,
        version=2)
def _dense(env: MethodEnv, _params: NoParams, _name: str) -> ContextMethod:
    return ranked(RankedRetrieval(env.index_store, "dense"), env)


@method("hybrid", description="BM25 and dense fused by reciprocal rank, Top-k", ranked=True,
        version=2)
def _hybrid(env: MethodEnv, _params: NoParams, _name: str) -> ContextMethod:
    return ranked(RankedRetrieval(env.index_store, "hybrid"), env)


@method("bm25_meta", description="BM25 over metadata-expanded messages, Top-k",
        ranked=True)
def _bm25_meta(env: MethodEnv, _params: NoParams, _name: str) -> ContextMethod:
    return ranked(RankedRetrieval(env.index_store, "bm25", metadata=True), env)


@method("dense_meta", description="dense over metadata-expanded messages, Top-k",
        ranked=True)
def _dense_meta(env: MethodEnv, _params: NoParams, _name: str) -> ContextMethod:
    return ranked(RankedRetrieval(env.index_store, "dense", metadata=True), env)


@method("hybrid_meta", description="hybrid over metadata-expanded messages, Top-k",
        ranked=True)
def _hybrid_meta(env: MethodEnv, _params: NoParams, _name: str) -> ContextMethod:
    return ranked(RankedRetrieval(env.index_store, "hybrid", metadata=True), env)


@dataclass(frozen=True)
class ExpandParams:
    window: int = 1  # neighbours on either side of each anchor

    def __post_init__(self) -> None:
        if self.window < 0:
            raise ValueError(f"window must be 0 or more, got {self.window}")


@method("bm25_expand", config=ExpandParams, ranked=True, version=2,
        description="BM25 anchors with their neighbours, Top-k messages")
def _bm25_expand(env: MethodEnv, params: ExpandParams, _name: str) -> ContextMethod:
    return ranked(Bm25Expand(env.index_store, window=params.window), env)
