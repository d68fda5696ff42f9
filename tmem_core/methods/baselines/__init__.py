"""Baseline evidence builders: full context, BM25, dense, hybrid, BM25 (Expand), naive RAG,
and the agentic-search baseline Search-o1."""

from tmem_core.methods.baselines._naive_rag import NaiveRag, chunk_messages
from tmem_core.methods.baselines._ranked import Bm25Expand, FullContext, RankedRetrieval
from tmem_core.methods.baselines._search_o1 import SearchO1, SearchO1Params, show_trace

__all__ = ["Bm25Expand", "FullContext", "NaiveRag", "RankedRetrieval", "SearchO1",
           "SearchO1Params", "chunk_messages", "show_trace"]
