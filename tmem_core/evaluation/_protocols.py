"""A benchmark's evaluation protocol: answer format, abstention phrase, judge per question.

Each benchmark registers its protocol with its loader (`tmem_core.benchmarks.benchmark`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tmem_core.schema import Gold, Question

TokenF1 = Callable[[str, str | None, str], float]  # (prediction, gold answer, category)


@dataclass(frozen=True)
class Protocol:
    """How one benchmark's answers are requested and scored.

    `judge_for(question, gold)` names the bundled judge prompt for a question, one of
    `judge_prompts`, or None when the question is scored without an LLM (multiple choice by
    letter, LoCoMo's adversarial category by its not-mentioned rule). `token_f1` is the
    benchmark's own token-F1 score where it defines one; `temporal_categories` get the
    answer prompt's instruction on dates; the answer prompt asks for `abstention_phrase` when
    the evidence lacks the answer only where the benchmark's own answer protocol offers it:
    in `abstention_categories` (None: every question); `date_tolerance_days` is how far off
    a date may be and still count as the gold one (what judge calibration shifts dates
    beyond); `judge_notes` say how the benchmark's judging protocol is followed where its
    judge prompts do not (a category its source leaves unjudged, a judge its release keeps
    out of reach), for the run contract.
    """

    judge_for: Callable[[Question, Gold], str | None]
    judge_prompts: tuple[str, ...]
    abstention_phrase: str | None = None
    abstention_categories: frozenset[str] | None = None
    reports_separately: frozenset[str] = frozenset()  # categories outside the judged score
    temporal_categories: frozenset[str] = frozenset()
    token_f1: TokenF1 | None = None
    date_tolerance_days: int = 0
    judge_notes: tuple[str, ...] = ()


def one_judge(prompt: str) -> Callable[[Question, Gold], str | None]:
    """A judge rule that gives every question the same judge prompt."""
    return lambda _question, _gold: prompt
