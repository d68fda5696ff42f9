"""Evidence recall@k (the papers' Exp-2) of the ranked methods, without an LLM, and of the
methods that select their evidence with one (T-MEM's configurations, `SelectsEvidence`).

Recall = mean, over questions with gold evidence (not abstentions), of the fraction of their
gold evidence ids among the messages a method keeps at depth k (its `top_k`): a ranked method
keeps k messages; T-MEM seeds k anchors and keeps what its selection keeps (KEY, then
SUPPORT: `tmem` all of it, as the paper's unrestricted T-MEM; `tmem_reranked` and
`tmem_global` its Top-k). For naive RAG, k counts messages: whole chunks are taken until they
hold k. Gold evidence is read by the scorer only.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tmem_core import DataError
from tmem_core.evaluation import RecallTable, evidence_recall, recall_scorable
from tmem_core.methods._context import LLM, ContextMethod, SelectsEvidence
from tmem_core.methods._registry import MethodEnv, get_method
from tmem_core.retrieval import Conversation, IndexStore, query_text
from tmem_core.schema import Gold, Question

RECALL_BUDGET_TOKENS = 8192  # unused: the ranked methods keep k messages


@dataclass
class RecallProgress:
    """Progress lines on stderr: index builds, then questions per method."""

    write: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr))
    every: int = 50

    def indexes(self, seconds: float, store: IndexStore) -> None:
        self.write(f"indexes ready in {seconds:.0f}s (built {store.stats.built}, cached "
                   f"{store.stats.loaded}, embedded {store.embeddings.embedded} texts)")

    def method(self, name: str, done: int, total: int, seconds: float) -> None:
        if done == total or done % self.every == 0:
            self.write(f"{name}: {done}/{total} questions ({seconds:.0f}s)")


def evidence_recall_at_k(
    questions: Sequence[Question], gold: Mapping[str, Gold],
    conversations: Mapping[str, Conversation], methods: Sequence[str], ks: Sequence[int],
    params: Mapping[str, Mapping[str, Any]] | None = None,
    progress: RecallProgress | None = None, llm: LLM | None = None,
) -> RecallTable:
    """Recall of every method at every k over the scorable `questions` (`params`: each
    method's parameter table, as in a sweep; `llm`: the backbone that selects the evidence of
    methods that select with one)."""
    progress = progress or RecallProgress()
    scored = [q for q in questions if recall_scorable(gold[q.qid])]
    if not scored:
        raise DataError("no question with gold evidence to score")
    store = IndexStore(conversations)
    built = {name: {k: _scorable(name, MethodEnv(conversations, k, RECALL_BUDGET_TOKENS, store),
                                 (params or {}).get(name), llm) for k in ks}
             for name in methods}
    _warm(store, scored, progress)
    table = RecallTable()
    for name, by_k in built.items():
        started = time.perf_counter()
        for n, q in enumerate(scored, start=1):
            for k, method in by_k.items():
                table.add(name, k, q.category, evidence_recall(kept_ids(method, q, llm),
                                                               gold[q.qid]))
            progress.method(name, n, len(scored), time.perf_counter() - started)
    return table


def kept_ids(method: ContextMethod, question: Question, llm: LLM | None) -> tuple[str, ...]:
    """The messages `method` keeps for `question`: its retrieval, or what it selects of it."""
    evidence = method.retrieve(question)
    if isinstance(method, SelectsEvidence):
        return method.selected_ids(question, evidence, llm)
    return evidence.ids


def _scorable(name: str, env: MethodEnv, raw: Mapping[str, Any] | None,
              llm: LLM | None) -> ContextMethod:
    spec = get_method(name)
    method = spec.create(env, raw)
    if spec.ranked:
        return method
    if not isinstance(method, SelectsEvidence):
        raise DataError(f"method {name!r} neither ranks messages without an LLM nor selects "
                        f"its evidence with one; recall@k takes a method that does")
    if llm is None:
        raise DataError(f"method {name!r} selects its evidence with an LLM: name a backbone")
    return method


def _warm(store: IndexStore, questions: Sequence[Question], progress: RecallProgress) -> None:
    """Embed all queries in one batch and build (or load) every index."""
    started = time.perf_counter()
    store.embeddings.embed(sorted({query_text(q) for q in questions}))
    for conv_id in sorted({q.conv_id for q in questions}):
        for metadata in (False, True):
            store.index(conv_id, metadata)
    progress.indexes(time.perf_counter() - started, store)
