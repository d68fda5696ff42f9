"""Baseline evidence builders: full context, BM25, dense, hybrid, BM25 (Expand), naive RAG,
and the agentic-search baseline Search-o1."""


__all__ = [
]
