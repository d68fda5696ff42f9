"""A token budget over message texts (a method's `budget`; Top-k is a plain cut)."""

from __future__ import annotations

from collections.abc import Iterable

from tmem_core.retrieval._tokens import TokenCounter, cl100k_tokens
from tmem_core.schema import Message


def within_tokens(ranked: Iterable[Message], budget: int,
                  count_tokens: TokenCounter = cl100k_tokens) -> list[Message]:
    """The longest prefix of `ranked` whose texts hold at most `budget` tokens."""
    taken: list[Message] = []
    used = 0
    for message in ranked:
        used += count_tokens(message.text)
        if used > budget:
            break
        taken.append(message)
    return taken
