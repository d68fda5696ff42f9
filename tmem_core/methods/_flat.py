"""Evidence-only methods as context methods: their ranked messages shown as a flat list."""

from __future__ import annotations

from tmem_core.llm._tokens import TokenCounter
from tmem_core.methods._base import Evidence, EvidenceMethod
from tmem_core.methods._context import LLM, Context, ContextMethod, render_flat
from tmem_core.methods._registry import MethodEnv
from tmem_core.schema import Question


class FlatContextMethod:
    """An evidence method's Top-k messages (the grid's `top_k`), shown as a ranked flat list
    within the token budget."""

    def __init__(self, method: EvidenceMethod, env: MethodEnv) -> None:
        self.method, self.env = method, env

    @property
    def name(self) -> str:
        return self.method.name

    def retrieve(self, question: Question) -> Evidence:
        return self.method(question, self.env.top_k)

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  count_tokens: TokenCounter) -> Context:
        conv = self.env.conversations[question.conv_id]
        messages = [conv.messages[conv.position[i]] for i in evidence.ids]
        return render_flat(question, self.name, messages, self.env.budget, count_tokens)


def ranked(method: EvidenceMethod, env: MethodEnv) -> ContextMethod:
    """`method` as a context method of the run's `env`."""
    return FlatContextMethod(method, env)
