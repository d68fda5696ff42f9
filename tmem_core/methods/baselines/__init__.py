"""Baseline evidence builders: full context, BM25, dense, hybrid, BM25 (Expand), naive RAG."""

from tmem_core.methods.baselines._naive_rag import NaiveRag, chunk_messages
from tmem_core.methods.baselines._ranked import Bm25Expand, FullContext, RankedRetrieval

__all__ = ["Bm25Expand", "FullContext", "NaiveRag", "RankedRetrieval", "chunk_messages"]
