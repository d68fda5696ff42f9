"""A reasoning budget N (T2Mem paper A.3): the prompt asks for at most N reasoning tokens and
`max_tokens` is N + 64, the 64 reserved for the answer and its format (the limit covers the
whole response). Its instructions are versioned prompts (`budget/reasoning`, `budget/answer`)
appended to the request's last user message; a request without a budget is unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from tmem_core.llm import ChatMessage, Sampling
from tmem_core.prompts import load_prompt

ANSWER_ALLOWANCE = 64
"""Tokens past the reasoning budget for the answer and its formatting (paper A.3)."""
CHARS_PER_TOKEN = 3
"""Characters a token holds at worst: a schema's text limit of a budget of N tokens."""
ANSWER_MARKER = "Answer:"


@dataclass(frozen=True)
class ReasoningBudget:
    tokens: int

    def __post_init__(self) -> None:
        if self.tokens <= 0:
            raise ValueError(f"a reasoning budget must be positive, got {self.tokens}")

    @property
    def max_tokens(self) -> int:
        return self.tokens + ANSWER_ALLOWANCE

    def chars(self, share: float) -> int:
        """Characters of a text field holding `share` of the budget's reasoning."""
        return max(1, int(self.tokens * CHARS_PER_TOKEN * share))

    def sampling(self, base: Sampling) -> Sampling:
        return dataclasses.replace(base, max_tokens=self.max_tokens)

    def ask(self, messages: Sequence[ChatMessage], prompt: str = "budget/reasoning"
            ) -> tuple[ChatMessage, ...]:
        """`messages` with the budget's instruction after the last user message."""
        instruction = load_prompt(prompt).render(tokens=str(self.tokens),
                                                 limit=str(self.max_tokens))[-1]["content"]
        last = max(i for i, m in enumerate(messages) if m.role == "user")
        asked = ChatMessage("user", f"{messages[last].content}\n\n{instruction}")
        return (*messages[:last], asked, *messages[last + 1:])


def reasoning_budget(tokens: int | None) -> ReasoningBudget | None:
    return None if tokens is None else ReasoningBudget(tokens)


def final_answer(text: str) -> str:
    """The answer of a budgeted answer call: what follows its last `Answer:` marker, else
    its last non-empty line (a response cut before the marker)."""
    head, marker, tail = text.rpartition(ANSWER_MARKER)
    if marker and tail.strip():
        return tail.strip()
    lines = [line.strip() for line in (head if marker else text).splitlines() if line.strip()]
    return lines[-1] if lines else ""
