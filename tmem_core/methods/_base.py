"""The shared method interface: evidence for one question under a budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tmem_core.retrieval import Budget
from tmem_core.schema import Question


@dataclass(frozen=True)
class Evidence:
    """Message ids a method selected for a question, in presentation order.

    `trace` holds method-specific detail for inspection (e.g. T-MEM's `Discovery`).
    """

    qid: str
    method: str
    ids: tuple[str, ...]
    trace: object | None = None


class EvidenceMethod(Protocol):
    """Plain Python: call it on one question; it reads only public question fields."""

    @property
    def name(self) -> str: ...

    def __call__(self, question: Question, budget: Budget) -> Evidence: ...


def evidence(method: str, question: Question, ids: Sequence[str],
             trace: object | None = None) -> Evidence:
    return Evidence(question.qid, method, tuple(ids), trace)
