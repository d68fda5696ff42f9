"""A test method: BM25 whose retrieval takes a while and counts how many run at once in this
process (for the bound on an actor's retrievals)."""

from __future__ import annotations

import threading
import time

from tmem_core.llm._tokens import TokenCounter
from tmem_core.methods import LLM, Context, ContextMethod, Evidence, MethodEnv, method, ranked
from tmem_core.methods.baselines._ranked import RankedRetrieval
from tmem_core.schema import Question


class Counting:
    """BM25, each retrieval held 50 ms; `most` is the most retrievals seen at once."""

    lock = threading.Lock()
    running = 0
    most = 0

    def __init__(self, inner: ContextMethod) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    def retrieve(self, question: Question) -> Evidence:
        with Counting.lock:
            Counting.running += 1
            Counting.most = max(Counting.most, Counting.running)
        try:
            time.sleep(0.05)
            return self.inner.retrieve(question)
        finally:
            with Counting.lock:
                Counting.running -= 1

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  count_tokens: TokenCounter) -> Context:
        return self.inner.construct(question, evidence, llm, count_tokens)


@method("counting_bm25", description="BM25 counting its retrievals at once (test method)")
def _counting(env: MethodEnv, _params: object, name: str) -> ContextMethod:
    return Counting(ranked(RankedRetrieval(env.index_store, "bm25", False, name), env))
