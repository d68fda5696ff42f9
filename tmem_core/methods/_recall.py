"""Evidence recall@k of the ranked methods (the papers' Exp-2), without an LLM.

Recall = mean, over questions with gold evidence (not abstentions), of the fraction of their
gold evidence ids among the k messages a method keeps: k is each method's `top_k`, so every
method keeps k messages and T-MEM also seeds k anchors (Exp-2 protocol). For naive RAG, k
counts messages: whole chunks are taken until they hold k. Gold evidence is read by the
scorer only.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tmem_core.evaluation import RecallTable, evidence_recall, recall_scorable
from tmem_core.methods._registry import MethodEnv, get_method
from tmem_core.retrieval import Conversation, IndexStore, query_text
from tmem_core.schema import DataError, Gold, Question

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
    progress: RecallProgress | None = None,
) -> RecallTable:
    """Recall of every ranked method at every k over the scorable `questions` (`params`:
    each method's parameter table, as in a sweep)."""
    progress = progress or RecallProgress()
    scored = [q for q in questions if recall_scorable(gold[q.qid])]
    if not scored:
        raise DataError("no question with gold evidence to score")
    for name in methods:
        if not get_method(name).ranked:
            raise DataError(f"method {name!r} does not rank messages without an LLM; recall@k "
                            f"takes a ranked method")
    store = IndexStore(conversations)
    _warm(store, scored, progress)
    table = RecallTable()
    for name in methods:
        by_k = {k: get_method(name).create(MethodEnv(conversations, k, RECALL_BUDGET_TOKENS,
                                                     store), (params or {}).get(name))
                for k in ks}
        started = time.perf_counter()
        for n, q in enumerate(scored, start=1):
            for k, built in by_k.items():
                table.add(name, k, q.category, evidence_recall(built.retrieve(q).ids,
                                                               gold[q.qid]))
            progress.method(name, n, len(scored), time.perf_counter() - started)
    return table


def _warm(store: IndexStore, questions: Sequence[Question], progress: RecallProgress) -> None:
    """Embed all queries in one batch and build (or load) every index."""
    started = time.perf_counter()
    store.embeddings.embed(sorted({query_text(q) for q in questions}))
    for conv_id in sorted({q.conv_id for q in questions}):
        for metadata in (False, True):
            store.index(conv_id, metadata)
    progress.indexes(time.perf_counter() - started, store)
