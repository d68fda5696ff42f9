"""Each benchmark's evaluation protocol: answer format, abstention phrase, judge per question."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tmem_core.schema import Gold, Question

TEMPORAL_CATEGORIES = frozenset({"temporal", "temporal-reasoning", "F_TP"})


@dataclass(frozen=True)
class Protocol:
    """How one benchmark's answers are requested and scored.

    `judge_for(question, gold)` names the bundled judge prompt for a question, or None when
    the question is scored without an LLM (multiple choice by letter, LoCoMo's adversarial
    category by its not-mentioned rule).
    """

    benchmark: str
    judge_for: Callable[[Question, Gold], str | None]
    abstention_phrase: str | None = None
    abstention_instruction: str | None = None
    reports_separately: frozenset[str] = frozenset()  # categories outside the judged score


def _locomo_judge(q: Question, g: Gold) -> str | None:
    return None if q.category == "adversarial" else "judge/locomo"


_LME_TYPES = {
    "temporal-reasoning": "judge/longmemeval_temporal",
    "knowledge-update": "judge/longmemeval_knowledge_update",
    "single-session-preference": "judge/longmemeval_preference",
}


def _longmemeval_judge(q: Question, g: Gold) -> str | None:
    if g.answer_kind == "abstention":
        return "judge/longmemeval_abstention"
    return _LME_TYPES.get(q.category, "judge/longmemeval_default")


def _evermembench_judge(q: Question, g: Gold) -> str | None:
    return None if g.answer_kind == "choice" else "judge/evermembench_open"


PROTOCOLS: dict[str, Protocol] = {
    "locomo": Protocol("locomo", _locomo_judge,
                       abstention_phrase="Not mentioned in the conversation.",
                       reports_separately=frozenset({"adversarial"})),
    "longmemeval": Protocol(
        "longmemeval", _longmemeval_judge,
        abstention_instruction="If the answer is not in the evidence, say that you cannot "
                               "answer from what you know."),
    "groupmembench": Protocol("groupmembench", lambda q, g: "judge/groupmembench",
                              abstention_phrase="No information available."),
    "evermembench": Protocol("evermembench", _evermembench_judge),
    "synthetic": Protocol("synthetic", lambda q, g: "judge/synthetic",
                          abstention_phrase="No information available."),
}


def get_protocol(benchmark: str) -> Protocol:
    try:
        return PROTOCOLS[benchmark]
    except KeyError:
        raise ValueError(f"no evaluation protocol for {benchmark!r}; known: "
                         f"{', '.join(sorted(PROTOCOLS))}") from None
