"""Reciprocal-rank fusion of ranked lists."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import TypeVar

T = TypeVar("T", bound=Hashable)

RRF_K = 60


def rrf(rankings: Sequence[Sequence[T]], k: int = RRF_K) -> list[T]:
    """Fuse rankings by sum of 1/(k + rank) (rank from 1); ties keep first-seen order."""
    score: dict[T, float] = defaultdict(float)
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            score[item] += 1.0 / (k + rank)
    return sorted(score, key=lambda item: -score[item])
