"""Evidence budgets: a message count (Top-k), a token count, or both."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tmem_core.retrieval._tokens import TokenCounter, cl100k_tokens
from tmem_core.schema import Message

DEFAULT_TOKENS = 8192


@dataclass(frozen=True)
class Budget:
    """At most `messages` messages and at most `tokens` tokens of message text (None: no limit).

    Tokens are counted on each message's text with `count_tokens` (default: cl100k).
    """

    messages: int | None = None
    tokens: int | None = None
    count_tokens: TokenCounter = cl100k_tokens

    @classmethod
    def top_k(cls, k: int) -> Budget:
        return cls(messages=k)

    def take(self, ranked: Iterable[Message]) -> list[Message]:
        """The longest prefix of `ranked` within the budget."""
        taken: list[Message] = []
        used = 0
        for message in ranked:
            if self.messages is not None and len(taken) >= self.messages:
                break
            if self.tokens is not None:
                used += self.count_tokens(message.text)
                if used > self.tokens:
                    break
            taken.append(message)
        return taken

    def fits(self, count: int, tokens: int) -> bool:
        """Whether `count` messages holding `tokens` tokens are within the budget."""
        return ((self.messages is None or count <= self.messages)
                and (self.tokens is None or tokens <= self.tokens))
