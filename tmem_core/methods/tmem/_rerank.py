"""Rankings of discovery candidates without an LLM, behind the `Selector` seam."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tmem_core.methods.tmem._discovery import Candidate
from tmem_core.schema import Question


class Selector(Protocol):
    """Chooses evidence among candidates for a question, at most `top_k` (None: no cut);
    returns ids, best first."""

    def select(self, question: Question, candidates: Sequence[Candidate],
               top_k: int | None) -> list[str]: ...


@dataclass(frozen=True)
class ContextReranker:
    """The project's reranker (a project addition: the paper does not name its reranker):
    score = relevance + weight * support.

    Support is the relevance of a candidate's nearby group neighbours, so a message that
    shares no words with the question (an update, an answer turn) still ranks high when its
    episode is relevant. It orders the LLM selection's ties (within KEY, within SUPPORT) and,
    alone, is the `tmem_heuristic` ranking. The best-scoring candidates are cut to `top_k`.
    """

    support_weight: float = 0.5

    def select(self, question: Question, candidates: Sequence[Candidate],
               top_k: int | None) -> list[str]:
        ranked = sorted(candidates, key=lambda c: -(c.relevance + self.support_weight * c.support))
        return [c.message.msg_id for c in ranked[:top_k]]


@dataclass(frozen=True)
class SimilarityFilter:
    """The candidate pool as discovery hands it to selection: by relevance to the query (the
    similarity filter's own order), cut to `top_k`."""

    def select(self, question: Question, candidates: Sequence[Candidate],
               top_k: int | None) -> list[str]:
        ranked = sorted(candidates, key=lambda c: -c.relevance)
        return [c.message.msg_id for c in ranked[:top_k]]
