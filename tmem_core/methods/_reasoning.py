"""A reasoning budget N (T2Mem paper A.3): the prompt asks for at most N reasoning tokens and
`max_tokens` is N + 64, the 64 reserved for the answer and its format (the limit covers the
whole response). Its instructions are versioned prompts (`budget/reasoning`, `budget/answer`)
appended to the request's last user message; a request without a budget is unchanged.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from tmem_core import check_range
from tmem_core.llm import Sampling
from tmem_core.llm._types import ChatMessage
from tmem_core.prompts import load_prompt

ANSWER_ALLOWANCE = 64
"""Tokens past the reasoning budget for the answer and its formatting (paper A.3)."""
CHARS_PER_TOKEN = 3
"""Characters a token holds at worst: a schema's text limit of a budget of N tokens."""
ANSWER_MARKER = "Answer:"
CHAIN: Final[Literal["chain"]] = "chain"
"""The kind of a context that holds its own answer (Search-o1's reasoning sequence): the
answer stage takes its last `\\boxed{}` (`boxed_answer`) instead of asking the answer prompt."""
_BOX = "\\boxed{"
_TEXT = re.compile(r"\\text\{(.*)\}")


@dataclass(frozen=True)
class ReasoningBudget:
    tokens: int

    def __post_init__(self) -> None:
        check_range("a reasoning budget", self.tokens)

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


@dataclass(frozen=True)
class ReasonedSteps:
    """Parameters of a method whose LLM steps reason under the grid's `reasoning_budget` N:
    each step's prompt asks for at most N reasoning tokens and its output is cut at N + 64
    tokens; without one (None) a step's output is cut at `step_max_tokens` (T2Mem paper
    A.3: answers up to 1,024 tokens)."""

    step_max_tokens: int = 1024
    reasoning_budget: int | None = None

    def __post_init__(self) -> None:
        reasoning_budget(self.reasoning_budget)  # positive when given
        check_range("step_max_tokens", self.step_max_tokens)

    @property
    def reasoning(self) -> ReasoningBudget | None:
        """The reasoning budget of the steps, if the grid sets one."""
        return reasoning_budget(self.reasoning_budget)

    @property
    def step_tokens(self) -> int:
        """`max_tokens` of a step: N + 64 under a reasoning budget, else `step_max_tokens`."""
        budget = self.reasoning
        return self.step_max_tokens if budget is None else budget.max_tokens


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


def boxed_answer(text: str) -> str:
    """The last `\\boxed{...}` of `text` read to its matching brace, its `\\text{}`
    unwrapped and parentheses stripped (Search-o1's `extract_answer`, QA mode, whose greedy
    pattern would read two boxes on one line as one); "" when there is none."""
    start = text.rfind(_BOX)
    while start >= 0:
        inner = _braced(text, start + len(_BOX))
        if inner is not None:
            unwrapped = _TEXT.findall(inner)
            return str(unwrapped[-1] if unwrapped else inner).strip("()")
        start = text.rfind(_BOX, 0, start)
    return ""


def _braced(text: str, start: int) -> str | None:
    """The text from `start` to the brace that closes the one before it (None: unclosed)."""
    depth = 1
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            return text[start:end]
    return None
