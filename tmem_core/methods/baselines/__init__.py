"""Baseline evidence builders: full context, BM25, dense, hybrid, BM25 (Expand), naive RAG,
and the agentic-search baseline Search-o1."""

from tmem_core.methods.baselines._ranked import RankedRetrieval

__all__ = [
    "RankedRetrieval",
]
