"""Evidence selection from discovery candidates: the seam for the LLM KEY/SUPPORT selector."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tmem_core.methods.tmem._discovery import Candidate
from tmem_core.retrieval import Budget
from tmem_core.schema import Question


class Selector(Protocol):
    """Chooses evidence among candidates for a question, within the budget; returns ids."""

    def select(self, question: Question, candidates: Sequence[Candidate],
               budget: Budget) -> list[str]: ...


@dataclass(frozen=True)
class ContextReranker:
    """The no-LLM selector ("T-Mem Reranked"): score = relevance + weight * support.

    Support is the relevance of a candidate's nearby group neighbours, so a message that
    shares no words with the question (an update, an answer turn) still ranks high when its
    episode is relevant. The best-scoring candidates are cut to the budget.
    """

    support_weight: float = 0.5

    def select(self, question: Question, candidates: Sequence[Candidate],
               budget: Budget) -> list[str]:
        ranked = sorted(candidates, key=lambda c: -(c.relevance + self.support_weight * c.support))
        return [m.msg_id for m in budget.take(c.message for c in ranked)]
