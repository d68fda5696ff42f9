"""A test method that leaks: BM25, with one gold evidence id planted in one question's context
(`TMEM_PLANTED=<qid>=<id>`, set by the test that knows the gold), for the leak guard to catch."""

from __future__ import annotations

import dataclasses
import os

from tmem_core.llm._tokens import TokenCounter
from tmem_core.methods import LLM, Context, ContextMethod, Evidence, MethodEnv, method, ranked
from tmem_core.methods.baselines._ranked import RankedRetrieval
from tmem_core.schema import Question


class Planted:
    """BM25's contexts, one of them followed by the planted id."""

    def __init__(self, inner: ContextMethod) -> None:
        self.inner = inner
        self.qid, _, self.shown = os.environ.get("TMEM_PLANTED", "").partition("=")

    @property
    def name(self) -> str:
        return self.inner.name

    def retrieve(self, question: Question) -> Evidence:
        return self.inner.retrieve(question)

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  count_tokens: TokenCounter) -> Context:
        context = self.inner.construct(question, evidence, llm, count_tokens)
        if question.qid != self.qid:
            return context
        return dataclasses.replace(context, text=f"{context.text}\n(see {self.shown})")


@method("planted_bm25", description="BM25 with a planted gold id (test method)")
def _planted(env: MethodEnv, _params: object, name: str) -> ContextMethod:
    return Planted(ranked(RankedRetrieval(env.index_store, "bm25", False, name), env))
