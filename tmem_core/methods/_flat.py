"""Evidence-only methods as context methods: their ranked messages shown as a flat list."""

from __future__ import annotations

from tmem_core.llm import TokenCounter
from tmem_core.methods._base import Evidence, EvidenceMethod
from tmem_core.methods._context import LLM, Context, ContextMethod, render_flat
from tmem_core.methods._registry import MethodEnv
from tmem_core.retrieval import Budget
from tmem_core.schema import Question


class FlatContextMethod:
    """An evidence method whose selected messages are shown as a ranked flat list."""

    def __init__(self, method: EvidenceMethod, env: MethodEnv, budget: Budget) -> None:
        self.method, self.env, self.budget = method, env, budget

    @property
    def name(self) -> str:
        return self.method.name

    def retrieve(self, question: Question) -> Evidence:
        return self.method(question, self.budget)

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  budget_tokens: int, count_tokens: TokenCounter) -> Context:
        conv = self.env.conversations[question.conv_id]
        messages = [conv.messages[conv.position[i]] for i in evidence.ids]
        return render_flat(question, self.name, messages, budget_tokens, count_tokens)


def ranked(method: EvidenceMethod, env: MethodEnv) -> ContextMethod:
    """`method`'s Top-k messages (the grid's `top_k`), rendered within the token budget."""
    return FlatContextMethod(method, env, Budget(messages=env.top_k))
